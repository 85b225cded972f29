"""Deprecated: moved to `mgpu_lab.kernels.gemm.split_k` (0.2). Every name still reads from here with a
DeprecationWarning naming its new home, until mgpu_lab 0.3."""

from mgpu_lab.deprecation import moved_module
from mgpu_lab.examples.gemm_wrappers import extras

__getattr__ = moved_module("mgpu_lab.examples.gemm_split_k", "mgpu_lab.kernels.gemm.split_k",
                           extra=extras("mgpu_lab.examples.gemm_split_k", ("SplitKGemm",)))
