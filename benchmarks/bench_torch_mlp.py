"""The MLP block of examples/torch_mlp.py with our GEMM as torch ops, against the same block on torch's
linear (cuBLAS), eager and under torch.compile(fullgraph=True), interleaved in rounds (A B B A ...).

Run on a GPU machine:  python benchmarks/bench_torch_mlp.py [--quick]
Writes a record `torch_compile_mlp_<time>_<commit>.json` (or under $OUT) and prints a table.
Keys: `torch_mlp_eager_ours_vs_torch`, `torch_mlp_compiled_ours_vs_torch` (time ratios: < 1 means
ours is faster), `torch_mlp_fused_eager_*` / `torch_mlp_fused_compiled_*` (examples' FusedMLP: bias
and GELU in our GEMMs' epilogues, against torch's block eager / compiled), `torch_mlp_rel_error_*`,
`torch_compile_graph_breaks`.
"""

from __future__ import annotations

import argparse

from common import GpuSampler, interleaved_rounds, table, write_record

from mgpu_lab.examples.torch_mlp import FusedMLP, OurMLP, ReferenceMLP


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small shape, few rounds")
    args = parser.parse_args()
    shapes = [(2048, 2048, 8192)] if args.quick else [(4096, 4096, 14336), (8192, 4096, 14336)]
    rounds = 2 if args.quick else 6
    figures: dict = {}
    rows = [("tokens x d x hidden", "mode", "ours ms", "torch ms", "ours/torch", "rel err ours")]
    with GpuSampler() as gpu:
        for tokens, d_model, hidden in shapes:
            tag = f"{tokens}x{d_model}x{hidden}"
            ours, theirs = OurMLP(tokens, d_model, hidden, seed=1), ReferenceMLP(d_model, hidden, seed=1)
            xs = [torch.randn((tokens, d_model), device="cuda").to(torch.bfloat16) for _ in range(3)]
            reference = ours.reference(xs[0])
            flops = 2.0 * tokens * d_model * hidden * 2
            compiled_ours = torch.compile(ours.__call__, fullgraph=True)
            compiled_theirs = torch.compile(theirs.__call__, fullgraph=True)
            figures["torch_compile_graph_breaks"] = torch._dynamo.explain(ours.__call__)(xs[0]).graph_break_count
            fused_ours = FusedMLP(tokens, d_model, hidden, seed=1)  # bias + GELU in our GEMMs' epilogues
            compiled_fused = torch.compile(fused_ours.__call__, fullgraph=True)
            for mode, a, b in (("eager", ours, theirs), ("compiled", compiled_ours, compiled_theirs),
                               ("fused_eager", fused_ours, theirs), ("fused_compiled", compiled_fused, compiled_theirs)):
                out = a(xs[0])
                err = ((out.float() - reference).norm() / reference.norm()).item()
                if not err < 1e-2:
                    raise SystemExit(f"{mode} {tag}: relative error {err:.2e} against the float32 block")
                result = interleaved_rounds(lambda i: a(xs[i % 3]), lambda i: b(xs[i % 3]), rounds,
                                            warmup=5, iters=20)
                figures[f"torch_mlp_{mode}_{tag}_ours_ms"] = result.a_ms
                figures[f"torch_mlp_{mode}_{tag}_torch_ms"] = result.b_ms
                figures[f"torch_mlp_{mode}_{tag}_ours_vs_torch"] = result.ratio
                figures[f"torch_mlp_{mode}_{tag}_ours_tflops"] = flops / result.a_ms / 1e9
                figures[f"torch_mlp_rel_error_{mode}_{tag}"] = err
                rows.append((tag, mode, f"{result.a_ms:.3f}", f"{result.b_ms:.3f}", f"{result.ratio:.3f}", f"{err:.1e}"))
            torch.cuda.empty_cache()
    path = write_record("torch_compile_mlp", figures, notes={"rounds": rounds, "order": "A B B A ...",
                                                            "A": "ours (GEMM as torch op)", "B": "torch linear"},
                        sampler=gpu)
    print(table(rows))
    print(f"graph breaks under torch.compile: {figures['torch_compile_graph_breaks']}; record: {path}")


if __name__ == "__main__":
    main()
