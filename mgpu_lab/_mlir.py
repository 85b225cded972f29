"""The one place that imports the MLIR Python bindings.

Swap the provider here (e.g. a JAX-bundled `jaxlib.mlir`) and nothing else changes.
"""

from mlir import ir, passmanager
from mlir.dialects import arith, gpu, llvm, math, memref, nvgpu, nvvm, scf, vector

__all__ = [
    "arith", "gpu", "ir", "llvm", "math", "memref", "nvgpu", "nvvm", "passmanager", "scf", "vector",
]

# Every op result and block argument of index/int/float/vector type comes back as a typed value
# with Python operators: importing builder/values.py registers its value casters, once, at its
# end (so this works whichever of the two modules is imported first).
from .builder import values as _typed_values  # noqa: E402,F401
