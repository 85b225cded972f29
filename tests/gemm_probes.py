"""What every GEMM probe variable (pieces: MGPU_LAB_GEMM_RING_SMEM, _SMEM_PAD, _WIDE_STAGES ...) must
do besides its own effect: refuse a bad value at import naming the variable, and be named in every
record a benchmark writes so that the model's fit leaves those records out."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any


def import_error(variable: str, value: str) -> str:
    """The stderr of importing the GEMM with `variable` set to `value`, which must fail."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), variable: value}
    out = subprocess.run([sys.executable, "-c", "import mgpu_lab.kernels.gemm"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0, f"importing the GEMM with {variable}={value!r} should fail"
    return out.stderr


def assert_recorded_and_left_out(monkeypatch: Any, variable: str, key: str, value: str, default: str | None) -> None:
    """Unset, records do not name the probe; set, they name it under `key`, and the fit leaves such
    a record out (one naming `default`, the unset value, and one naming nothing stay in)."""
    import common
    from fit_gemm_model import on_model_device

    monkeypatch.delenv(variable, raising=False)
    assert key not in common.run_identity()
    monkeypatch.setenv(variable, value)
    assert common.run_identity()[key] == value
    assert not on_model_device({"device": "NVIDIA H200", key: value})
    if default is not None:
        assert on_model_device({"device": "NVIDIA H200", key: default})
    assert on_model_device({"device": "NVIDIA H200"})
