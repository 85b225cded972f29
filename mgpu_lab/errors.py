"""The errors mgpu_lab raises. Each names what was expected, what was given, and where."""

from __future__ import annotations


class MgpuLabError(Exception):
    """Base class of every error this package raises on purpose."""


class KernelBuildError(MgpuLabError):
    """The kernel body raised while it was being traced; the message points at the user's line."""


class KernelCompileError(MgpuLabError):
    """MLIR verification or a lowering pass failed; the message has the diagnostics and user lines."""


class PtxasError(KernelCompileError):
    """ptxas (or nvJitLink) rejected the PTX; the message is the assembler's own."""


class ResourceLimitError(MgpuLabError, ValueError):
    """The kernel asks for more of a resource (smem, threads, grid) than the device or ISA allows."""


class LaunchArgumentError(MgpuLabError, ValueError):
    """A kernel was called with arguments that do not match its signature."""


class ToolchainError(MgpuLabError, RuntimeError):
    """A CUDA tool (ptxas, nvdisasm) could not be found or run."""


class KernelNameError(MgpuLabError, ValueError):
    """A kernel name that is not an ASCII identifier PTX accepts as a symbol."""


class CompileOptionError(MgpuLabError, ValueError):
    """A compile option (target, ptx_version, opt_level, ...) outside what the toolchain supports."""


class ShapeError(MgpuLabError, ValueError):
    """An array shape that no kernel can address (e.g. its byte size overflows int64)."""


class ExportError(MgpuLabError, ValueError):
    """`export` refused to write (existing file without overwrite=True, bad module name)."""


class PerformanceWarning(UserWarning):
    """The compiler did something that costs speed (e.g. ptxas serialized the WGMMAs)."""


class ProfilerNote(UserWarning):
    """A profiled kernel's recording differs from the default: `profile_buffer="auto"` sent the
    events to global memory because the row did not fit in shared memory beside the kernel's
    buffers (the message names the sizes)."""


class CacheSecurityWarning(UserWarning):
    """A kernel cache folder or entry is not private to the current user; it is not used."""


class KernelFaultError(MgpuLabError, RuntimeError):
    """A kernel run in the isolated worker hit a sticky CUDA error (illegal address, trap,
    misaligned access, ...) or hung past its timeout. The worker was restarted; this process's
    CUDA context was never touched. `cuda_error` is the CUDA error name; `location` the user's
    "file:line" of the faulting instruction when a compute-sanitizer re-run could tell (else
    None), `sass` that instruction, `report` the sanitizer's own words."""

    def __init__(self, message: str, *, kernel: str, cuda_error: str, location: str | None = None,
                 sass: str | None = None, report: str | None = None):
        super().__init__(message)
        self.kernel, self.cuda_error = kernel, cuda_error
        self.location, self.sass, self.report = location, sass, report


__all__ = ["CacheSecurityWarning", "CompileOptionError", "ExportError", "KernelBuildError", "KernelCompileError",
           "KernelFaultError", "KernelNameError", "LaunchArgumentError", "MgpuLabError", "PerformanceWarning",
           "ProfilerNote", "PtxasError", "ResourceLimitError", "ShapeError", "ToolchainError"]
