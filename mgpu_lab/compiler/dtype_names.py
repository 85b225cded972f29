"""Array dtype names and their numpy dtypes, for the compiler and the builder.

`runtime/portable.py` keeps its own copy of these few lines because exports copy it verbatim and
it must import nothing of mgpu_lab; `tests/test_layers.py` checks the two agree."""

from __future__ import annotations

import numpy as np

# Names numpy does not know natively but ml_dtypes/CuPy do.
ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
# Their sizes, so that what only needs a size (the compiler: smem plans, TMA boxes, alignment)
# does not import ml_dtypes, which took 0.57 s of a process's first kernel build.
ML_ITEMSIZE = {"bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}


def dtype_from_name(name: str) -> np.dtype:
    """numpy dtype for a name, with ml_dtypes for bfloat16 and float8."""
    if name in ML_DTYPES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)
