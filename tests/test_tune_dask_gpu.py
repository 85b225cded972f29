"""The Dask path with real GPU timings: one Dask worker per GPU (CUDA_VISIBLE_DEVICES set per
worker, GPU=1 resource) and a compile-only worker; faults stay inside the timing subprocess."""

from __future__ import annotations

import pytest

import mgpu_lab

pytestmark = pytest.mark.gpu
distributed = pytest.importorskip("distributed")

from test_tune_parallel_gpu import make_candidate, make_inputs  # noqa: E402 - shared candidates


@pytest.fixture
def gpu_client():
    import cupy
    from distributed import Client, Nanny, Scheduler, SpecCluster

    gpus = cupy.cuda.runtime.getDeviceCount()
    workers = {"cpu": {"cls": Nanny, "options": {"nthreads": 4}}}
    workers |= {f"gpu{i}": {"cls": Nanny, "options": {"nthreads": 1, "resources": {"GPU": 1},
                                                        "env": {"CUDA_VISIBLE_DEVICES": str(i)}}} for i in range(gpus)}
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0"}}
    with SpecCluster(workers=workers, scheduler=scheduler) as cluster, Client(cluster) as client:
        client.wait_for_workers(1 + gpus)
        yield client, gpus


def test_a_cluster_times_on_every_gpu_and_survives_a_trap(gpu_client, tmp_path, monkeypatch):
    client, gpus = gpu_client
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    space = {"kind": ["ok", "trap"], "block": [64, 128, 256, 512]}
    result = mgpu_lab.tune(make_candidate, space, args=make_inputs, reference=lambda a, b: a + b, cluster=client,
                           timeout_s=20.0, progress=False)
    by = {(c.config["kind"], c.config["block"]): c for c in result.candidates}
    for block in space["block"]:
        assert by["ok", block].status == "timed" and by["ok", block].rel_error == 0.0
        assert by["trap", block].status in ("fault", "crashed"), by["trap", block].reason
    assert result.best_config["kind"] == "ok" and result.best_kernel is not None
    timed_on = {c.worker.split()[0] for c in result.candidates if c.status == "timed"}
    assert 1 <= len(timed_on) <= gpus and all(w.startswith("tcp://") for w in timed_on)
    print(result.to_dataframe().to_string())
