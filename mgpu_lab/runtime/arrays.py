"""Moving arrays of any kernel dtype between host and device, float8 included.

CuPy has no float8 types, so float8 arrays live on the device as uint8 arrays of their bytes
(what kernels with float8 inputs and outputs take and return); on the host they are numpy
arrays of ml_dtypes' float8 types.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .portable import BYTES_ON_DEVICE, dtype_from_name


def to_device(host: np.ndarray) -> Any:
    """A CuPy copy of a numpy array (float8 arrays as uint8 bytes)."""
    import cupy

    host = np.ascontiguousarray(host)
    if host.dtype.name in BYTES_ON_DEVICE:
        host = host.view(np.uint8)
    return cupy.asarray(host)


def to_host(device: Any, dtype: str | None = None) -> np.ndarray:
    """A numpy copy of a device array; `dtype` re-types bytes (e.g. "float8_e4m3fn")."""
    host = device.get() if hasattr(device, "get") else np.asarray(device)
    if dtype is not None and dtype in BYTES_ON_DEVICE:
        if host.dtype != np.uint8:
            raise TypeError(f"device: expected the uint8 bytes of a {dtype} array, got dtype {host.dtype}")
        return host.view(dtype_from_name(dtype))
    return host
