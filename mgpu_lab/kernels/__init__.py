"""The kernel library: tuned Hopper kernels built from the public DSL, each returned as an
`mgpu_lab.Kernel`.

- `mgpu_lab.kernels.gemm`: `make_gemm` (bf16/f16; plain, persistent, pingpong, stream-K, split-K,
  swap-AB, clusters, padded shapes, fused epilogues), `make_fp8_gemm`, `make_fp8_block_scaled_gemm`.
- `mgpu_lab.kernels.attention`: `make_attention`, a FlashAttention-3-style forward pass.

`mgpu_lab.examples` keeps the small teaching kernels.
"""

__all__ = ["attention", "gemm"]
