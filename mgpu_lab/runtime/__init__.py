"""Running compiled kernels: `Kernel` (the one launchable type) over a `Program` (its launches,
scratch buffers and copies as plain data). None of it loads MLIR.

    from mgpu_lab.runtime import Kernel, Program, Launch, Copy, Ref, Scratch
"""

from .kernel import Kernel
from .program import Copy, Launch, Program, Ref, Scratch

__all__ = ["Copy", "Kernel", "Launch", "Program", "Ref", "Scratch"]
