"""What a viewer is given: the checks that turn a wrong object into an error naming it.

A view reads a `CompiledKernel` (SASS, smem layout, passes) or a `Trace`. A `Kernel` of one
launch stands for its CompiledKernel; one of several launches has no single listing, so the
error says which launch to pick (or `show(kernel, view)`, which shows one tab per launch)."""

from __future__ import annotations

from typing import Any


def is_trace(obj: Any) -> bool:
    """A Trace, or what reads like one (events with times and region names)."""
    return hasattr(obj, "start_ns") and hasattr(obj, "region_names")


def is_kernel(obj: Any) -> bool:
    """A Kernel: a program whose launches are CompiledKernels."""
    return getattr(obj, "launches", None) is not None and hasattr(obj, "program")


def is_compiled_kernel(obj: Any) -> bool:
    """A CompiledKernel, or what reads like one (SASS and a shared-memory layout)."""
    return hasattr(obj, "sass") and hasattr(obj, "smem_layout")


def compiled_for_view(obj: Any, view: str) -> Any:
    """The CompiledKernel behind `obj` (a CompiledKernel, or a Kernel of one launch)."""
    if is_kernel(obj):
        launches = obj.launches
        if len(launches) == 1:
            return launches[0]
        raise TypeError(f"{view}: kernel: expected one launch, got a Kernel of {len(launches)} launches "
                        f"({', '.join(ck.name for ck in launches)}); pass kernel.launches[i], or "
                        f"show(kernel, ...) for one tab per launch")
    if is_compiled_kernel(obj):
        return obj
    raise TypeError(f"{view}: kernel: expected a Kernel or a CompiledKernel, got {type(obj).__name__}")


def trace_for_view(obj: Any, view: str) -> Any:
    """`obj` if it is a Trace (what `kernel.last_trace` and `Trace.load` return)."""
    if is_trace(obj):
        return obj
    hint = " (a kernel's trace is kernel.last_trace, after a call with profile=True)" \
        if is_kernel(obj) or is_compiled_kernel(obj) else ""
    raise TypeError(f"{view}: trace: expected a Trace, got {type(obj).__name__}{hint}")
