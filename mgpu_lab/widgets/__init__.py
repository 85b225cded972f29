"""Notebook viewers of compiled kernels and traces (anywidget), with static fallbacks.

    from mgpu_lab.widgets import show
    show(trace)                 # Timeline
    show(kernel, "sass")        # SassView; also "smem", "ir", or "all" (tabs)

The widget classes need anywidget, ipywidgets and matplotlib (default dependencies of
mgpu_lab); they are imported on first use so `bank_model`, `sass_parse` and the other pure
modules stay usable in an environment that left them out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..user_errors import user_facing
from .view_inputs import is_compiled_kernel, is_kernel, is_trace

if TYPE_CHECKING:
    from mgpu_lab.widgets.ir_view import IrView
    from mgpu_lab.widgets.sass_view import SassView
    from mgpu_lab.widgets.smem_view import SmemView
    from mgpu_lab.widgets.timeline import Timeline

__all__ = ["KERNEL_VIEWS", "IrView", "SassView", "SmemView", "Timeline", "show"]

_LAZY = {
    "Timeline": "mgpu_lab.widgets.timeline",
    "SassView": "mgpu_lab.widgets.sass_view",
    "SmemView": "mgpu_lab.widgets.smem_view",
    "IrView": "mgpu_lab.widgets.ir_view",
}

# What `show(kernel, what)` accepts, and the widget class each name opens.
KERNEL_VIEWS = {"sass": "SassView", "smem": "SmemView", "ir": "IrView"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        try:
            module = importlib.import_module(_LAZY[name])
        except ImportError as err:
            raise ImportError(
                f"mgpu_lab.widgets.{name} needs mgpu_lab's notebook dependencies (anywidget, ipywidgets, "
                f"matplotlib), missing here: pip install mgpu_lab ({err})"
            ) from err
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@user_facing
def show(obj: Any, what: str = "all", **kwargs: Any) -> Any:
    """The viewer for a `Trace` (a Timeline), a `Kernel` or a `CompiledKernel`.

    For a kernel, `what` is "sass", "smem", "ir", or "all" (`ViewerTabs`: an ipywidgets Tab of the
    three). A Kernel whose program runs several launches (a workspace split-K GEMM: the GEMM and
    the reduce) shows one tab per launch, each with that view. Extra keyword arguments go to the
    widget's constructor. Returns the widget; the notebook displays it as the cell's last value.
    """
    if is_trace(obj):
        return __getattr__("Timeline")(obj, **kwargs)
    if what != "all" and what not in KERNEL_VIEWS:
        raise ValueError(f"what: expected one of {['all', *KERNEL_VIEWS]}, got {what!r}")
    if is_kernel(obj):  # its launches' CompiledKernels
        launches = obj.launches
        if len(launches) == 1:
            return show(launches[0], what, **kwargs)
        from mgpu_lab.widgets.tabs import ViewerTabs

        return ViewerTabs({f"{i}: {ck.name}": show(ck, what, **kwargs) for i, ck in enumerate(launches)})
    if not is_compiled_kernel(obj):
        raise TypeError(f"obj: expected a Trace, a Kernel or a CompiledKernel, got {type(obj).__name__}")
    if what == "all":
        from mgpu_lab.widgets.tabs import ViewerTabs

        return ViewerTabs({n: __getattr__(KERNEL_VIEWS[n])(obj, **kwargs) for n in KERNEL_VIEWS})
    return __getattr__(KERNEL_VIEWS[what])(obj, **kwargs)
