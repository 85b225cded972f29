"""What a viewer is given: the checks that turn a wrong object into an error naming it.

A view reads a `CompiledKernel` (SASS, smem layout, passes) or a `Trace`. A `Kernel` of one
launch stands for its CompiledKernel; one of several launches has no single listing, so the
error says which launch to pick (or `show(kernel, view)`, which shows one tab per launch)."""

from __future__ import annotations

from typing import Any


def compiled_for_view(obj: Any, view: str) -> Any:
    """The CompiledKernel behind `obj` (a CompiledKernel, or a Kernel of one launch)."""
    launches = getattr(obj, "launches", None)
    if launches is not None and hasattr(obj, "program"):  # a Kernel
        if len(launches) == 1:
            return launches[0]
        raise TypeError(f"{view}: kernel: expected one launch, got a Kernel of {len(launches)} launches "
                        f"({', '.join(ck.name for ck in launches)}); pass kernel.launches[i], or "
                        f"show(kernel, ...) for one tab per launch")
    if hasattr(obj, "sass") and hasattr(obj, "smem_layout"):  # what show() accepts as a kernel
        return obj
    raise TypeError(f"{view}: kernel: expected a Kernel or a CompiledKernel, got {type(obj).__name__}")


def trace_for_view(obj: Any, view: str) -> Any:
    """`obj` if it is a Trace (what `kernel.last_trace` and `Trace.load` return)."""
    if hasattr(obj, "start_ns") and hasattr(obj, "region_names"):
        return obj
    hint = " (a kernel's trace is kernel.last_trace, after a call with profile=True)" \
        if hasattr(obj, "launches") or hasattr(obj, "sass") else ""
    raise TypeError(f"{view}: trace: expected a Trace, got {type(obj).__name__}{hint}")
