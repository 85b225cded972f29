"""Shared fixtures. GPU tests carry @pytest.mark.gpu and skip with a reason without a GPU."""

from __future__ import annotations

import os

import numpy as np
import pytest


def _gpu_reason() -> str | None:
    from mgpu_lab.compiler.target import device_capability

    cap = device_capability()
    if cap is None:
        return "no CUDA GPU on this machine (GPU tests run on the H200 device machine)"
    if cap[0] < 9:
        return f"needs a Hopper GPU (sm_90a), this one is sm_{cap[0]}{cap[1]}"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    checked = False
    for item in items:
        if "gpu" in item.keywords:
            if not checked:
                reason, checked = _gpu_reason(), True
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Each test session compiles into its own cache folder, never the user's."""
    root = tmp_path_factory.getbasetemp() / "kernel-cache"
    monkeypatch.setenv("MGPU_LAB_CACHE_DIR", str(root))
    for var in ("MGPU_LAB_DUMP_DIR", "MGPU_LAB_DUMP_PASSES", "MGPU_LAB_NO_CACHE", "MGPU_LAB_TARGET"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def _cpu_tests_pick_for_the_default_device(request, monkeypatch):
    """A CPU test sees the GEMM picks CI sees, whatever GPU the machine has: the model's
    calibration and the tuned table follow the device's name (an H100 picks with its own
    constants), so CPU tests pin it to the default device's; GPU tests keep the real one."""
    if request.node.get_closest_marker("gpu") is not None:
        yield
        return
    from mgpu_lab.kernels.gemm import configs

    monkeypatch.setattr(configs, "device_name", lambda: configs.DEFAULT_DEVICE)
    configs.model_ranking.cache_clear()
    yield
    configs.model_ranking.cache_clear()


@pytest.fixture
def rng():
    """Fresh random inputs every run: seeded from the OS, the seed printed on failure."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"rng seed {seed}")
    return np.random.default_rng(seed)
