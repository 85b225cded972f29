"""Host cost of a call, against the peer on the same call path, interleaved in rounds.

Four pairs, each timed in blocks of host calls alternating A B B A ... (`common.interleaved_runs`
with a host timer), for a decode linear layer (16 x 6144 x 4096, weights (n, k)), 4096^3, a
prefill MLP shape (2048 x 5632 x 2048: stream-K pairs, a cluster launch and zero-filled flags per
call) and a decode shape run as cluster split-K (4 x 2048 x 5632):

- a checked Kernel call on torch tensors (torch in, torch out) against `torch.matmul(a, w.T)`;
- the Kernel's `as_torch_op` against `F.linear(a, w)`, with w a plain tensor and, under
  `torch.no_grad()`, an `nn.Parameter` (a layer's weight), one or eight taking turns (a model's
  layers: every call another weight), and with 41 inputs in turn besides (`op_moving`: a decode
  step's activations, at new addresses on most calls, so the TMA descriptors are encoded per call);
- a checked call on CuPy arrays (vector add, out= passed) against a CuPy RawKernel launch;
- an nn.Linear on a (4, m / 4, k) input routed to the op by `route_linears`'s router, against the
  same module's own forward (`routed_linear_<shape>_vs_nn_linear`: what a model's layer pays);
- and, for the loop a decode step runs, the wall time of `--loop` back-to-back calls plus one
  synchronize (GPU time included), ours against torch's.

Host microseconds per call are medians over rounds of a block of `--calls` calls (short enough
that the GPU queue never fills, so the host is what is timed); ratios are ours / peer (lower is
better; the targets are <= 1.2x for the torch paths and <= 1.0x against RawKernel). The CuPy
pairs, a few microseconds a call, run after one discarded block of each side, in 16x the rounds
(single blocks there vary by 10-15% between rounds on the device's host). Their earlier method,
blocks of 5x the calls with no warm-up, read 0.975-1.053x in six runs: the first pair timed ran
in a slower regime (both sides ~1.5x slower) than the pairs after it. SM clock and power are
sampled throughout.

Run on a GPU machine:  python benchmarks/bench_host_cost.py [--rounds 8]
Writes benchmarks/results/host_cost_<date>.json (or $OUT/) and prints a table last.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parent.parent))  # this checkout's mgpu_lab, also without PYTHONPATH
from common import GpuSampler, interleaved_runs, table, write_record  # noqa: E402

# The HF benchmark's kinds of call besides: a prefill MLP shape the model runs as stream-K pairs
# (cluster launch, zero-filled flags from torch's allocator on every call) and a decode shape it
# runs as cluster split-K (cluster launch).
SHAPES = {"decode": (16, 6144, 4096), "square": (4096, 4096, 4096), "prefill_mlp": (2048, 5632, 2048),
          "decode_cluster": (4, 2048, 5632)}
LAYERS = 8  # op_layers: this many nn.Parameter weights take turns, as a model's layers do
MOVING = 41  # op_moving: this many inputs take turns, more than the parameter blocks a kernel keeps (32)


class _Runs:
    def __init__(self, runs_ms: list[float]):
        self.runs_ms = runs_ms


def host_timer(calls: int, sync, gpu_included: bool = False):
    """A block of `calls` calls in ms per call, the queue drained before it: host time only, or
    (`gpu_included`) the wall time until the last call's work is done."""
    def timer(fn):
        sync()
        t0 = time.perf_counter()
        for i in range(calls):
            fn(i)
        if gpu_included:
            sync()
        per_call = (time.perf_counter() - t0) * 1e3 / calls
        sync()
        return _Runs([per_call])
    return timer


def pair(fns: dict, rounds: int, timer) -> dict[str, float]:
    runs, _ = interleaved_runs(fns, rounds, timer=timer)
    return {name: statistics.median(r) * 1e3 for name, r in runs.items()}  # us


def routed_linear_pair(torch, op, weight, x3, rounds: int, timer) -> dict[str, float]:
    """An nn.Linear module called on a (4, m / 4, k) input, as a model's layers call it: routed
    to our op by the library's router (`mgpu_lab.kernels.gemm.torch_linear`: the op over the
    input's own shape, `TorchOp.reshaped`), against the same module's own forward (F.linear). Host us."""
    from mgpu_lab.kernels.gemm.torch_linear import LinearRouter

    n, k = weight.shape
    plain = torch.nn.Linear(k, n, bias=False, device=weight.device, dtype=weight.dtype)
    routed = torch.nn.Linear(k, n, bias=False, device=weight.device, dtype=weight.dtype)
    viewed = torch.nn.Linear(k, n, bias=False, device=weight.device, dtype=weight.dtype)
    plain.weight = routed.weight = viewed.weight = weight
    LinearRouter(lambda *shape: op).route(routed)
    # a diagnostic: the same op without `reshaped` (a plain function), so the router views the
    # input as (m, k) and the output back, as it did before TorchOp.reshaped
    LinearRouter(lambda *shape: lambda *tensors: op(*tensors)).route(viewed)
    want = plain(x3).float()
    for module in (routed, viewed):
        err = float((module(x3).float() - want).norm() / want.norm())
        assert err < 2e-2, ("routed_linear", err)
    return pair({"ours": lambda i: routed(x3), "peer": lambda i: plain(x3), "views": lambda i: viewed(x3)},
                rounds, timer)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--loop", type=int, default=200)
    opts = parser.parse_args()
    import cupy
    import torch
    import torch.nn.functional as F

    from mgpu_lab.kernels.gemm import make_gemm

    sync = torch.cuda.synchronize
    figures: dict[str, float] = {}
    rows = [("call path", "shape", "ours us", "peer us", "ratio", "peer")]
    gen = torch.Generator(device="cuda").manual_seed(0)
    with GpuSampler() as gpu:
        for label, (m, n, k) in SHAPES.items():
            kernel = make_gemm(m, n, k, transpose_b=True)
            op = kernel.as_torch_op(f"mgpu_host_cost::linear_{label}")
            a = torch.randn((m, k), generator=gen, device="cuda").to(torch.bfloat16)
            w = torch.randn((n, k), generator=gen, device="cuda").to(torch.bfloat16)
            want = torch.matmul(a.float(), w.float().T)
            for name, got in (("call", kernel(a, w)), ("op", op(a, w))):
                err = float((got.float() - want).norm() / want.norm())
                assert isinstance(got, torch.Tensor) and err < 2e-2, (label, name, err)
            host = pair({"ours": lambda i: kernel(a, w), "peer": lambda i: torch.matmul(a, w.T)},
                        opts.rounds, host_timer(opts.calls, sync))
            op_host = pair({"ours": lambda i: op(a, w), "peer": lambda i: F.linear(a, w)},
                           opts.rounds, host_timer(opts.calls, sync))
            # Where the op's time goes (diagnostics, no target): through torch's dispatcher
            # (`torch.ops.ns.name`, what torch.compile's graph calls) and the Kernel's own call.
            dispatched = pair({"ours": lambda i: op.packet(a, w), "peer": lambda i: F.linear(a, w)},
                              opts.rounds, host_timer(opts.calls, sync))
            figures[f"host_us_op_dispatcher_{m}x{n}x{k}"] = dispatched["ours"]
            rows.append(("torch.ops dispatcher", f"{m}x{n}x{k}", f"{dispatched['ours']:.1f}", f"{dispatched['peer']:.1f}",
                         f"{dispatched['ours'] / dispatched['peer']:.3f}", "f_linear (diagnostic)"))
            loop = pair({"ours": lambda i: op(a, w), "peer": lambda i: F.linear(a, w)},
                        opts.rounds, host_timer(opts.loop, sync, gpu_included=True))
            # A layer's weight is an nn.Parameter (what nn.Linear and model code pass), under no_grad;
            # and LAYERS of them in turn (each call another weight: the parameter block changes).
            weight = torch.nn.Parameter(w)
            weights = [weight] + [torch.nn.Parameter(torch.randn((n, k), generator=gen, device="cuda")
                                                     .to(torch.bfloat16)) for _ in range(LAYERS - 1)]
            with torch.no_grad():
                op_param = pair({"ours": lambda i: op(a, weight), "peer": lambda i: F.linear(a, weight)},
                                opts.rounds, host_timer(opts.calls, sync))
                op_layers = pair({"ours": lambda i: op(a, weights[i % LAYERS]),
                                  "peer": lambda i: F.linear(a, weights[i % LAYERS])},
                                 opts.rounds, host_timer(opts.calls, sync))
                # A decode step's activations sit at new addresses on most calls (the eager decode
                # refilled 95% of its parameter blocks): more inputs in turn than blocks are kept,
                # so every call of ours encodes the input's and the output's TMA descriptors.
                moving = [a.clone() for _ in range(MOVING)]
                op_moving = pair({"ours": lambda i: op(moving[i % MOVING], weights[i % LAYERS]),
                                  "peer": lambda i: F.linear(moving[i % MOVING], weights[i % LAYERS])},
                                 opts.rounds, host_timer(opts.calls, sync))
                routed = routed_linear_pair(torch, op, weight, a.view(4, m // 4, k), opts.rounds,
                                            host_timer(opts.calls, sync))
            shape = f"{m}x{n}x{k}"
            figures[f"host_us_routed_linear_views_{shape}"] = routed["views"]
            rows.append(("routed, views (diagnostic)", shape, f"{routed['views']:.1f}", f"{routed['peer']:.1f}",
                         f"{routed['views'] / routed['peer']:.3f}", "nn_linear"))
            for key, result, peer in (("call", host, "torch_matmul"), ("op", op_host, "f_linear"),
                                      ("op_loop", loop, "f_linear_loop"), ("op_param", op_param, "f_linear"),
                                      ("op_layers", op_layers, "f_linear"), ("op_moving", op_moving, "f_linear"),
                                      ("routed_linear", routed, "nn_linear")):
                figures[f"host_us_{key}_{shape}_ours"] = result["ours"]
                figures[f"host_us_{key}_{shape}_{peer}"] = result["peer"]
                figures[f"{key}_{shape}_vs_{peer}"] = result["ours"] / result["peer"]
                rows.append((key, shape, f"{result['ours']:.1f}", f"{result['peer']:.1f}",
                             f"{result['ours'] / result['peer']:.3f}", peer))

        from bench_launch import N, vector_add_pair

        vadd, raw, x, y, out, out_raw, grid, n4 = vector_add_pair()
        cupy_sync = cupy.cuda.get_current_stream().synchronize
        # Short blocks (opts.calls launches of a ~2 us kernel) never fill the launch queue, so the
        # GPU never paces the host; many rounds, after one discarded, for a stable median. (Blocks of
        # 1000 after no warm-up read 5-8 us a call for both sides, the ratio 0.97-1.05 run to run.)
        cupy_rounds, cupy_timer = opts.rounds * 16, host_timer(opts.calls, cupy_sync)

        def checked_call(i):
            return vadd(x, y, out=out)

        def raw_launch(i):
            return raw(grid, (256,), (x, y, out_raw, n4))

        for fn in (checked_call, raw_launch):
            cupy_timer(fn)
        checked = pair({"ours": checked_call, "peer": raw_launch}, cupy_rounds, cupy_timer)
        # Diagnostics (no target): the launcher's generated call alone, without Kernel.__call__,
        # and launch_unchecked (no checks at all), against the same RawKernel launch.
        generated = vadd.launcher.single.call
        parts = pair({"ours": lambda i: generated((x, y), out, None), "peer": raw_launch}, cupy_rounds, cupy_timer)
        bare = pair({"ours": lambda i: vadd.launch_unchecked(x, y, out), "peer": raw_launch}, cupy_rounds, cupy_timer)
        figures["host_us_cupy_generated_call"] = parts["ours"]
        figures["host_us_cupy_launch_unchecked"] = bare["ours"]
        rows.append(("generated call only", f"vadd {N}", f"{parts['ours']:.2f}", f"{parts['peer']:.2f}",
                     f"{parts['ours'] / parts['peer']:.3f}", "RawKernel (diagnostic)"))
        rows.append(("launch_unchecked", f"vadd {N}", f"{bare['ours']:.2f}", f"{bare['peer']:.2f}",
                     f"{bare['ours'] / bare['peer']:.3f}", "RawKernel (diagnostic)"))
        figures["host_us_cupy_checked_call_ours"] = checked["ours"]
        figures["host_us_cupy_rawkernel"] = checked["peer"]
        figures["cupy_checked_call_vs_rawkernel"] = checked["ours"] / checked["peer"]
        rows.append(("cupy call, out=", f"vadd {N}", f"{checked['ours']:.2f}", f"{checked['peer']:.2f}",
                     f"{checked['ours'] / checked['peer']:.3f}", "RawKernel"))
    path = write_record("host_cost", figures, notes={"rounds": opts.rounds, "calls_per_block": opts.calls,
                                                     "loop_calls": opts.loop, "shapes": SHAPES,
                                                     "torch": torch.__version__}, sampler=gpu)
    print(f"GPU: {gpu.summary()}")
    print(f"record: {path}")
    print(table(rows))


if __name__ == "__main__":
    main()
