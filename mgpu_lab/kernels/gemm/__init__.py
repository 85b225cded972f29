"""The library GEMM: `make_gemm` and its FP8 siblings, each returning an `mgpu_lab.Kernel`.

    from mgpu_lab.kernels.gemm import make_gemm
    kernel = make_gemm(4096, 4096, 4096, transpose_b=True)
    c = kernel(a, b)                      # CuPy or torch arrays in, the same framework out

Files: `kernel.py` (make_gemm, the tiling checks, the kernel body), `pieces.py` (producer,
consumer and store pieces), `configs.py` + `configs.json` (config choice), `split_k.py`,
`stream_k.py`, `padding.py` (programs of several steps), `epilogues.py`, `fp8.py`, `fp8_block.py`,
`torch_linear.py` (route_linears: a model's nn.Linear layers on the GEMM as torch ops).
"""

from .epilogues import fused, reference_fused
from .fp8 import make_fp8_gemm
from .fp8_block import make_fp8_block_scaled_gemm
from .kernel import (
    GemmTiling,
    default_stages,
    gemm_definition,
    gemm_smem_bytes,
    make_gemm,
    reference_gemm,
    resolve_tiling,
    tiled_gemm_definition,
)
from .torch_linear import LinearRouter, gemm_linear_op, route_linears

__all__ = ["GemmTiling", "LinearRouter", "default_stages", "fused", "gemm_definition", "gemm_linear_op",
           "gemm_smem_bytes", "make_fp8_block_scaled_gemm", "make_fp8_gemm", "make_gemm", "reference_fused",
           "reference_gemm", "resolve_tiling", "route_linears", "tiled_gemm_definition"]
