"""Flash attention forward (mgpu_lab/kernels/attention.py) against torch SDPA with the cuDNN backend and
with the flash backend, in the same run, interleaved in rounds (A B B A ...) per peer.

Shapes: head dims 64/128/256 x seq 512/1k/4k/16k with 16k tokens in total (batch = 16384 / seq)
and 2048 / head_dim heads (a 2048-wide model), causal and not, plus one GQA shape. bf16 inputs.
Every kernel's output is compared with cuDNN's before it is timed.

Keys: `attention_fwd_bf16_d128_s4096_vs_cudnn` (and `_causal`, `_vs_flash`) are speedups:
peer median ms / ours median ms, above 1 means ours is faster. `..._tflops` beside them.
"ours" is make_attention's default, persistent or not (`default_persistent`): `..._persistent`
records which (1 or 0), and `..._persistent_speedup` times the other choice against it in the same
rounds: non-persistent ms / persistent ms (above 1: the persistent kernel is faster), whichever
was the default. `..._d128_s4096_pingpong_speedup` and the other `_speedup` keys: one kernel
option against another (VARIANTS: pingpong on/off, K/V stages, wider K/V tiles, the persistent
output buffer), ours against ours, same ratio.

The full run adds Pallas Mosaic GPU's attention (float16, attention_pallas_peer.py) on a few shapes:
`attention_fwd_f16_d128_s4096_vs_pallas_mosaic`.

Run on a GPU machine:  python benchmarks/bench_attention.py [--quick] [--no-pallas]
Writes a record `attention_<time>_<commit>.json` (or under $OUT) and prints a table last.
"""

from __future__ import annotations

import argparse
import math
import time

from attention_pallas_peer import pallas_attention_peer
from common import GpuSampler, interleaved_rounds, table, write_record

from mgpu_lab.kernels.attention import make_attention

TOKENS = 16384
MODEL_WIDTH = 2048


def _shapes(quick: bool) -> list[dict]:
    if quick:  # one shape of each default: d128 s4096 one block per tile, d64 s512 persistent
        return [dict(d=128, seq=4096, causal=False), dict(d=128, seq=4096, causal=True),
                dict(d=64, seq=512, causal=False), dict(d=64, seq=512, causal=True)]
    shapes = [dict(d=d, seq=seq, causal=causal) for d in (64, 128, 256) for seq in (512, 1024, 4096, 16384)
              for causal in (False, True)]
    shapes.append(dict(d=128, seq=4096, causal=False, kv_heads=2))  # GQA: 16 query heads on 2 KV heads
    return shapes


def _tensors(batch, heads, kv_heads, seq, d):
    """q, k, v, out, lse as torch tensors (the peers' side), and CuPy views of the same memory
    (ours, for `launch_unchecked`)."""
    import torch

    shapes = [(batch, h, seq, d) for h in (heads, kv_heads, kv_heads, heads)]
    tensors = [torch.randn(s, device="cuda", dtype=torch.bfloat16) for s in shapes[:3]]
    tensors += [torch.empty(shapes[3], device="cuda", dtype=torch.bfloat16),
                torch.empty((batch, heads, seq), device="cuda", dtype=torch.float32)]
    return tensors, [_cupy_view(t) for t in tensors]


def _cupy_view(t):
    import cupy

    from mgpu_lab.builder.dtypes import numpy_dtype

    memory = cupy.cuda.UnownedMemory(t.data_ptr(), t.numel() * t.element_size(), t, device_id=t.device.index)
    return cupy.ndarray(tuple(t.shape), numpy_dtype(str(t.dtype).removeprefix("torch.")),
                        cupy.cuda.MemoryPointer(memory, 0))


# (name, head_dim, candidate options, baseline options, seq): what one choice buys, ours against ours
VARIANTS = [
    ("pingpong", 128, {"pingpong": True}, {"pingpong": False}, 4096),
    ("stages3_vs_2", 128, {}, {"stages": 2}, 4096),
    ("kv176_vs_128", 128, {"block_kv": 176, "stages": 2}, {}, 4096),
    ("kv192_vs_128", 64, {"block_kv": 192}, {}, 4096),
    ("kv80_vs_64", 256, {"block_kv": 80}, {"block_kv": 64}, 4096),  # 80: the default with one block per tile
    # persistent d128: 2 stages with an output buffer of its own (the default) vs 3 stages, output over Q
    ("persistent_outbuf_stages2_vs_3", 128, {"persistent": True}, {"persistent": True, "stages": 3}, 512),
]


def _variant(head_dim: int, causal: bool, candidate: dict, baseline: dict, seq: int = 4096) -> float:
    """Speedup of the kernel built with `candidate` options over the one built with `baseline`
    (16k tokens), interleaved: baseline ms / candidate ms."""
    batch, heads = TOKENS // seq, MODEL_WIDTH // head_dim
    _, arrays = _tensors(batch, heads, heads, seq, head_dim)
    kernels = [make_attention(batch, heads, seq, seq, head_dim, causal=causal, **options)
               for options in (candidate, baseline)]
    for kern in kernels:
        kern(*arrays[:3], out=tuple(arrays[3:]))
    timing = interleaved_rounds(lambda i: kernels[0].launch_unchecked(*arrays),
                                lambda i: kernels[1].launch_unchecked(*arrays), 4, warmup=3, iters=20)
    return timing.b_ms / timing.a_ms


def profile(causal: bool) -> None:
    """Run d 128, seq 4096 (16k tokens) once with the on-device profiler and print where each
    warpgroup's time goes (2 K/V stages: the profile buffer needs smem too). Saves the Perfetto
    trace under $OUT when set."""
    import os

    from mgpu_lab.profiler.perfetto_export import save_perfetto

    batch, heads, seq = TOKENS // 4096, MODEL_WIDTH // 128, 4096
    _, arrays = _tensors(batch, heads, heads, seq, 128)
    kern = make_attention(batch, heads, seq, seq, 128, causal=causal, stages=2, profile=True)
    kern(*arrays[:3], out=tuple(arrays[3:]))
    trace = kern.last_trace
    print(trace.summary())
    if os.environ.get("OUT"):
        print("trace:", save_perfetto(trace, os.path.join(os.environ["OUT"], f"{kern.name}.perfetto")))


def main() -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two shapes, fewer rounds")
    parser.add_argument("--profile", action="store_true", help="only the profiled region summary (d 128, s 4096)")
    parser.add_argument("--no-pallas", action="store_true", help="skip the Pallas Mosaic GPU peer (float16)")
    args = parser.parse_args()
    if args.profile:
        for causal in (False, True):
            profile(causal)
        return
    started = time.time()
    figures: dict = {}
    rows = [("shape", "ours TF/s", "cuDNN TF/s", "flash TF/s", "vs cuDNN", "vs flash", "err vs SDPA",
             "persistent", "pers/non")]
    peers = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    with GpuSampler() as gpu:
        for shape in _shapes(args.quick):
            d, seq, causal = shape["d"], shape["seq"], shape["causal"]
            heads = MODEL_WIDTH // d
            kv_heads = shape.get("kv_heads", heads)
            batch = TOKENS // seq
            tag = f"attention_fwd_bf16_d{d}_s{seq}" + ("_causal" if causal else "") + \
                (f"_gqa{heads // kv_heads}" if kv_heads != heads else "")
            (q, k, v, out, lse), arrays = _tensors(batch, heads, kv_heads, seq, d)
            kern = make_attention(batch, heads, seq, seq, d, causal=causal, kv_heads=kv_heads)
            kern(*arrays[:3], out=tuple(arrays[3:]))
            persistent = kern.name.endswith("_persistent")
            figures[f"{tag}_persistent"] = int(persistent)
            flops = 4.0 * batch * heads * seq * seq * d * (0.5 if causal else 1.0)
            rounds = 8 if seq <= 4096 else 4  # cheap next to the builds; run-to-run spread is the limit
            iters = 20 if seq < 16384 else 10

            def ours(i):
                kern.launch_unchecked(*arrays)

            result_row = {"ours": None, "cudnn": None, "flash": None}
            ratios = {}
            err = float("nan")
            for peer, backend in peers.items():
                def theirs(i, backend=backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                          enable_gqa=kv_heads != heads)
                try:
                    with sdpa_kernel(backend):
                        reference = theirs(0)
                        if math.isnan(err):  # against cuDNN, or flash where cuDNN refuses the shape
                            err = ((out.float() - reference.float()).norm() / reference.float().norm()).item()
                            if not err < 2e-2:  # timed anyway, flagged in the table and the record
                                print(f"WRONG {tag}: relative error {err:.2e} against {peer}", flush=True)
                        timing = interleaved_rounds(ours, theirs, rounds, warmup=3, iters=iters)
                except Exception as e:  # noqa: BLE001 - a backend that rejects the shape is reported, not fatal
                    figures[f"{tag}_vs_{peer}_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                    continue
                ratios[peer] = timing.b_ms / timing.a_ms
                figures[f"{tag}_vs_{peer}"] = ratios[peer]
                figures[f"{tag}_{peer}_ms"] = timing.b_ms
                figures[f"{tag}_{peer}_tflops"] = flops / timing.b_ms / 1e9
                result_row[peer] = flops / timing.b_ms / 1e9
                if result_row["ours"] is None:
                    figures[f"{tag}_ours_ms"] = timing.a_ms
                    figures[f"{tag}_ours_tflops"] = result_row["ours"] = flops / timing.a_ms / 1e9
            figures[f"{tag}_rel_error_vs_sdpa"] = err
            try:  # the other persistence choice against the default, same rounds scheme
                other = make_attention(batch, heads, seq, seq, d, causal=causal, kv_heads=kv_heads,
                                       persistent=not persistent)
                other(*arrays[:3], out=tuple(arrays[3:]))
                other_err = ((out.float() - reference.float()).norm() / reference.float().norm()).item()
                if not other_err < 2e-2:
                    print(f"WRONG {tag} persistent={not persistent}: relative error {other_err:.2e}", flush=True)
                    figures[f"{tag}_persistent_alt_rel_error"] = other_err
                timing = interleaved_rounds(ours, lambda i: other.launch_unchecked(*arrays), rounds, warmup=3,
                                            iters=iters)
                ratio = timing.b_ms / timing.a_ms  # other ms / default ms
                figures[f"{tag}_persistent_speedup"] = persistent_ratio = ratio if persistent else 1.0 / ratio
            except Exception as e:  # noqa: BLE001 - reported, not fatal
                figures[f"{tag}_persistent_speedup_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                persistent_ratio = None

            def fmt(x, spec=".0f"):
                return "-" if x is None else format(x, spec)

            rows.append((tag.removeprefix("attention_fwd_bf16_"), fmt(result_row["ours"]), fmt(result_row["cudnn"]),
                         fmt(result_row["flash"]), fmt(ratios.get("cudnn"), ".3f"), fmt(ratios.get("flash"), ".3f"),
                         f"{err:.1e}" + (" WRONG" if err >= 2e-2 else ""), "yes" if persistent else "no",
                         fmt(persistent_ratio, ".3f")))
            print(" ".join(str(x) for x in rows[-1]), f"({time.time() - started:.0f} s)", flush=True)
            del arrays, q, k, v, out, lse
            torch.cuda.empty_cache()
        rows.append(("variants (ours/ours)", "", "", "", "speedup", "", "", "", ""))
        for name, head_dim, candidate, baseline, seq in VARIANTS if not args.quick else VARIANTS[:1]:
            for causal in (False, True):
                key = f"attention_fwd_bf16_d{head_dim}_s{seq}{'_causal' if causal else ''}_{name}_speedup"
                try:
                    figures[key] = speedup = _variant(head_dim, causal, candidate, baseline, seq)
                except Exception as e:  # noqa: BLE001 - a variant that fails is reported, not fatal
                    figures[key + "_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                    continue
                rows.append((key.removeprefix("attention_fwd_bf16_"), "", "", "", f"{speedup:.3f}", "", "", "", ""))
                print(rows[-1][0], rows[-1][4], flush=True)
        if not args.quick and not args.no_pallas:
            rows.append(("float16 vs Pallas Mosaic GPU (wall clock)", "ours TF/s", "Pallas TF/s", "", "vs Pallas", "",
                         "err vs Pallas") + ("",) * (len(rows[0]) - 7))
            pallas_attention_peer(figures, rows, TOKENS, MODEL_WIDTH)
    path = write_record("attention", figures, notes={
        "order": "A B B A ... per peer", "A": "ours (mgpu_lab/kernels/attention.py)",
        "B": "torch SDPA, cuDNN or flash backend", "speedup": "peer ms / ours ms (> 1: ours faster)",
        "shapes": f"{TOKENS} tokens, {MODEL_WIDTH} / head_dim heads, bf16"}, sampler=gpu)
    print(table(rows))
    summary = gpu.summary()
    print(f"SM clock {summary['sm_clock_mhz']} MHz, power {summary['power_w']} W ({summary['source']}); "
          f"{time.time() - started:.0f} s; record: {path}")


if __name__ == "__main__":
    main()
