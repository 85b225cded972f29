"""The wrapper types of 0.1's GEMM (`SplitKGemm`, `StreamKGemm`, `PaddedGemm`), as deprecated
stand-ins: each builds the Kernel that replaced it (its program holds the extra launches, scratch
buffers and copies) and warns, until mgpu_lab 0.3."""

from typing import Any

from mgpu_lab.deprecation import removed_wrapper


def _split_k(t: Any, options: dict, *, stages_given: bool = True) -> Any:
    from mgpu_lab.kernels.gemm.kernel import workspace_split_k_gemm

    return workspace_split_k_gemm(t, options, stages_given=stages_given)


def _stream_k(kernel: Any, tiling: Any) -> Any:
    from mgpu_lab.kernels.gemm.stream_k import stream_k_gemm

    return stream_k_gemm(kernel, tiling)


def _padded(make: Any, m: int, n: int, k: int, **kwargs: Any) -> Any:
    from mgpu_lab.kernels.gemm.padding import padded_gemm

    return padded_gemm(make, m, n, k, **kwargs)


_KERNEL = "make_gemm(...), which returns an mgpu_lab.Kernel whose program holds {what}"
WRAPPERS = {
    "SplitKGemm": (_split_k, _KERNEL.format(what="the GEMM and reduce launches and the workspace")),
    "StreamKGemm": (_stream_k, _KERNEL.format(what="the workspace and flags as scratch")),
    "PaddedGemm": (_padded, _KERNEL.format(what="the pads and the crop")),
}


def extras(module: str, names: tuple[str, ...]) -> dict[str, tuple[Any, str]]:
    """moved_module extras for `names` of `module`: (the stand-in, what to use instead)."""
    return {name: (removed_wrapper(f"{module}.{name}", *WRAPPERS[name]), WRAPPERS[name][1]) for name in names}
