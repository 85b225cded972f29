"""What a tuned answer depends on: the device model, the kernel's source, the input shapes and
dtypes, the space and the toolchain. Any change gives a new key (a new cache file and journal)."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def config_key(config: dict[str, Any]) -> str:
    """A stable text key of one configuration (JSON, sorted keys; repr for values JSON lacks): what
    the journal, the timing pools and the cached answers name a candidate by."""
    return json.dumps(config, sort_keys=True, default=repr)


def kernel_source_hash(make_kernel: Callable[..., Any]) -> str:
    """sha256 of make_kernel's source and its module's source (a partial: of its function, plus its
    bound arguments), so editing the kernel or anything beside it in its file invalidates the answer."""
    parts = []
    fn = make_kernel
    while isinstance(fn, functools.partial):
        parts.append(repr((fn.args, sorted(fn.keywords.items()))))
        fn = fn.func
    for obj in (fn, inspect.getmodule(fn)):
        try:
            parts.append(inspect.getsource(obj))
        except (OSError, TypeError):
            parts.append(f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def toolchain_version() -> dict[str, str]:
    """The compiler's versions (ptxas, nvdisasm, MLIR, mgpu_lab's compiler code), or why not known."""
    try:
        from ..compiler.toolchain import versions

        return dict(versions())
    except Exception as e:  # noqa: BLE001 - a machine without the tools still tunes host callables
        return {"unknown": f"{type(e).__name__}: {e}"}


def input_signature(input_sets: Sequence[tuple]) -> list[tuple[tuple[int, ...], str]]:
    return [(tuple(getattr(x, "shape", ())), str(getattr(x, "dtype", type(x).__name__))) for x in input_sets[0]]


def tune_key(device_model: str, make_kernel: Callable[..., Any], input_sets: Sequence[tuple],
             space: dict[str, Sequence[Any]]) -> dict[str, Any]:
    """The parts of the key, readable (they are written beside the answer)."""
    return {"device_model": device_model, "kernel_source": kernel_source_hash(make_kernel),
            "kernel": f"{getattr(make_kernel, '__module__', '?')}."
                      f"{getattr(getattr(make_kernel, 'func', make_kernel), '__qualname__', '?')}",
            "inputs": input_signature(input_sets), "toolchain": toolchain_version(),
            "space": {k: list(map(repr, v)) for k, v in space.items()}}


def tune_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mgpu_lab" / "tune"


def key_digest(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()[:24]
