"""Deprecated: the library GEMM moved to `mgpu_lab.kernels.gemm` (0.2). Every name still reads
from here with a DeprecationWarning naming its new home, until mgpu_lab 0.3."""

from mgpu_lab.deprecation import moved_module
from mgpu_lab.examples.gemm_wrappers import extras

_EPILOGUE = "make_gemm(..., epilogue=...) (tiles are chosen per shape; tile_m= and tile_n= pick them)"
__getattr__ = moved_module("mgpu_lab.examples.gemm", "mgpu_lab.kernels.gemm.kernel", public="mgpu_lab.kernels.gemm", extra={
    "TILE_M": (128, _EPILOGUE),
    "TILE_K": (64, _EPILOGUE),
    **extras("mgpu_lab.examples.gemm", ("SplitKGemm", "StreamKGemm", "PaddedGemm")),
})
