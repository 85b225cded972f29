"""Helpers for GPU tests (a module of its own: `conftest` names clash between test folders)."""

from __future__ import annotations

import numpy as np


def poisoned(cupy, shape, dtype):
    """An output buffer filled with NaN (or all-ones bits for integers), never zeros."""
    out = cupy.empty(shape, dtype)
    if np.dtype(dtype).kind == "f":
        out.fill(np.nan)
    else:
        out.fill(-1)
    return out
