"""Isolated workers' logs: removed when the worker exits cleanly, kept after a fault, a hang or a
crash, with their path in the KernelFaultError (CPU: a CUDA-free stand-in worker process)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from mgpu_lab.errors import KernelFaultError
from mgpu_lab.runtime import isolation
from mgpu_lab.runtime.worker_client import LoggedFault, WorkerClient, WorkerGone, spawn_worker_process
from mgpu_lab.runtime.worker_protocol import Done, Fault
from test_isolation import _launcher, _payload, fake_isolation  # noqa: F401 - a fixture, used by name

TESTS = str(Path(__file__).parent)


@pytest.fixture
def client(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")]))
    client = WorkerClient(0, spawn=functools.partial(spawn_worker_process, module="fake_isolated_worker"))
    kept: list[str] = []
    yield client, kept
    client.close()
    for path in kept:
        Path(path).unlink(missing_ok=True)


def test_a_clean_exit_removes_the_log(client):
    client, _ = client
    client.ensure_started()
    assert isinstance(client.launch("ok", (), _payload, 10), Done)
    log = client.worker.log_path
    assert log and Path(log).is_file()
    client.close()
    assert not Path(log).exists(), "a cleanly exited worker's log must be removed"


def test_a_fault_keeps_the_log_and_names_it(client):
    client, kept = client
    client.ensure_started()
    log = client.worker.log_path
    reply = client.launch("fault", (), _payload, 10)
    kept.append(log)
    assert isinstance(reply, Fault) and isinstance(reply, LoggedFault) and reply.log_path == log
    assert Path(log).is_file(), "a faulted worker's log must stay"
    replacement = client.worker.log_path
    client.close()
    assert Path(log).is_file() and not Path(replacement).exists()


def test_a_crash_keeps_the_log_and_names_it(client):
    client, kept = client
    client.ensure_started()
    log = client.worker.log_path
    with pytest.raises(WorkerGone) as crash:
        client.launch("crash", (), _payload, 10)
    kept.append(log)
    assert crash.value.log_path == log and Path(log).is_file()


# -- the path reaches the KernelFaultError (test_isolation's stand-ins for the worker) ----------
@pytest.mark.parametrize("reply", [
    LoggedFault("cudaErrorIllegalAddress", "an illegal memory access", "/tmp/mgpu_lab_worker_abc.log"),
    WorkerGone("died", exit_code=-11, log="Segmentation fault\n", log_path="/tmp/mgpu_lab_worker_abc.log"),
    WorkerGone("no reply", timed_out=True, log_path="/tmp/mgpu_lab_worker_abc.log"),
])
def test_the_fault_error_names_the_kept_log(fake_isolation, reply):
    fake_isolation(reply)
    with pytest.raises(KernelFaultError) as e:
        isolation.launch_isolated(_launcher(), [SimpleNamespace(nbytes=16)], 0, timeout_s=2)
    assert "the worker's full log is kept at /tmp/mgpu_lab_worker_abc.log" in str(e.value)
