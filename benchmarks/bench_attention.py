"""Flash attention forward (examples/attention.py) against torch SDPA with the cuDNN backend and
with the flash backend, in the same run, interleaved in rounds (A B B A ...) per peer.

Shapes: head dims 64/128/256 x seq 512/1k/4k/16k with 16k tokens in total (batch = 16384 / seq)
and 2048 / head_dim heads (a 2048-wide model), causal and not, plus one GQA shape. bf16 inputs.
Every kernel's output is compared with cuDNN's before it is timed.

Keys: `attention_fwd_bf16_d128_s4096_vs_cudnn` (and `_causal`, `_vs_flash`) are speedups:
peer median ms / ours median ms, above 1 means ours is faster. `..._tflops` beside them.
`..._d128_s4096_pingpong_speedup` (`_stages2_speedup`): the default kernel (pingpong, 3 K/V
stages) against itself without pingpong (with 2 stages), same kind of ratio.

Run on a GPU machine:  python benchmarks/bench_attention.py [--quick]
Writes a record `attention_<time>_<commit>.json` (or under $OUT) and prints a table last.
"""

from __future__ import annotations

import argparse
import math
import time

from common import GpuSampler, interleaved_rounds, table, write_record

from mgpu_lab.examples.attention import make_attention

TOKENS = 16384
MODEL_WIDTH = 2048


def _shapes(quick: bool) -> list[dict]:
    if quick:
        return [dict(d=128, seq=4096, causal=False), dict(d=128, seq=4096, causal=True)]
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


def _variant(causal: bool, baseline: dict) -> float:
    """Speedup of the default kernel over one built with `baseline` options (d 128, seq 4096,
    16k tokens), interleaved: baseline ms / default ms. Shows what pingpong (or a choice) buys."""
    batch, heads, seq, d = TOKENS // 4096, MODEL_WIDTH // 128, 4096, 128
    _, arrays = _tensors(batch, heads, heads, seq, d)
    default = make_attention(batch, heads, seq, seq, d, causal=causal)
    other = make_attention(batch, heads, seq, seq, d, causal=causal, **baseline)
    default(*arrays[:3], out=tuple(arrays[3:]))
    other(*arrays[:3], out=tuple(arrays[3:]))
    timing = interleaved_rounds(lambda i: default.launch_unchecked(*arrays),
                                lambda i: other.launch_unchecked(*arrays), 4, warmup=3, iters=20)
    return timing.b_ms / timing.a_ms


def main() -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two shapes, fewer rounds")
    args = parser.parse_args()
    started = time.time()
    figures: dict = {}
    rows = [("shape", "ours TF/s", "cuDNN TF/s", "flash TF/s", "vs cuDNN", "vs flash", "err vs SDPA")]
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
            flops = 4.0 * batch * heads * seq * seq * d * (0.5 if causal else 1.0)
            rounds = 6 if seq <= 1024 else 4 if seq <= 4096 else 2
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

            def fmt(x, spec=".0f"):
                return "-" if x is None else format(x, spec)

            rows.append((tag.removeprefix("attention_fwd_bf16_"), fmt(result_row["ours"]), fmt(result_row["cudnn"]),
                         fmt(result_row["flash"]), fmt(ratios.get("cudnn"), ".3f"), fmt(ratios.get("flash"), ".3f"),
                         f"{err:.1e}" + (" WRONG" if err >= 2e-2 else "")))
            print(" ".join(str(x) for x in rows[-1]), f"({time.time() - started:.0f} s)", flush=True)
            del arrays, q, k, v, out, lse
            torch.cuda.empty_cache()
        rows.append(("variants (d128 s4096, ours/ours)", "", "", "", "speedup", "", ""))
        for causal in (False, True) if not args.quick else (False,):
            for variant, options in (("pingpong", {"pingpong": False}), ("stages2", {"stages": 2})):
                speedup = _variant(causal, options)
                key = f"attention_fwd_bf16_d128_s4096{'_causal' if causal else ''}_{variant}_speedup"
                figures[key] = speedup
                rows.append((key.removeprefix("attention_fwd_bf16_"), "", "", "", f"{speedup:.3f}", "", ""))
                print(rows[-1][0], rows[-1][4], flush=True)
    path = write_record("attention", figures, notes={
        "order": "A B B A ... per peer", "A": "ours (examples/attention.py)",
        "B": "torch SDPA, cuDNN or flash backend", "speedup": "peer ms / ours ms (> 1: ours faster)",
        "shapes": f"{TOKENS} tokens, {MODEL_WIDTH} / head_dim heads, bf16"}, sampler=gpu)
    print(table(rows))
    summary = gpu.summary()
    print(f"SM clock {summary['sm_clock_mhz']} MHz, power {summary['power_w']} W ({summary['source']}); "
          f"{time.time() - started:.0f} s; record: {path}")


if __name__ == "__main__":
    main()
