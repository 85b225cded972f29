"""Attention kernel options against each other and cuDNN: the measurements behind make_attention's
per-shape defaults (exp2 on the FMA pipes at head dim 64, pingpong off for full attention at head
dim 128, wider K/V tiles).

For each shape (16k tokens, 2048 / head_dim heads, bf16), every candidate option set and torch
SDPA's cuDNN backend run in the same rounds, the order reversed every other round (A B C D, D C B A,
...), CUDA events, medians. Each candidate's output is checked against cuDNN's first.

Keys: `attention_options_d64_s4096_exp2fma0.1875_vs_cudnn` (cuDNN ms / candidate ms) and
`..._vs_default` (the options make_attention picks by itself, ms / candidate ms); `default` is
one candidate. SM clock and power in the record's `gpu`.

Run on a GPU machine:  python benchmarks/bench_attention_options.py [--quick] [--rounds N]
Writes `attention_options_<time>_<commit>.json` (under $OUT when set) and prints a table last.
"""

from __future__ import annotations

import argparse
import statistics

from bench_attention import MODEL_WIDTH, TOKENS, _tensors
from common import GpuSampler, interleaved_runs, table, write_record

from mgpu_lab.kernels.attention import make_attention

NO_PINGPONG = {"pingpong": False}


def _fma(*fractions: float) -> list[dict]:
    return [{"exp2_fma_fraction": f} for f in fractions]


# (head_dim, seq, causal, kv_heads or None, candidates); {} is the default
SHAPES = [
    (64, 4096, False, None, [{}] + _fma(0.0, 0.125, 0.25, 0.375) + [{"block_kv": 160}, NO_PINGPONG,
                                                                    {"persistent": True}]),
    (64, 4096, True, None, [{}] + _fma(0.0, 0.125, 0.25)),
    (64, 1024, False, None, [{}] + _fma(0.0, 0.25)),
    (64, 16384, True, None, [{}] + _fma(0.0)),
    (128, 4096, False, None, [{}, {"pingpong": True}, {"exp2_fma_fraction": 0.125}, {"block_kv": 176, "stages": 2},
                              {"persistent": True}, {"persistent": True, "pingpong": False}]),
    (128, 4096, True, None, [{}] + _fma(0.125) + [NO_PINGPONG]),
    (128, 16384, True, None, [{}] + _fma(0.125)),
    (128, 16384, False, None, [{}, {"pingpong": True}, {"block_kv": 176, "stages": 2}]),
    (128, 1024, False, None, [{}, NO_PINGPONG]),
    (128, 4096, False, 2, [{}, {"pingpong": True}]),
    (256, 4096, False, None, [{}, NO_PINGPONG]),
]
QUICK = [SHAPES[0], SHAPES[4]]


def _name(options: dict) -> str:
    short = {"exp2_fma_fraction": "exp2fma", "pingpong": "pingpong", "block_kv": "kv", "stages": "stages",
             "persistent": "persistent"}
    return "_".join(f"{short[k]}{v}" for k, v in options.items()) or "default"


def measure(head_dim: int, seq: int, causal: bool, kv_heads: int | None, candidates: list[dict],
            rounds: int, figures: dict) -> list[tuple]:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    batch, heads = TOKENS // seq, MODEL_WIDTH // head_dim
    kv_heads = kv_heads or heads
    (q, k, v, out, _), arrays = _tensors(batch, heads, kv_heads, seq, head_dim)
    tag = f"attention_options_d{head_dim}_s{seq}" + ("_causal" if causal else "") + \
        (f"_gqa{heads // kv_heads}" if kv_heads != heads else "")

    def cudnn(i):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads != heads)

    reference = cudnn(0).float()
    runs = {"cudnn": cudnn}
    for options in candidates:
        kern = make_attention(batch, heads, seq, seq, head_dim, causal=causal, kv_heads=kv_heads, **options)
        out.fill_(float("nan"))
        kern(*arrays[:3], out=tuple(arrays[3:]))
        err = ((out.float() - reference).norm() / reference.norm()).item()
        figures[f"{tag}_{_name(options)}_rel_error_vs_cudnn"] = err
        if not err < 2e-2:
            print(f"WRONG {tag} {_name(options)}: relative error {err:.2e} against cuDNN", flush=True)
        runs[_name(options)] = (lambda kern: lambda i: kern.launch_unchecked(*arrays))(kern)
    names = list(runs)
    times, _ = interleaved_runs(runs, rounds, warmup=3, iters=20 if seq < 16384 else 10)
    median = {n: statistics.median(t) for n, t in times.items()}
    flops = 4.0 * batch * heads * seq * seq * head_dim * (0.5 if causal else 1.0)
    rows = []
    for n in names[1:]:
        figures[f"{tag}_{n}_vs_cudnn"] = median["cudnn"] / median[n]
        figures[f"{tag}_{n}_vs_default"] = median["default"] / median[n]
        figures[f"{tag}_{n}_tflops"] = flops / median[n] / 1e9
        rows.append((tag.removeprefix("attention_options_"), n, f"{flops / median[n] / 1e9:.0f}",
                     f"{median['cudnn'] / median[n]:.3f}", f"{median['default'] / median[n]:.3f}"))
    figures[f"{tag}_cudnn_tflops"] = flops / median["cudnn"] / 1e9
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two shapes")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per shape (default 4)")
    parser.add_argument("--only", help="comma-separated shapes, e.g. d128_s4096,d64_s4096_causal")
    args = parser.parse_args()
    figures: dict = {}
    rows = [("shape", "options", "TF/s", "vs cuDNN", "vs default")]
    with GpuSampler() as gpu:
        only = set(args.only.split(",")) if args.only else None
        for head_dim, seq, causal, kv_heads, candidates in (QUICK if args.quick else SHAPES):
            if only and f"d{head_dim}_s{seq}{'_causal' if causal else ''}{'_gqa' if kv_heads else ''}" not in only:
                continue
            rows += measure(head_dim, seq, causal, kv_heads, candidates, args.rounds, figures)
            print(table(rows[-len(candidates):]), flush=True)
    path = write_record("attention_options", figures, {"rounds": args.rounds, "quick": args.quick, "only": args.only},
                        sampler=gpu)
    print(f"record: {path}")
    print(table(rows))


if __name__ == "__main__":
    main()
