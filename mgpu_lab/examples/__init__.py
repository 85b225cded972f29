"""Small teaching kernels (vector add, tiled copy, block sum, softmax, scaled add, a torch MLP).
Each `make_*` returns an `mgpu_lab.Kernel` and each `reference_*` computes the expected result with
numpy. The library kernels (GEMM, attention) live in `mgpu_lab.kernels`; their old paths here
(`mgpu_lab.examples.gemm`, `...gemm_*`, `...attention`) still work until 0.3, with a DeprecationWarning."""


__all__ = ["block_sum", "scaled_add", "softmax", "tiled_copy", "torch_mlp", "vector_add"]
