"""Deprecated: the tuner is `mgpu_lab.tuning` (0.2); `mgpu_lab.tune` is the public way in. Names
read from here warn, naming their new home, until mgpu_lab 0.3. `WrappedKernel` and
`launchable` are gone: every candidate is a Kernel, whatever its program holds."""

from typing import Any

from mgpu_lab.deprecation import moved_module


def _wrapped_kernel(make_kernel: Any, config: dict, compiled: Any = None) -> Any:
    """What a WrappedKernel stood for: the candidate's Kernel, built again."""
    del compiled
    return make_kernel(**config)


def _launchable(payload: Any) -> Any:
    """A candidate is already launchable: it is a Kernel."""
    return payload


__getattr__ = moved_module("mgpu_lab.autotune", "mgpu_lab.tuning", extra={
    "WrappedKernel": (_wrapped_kernel, "mgpu_lab.Kernel: every tune candidate is one"),
    "launchable": (_launchable, "the candidate itself: every tune candidate is an mgpu_lab.Kernel"),
})
