"""The one place that imports the MLIR Python bindings.

Swap the provider here (e.g. a JAX-bundled `jaxlib.mlir`) and nothing else changes.
"""

from mlir import ir, passmanager
from mlir.dialects import arith, gpu, llvm, math, memref, nvgpu, nvvm, scf, vector

__all__ = [
    "arith", "gpu", "ir", "llvm", "math", "memref", "nvgpu", "nvvm", "passmanager", "scf", "vector",
]
