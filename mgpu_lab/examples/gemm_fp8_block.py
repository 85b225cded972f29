"""Deprecated: moved to `mgpu_lab.kernels.gemm.fp8_block` (0.2). Every name still reads from here with a
DeprecationWarning naming its new home, until mgpu_lab 0.3."""

from mgpu_lab.deprecation import moved_module

__getattr__ = moved_module("mgpu_lab.examples.gemm_fp8_block", "mgpu_lab.kernels.gemm.fp8_block")
