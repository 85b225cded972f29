"""Shims for public names that moved or were renamed: they keep working for one minor version
and raise a DeprecationWarning that names the replacement (CHANGELOG.md lists each one)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

REMOVED_IN = "0.3"


def warn_moved(old: str, replacement: str, stacklevel: int = 3) -> None:
    """Warn that `old` is deprecated in favour of `replacement` (both as a user would write them)."""
    warnings.warn(f"{old} is deprecated and goes away in mgpu_lab {REMOVED_IN}: use {replacement}",
                  DeprecationWarning, stacklevel=stacklevel)


def moved_module(old: str, new: str, extra: dict[str, tuple[Any, str]] | None = None,
                 public: str | None = None) -> Callable[[str], Any]:
    """A module `__getattr__` for the old module path `old`: every name is read from `new` with a
    warning naming its new home (`public`, when that package exports the name too); `extra` holds
    names that no longer exist there, as {name: (value, what to use instead)}."""
    extra = extra or {}

    def __getattr__(name: str) -> Any:
        if name in extra:
            value, instead = extra[name]
            warn_moved(f"{old}.{name}", instead)
            return value
        if name.startswith("__"):
            raise AttributeError(name)
        module = importlib.import_module(new)
        try:
            value = getattr(module, name)
        except AttributeError:
            raise AttributeError(f"module {old!r} has no attribute {name!r} (it moved to {new!r}, which has "
                                 f"none either)") from None
        home = new
        if public is not None and getattr(importlib.import_module(public), name, None) is value:
            home = public
        warn_moved(f"{old}.{name}", f"{home}.{name}")
        return value

    return __getattr__


def removed_wrapper(old: str, build: Callable[..., Any], instead: str) -> Callable[..., Any]:
    """A stand-in for a removed wrapper type: calling it warns (naming `instead`) and returns what
    replaced it, built by `build` from the same arguments. `isinstance` checks against it no
    longer hold: the objects are Kernels now."""

    def construct(*args: Any, **kwargs: Any) -> Any:
        warn_moved(old, instead)
        return build(*args, **kwargs)

    construct.__name__ = construct.__qualname__ = old.rsplit(".", 1)[-1]
    construct.__doc__ = f"Deprecated: {old} is gone; use {instead}. Calling this builds that instead."
    return construct
