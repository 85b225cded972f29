"""CPU tests of isolated execution: IPC handle packing, the worker protocol against a fake
worker (replies, faults, hangs, crashes, restarts), fault reports, the switch."""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from mgpu_lab.errors import KernelFaultError
from mgpu_lab.runtime import fault_report, isolation
from mgpu_lab.runtime.ipc import ArrayHandle, OpenedAllocations, allocation_offset, export_array
from mgpu_lab.runtime.isolated_worker import cuda_error_name
from mgpu_lab.runtime.worker_client import WorkerClient, WorkerGone, WorkerProcess
from mgpu_lab.runtime.worker_protocol import Done, Failed, Fault, KernelPayload, Launch, Ready, kernel_digest

HANDLE = bytes(range(64))


# -- IPC handles ----------------------------------------------------------------------------
def _fake_array(ptr, shape=(4,), dtype="float32"):
    return SimpleNamespace(data=SimpleNamespace(ptr=ptr), shape=shape, dtype=np.dtype(dtype))


def test_array_crosses_as_allocation_handle_plus_offset():
    asked = []

    def ipc_handle(base):
        asked.append(base)
        return HANDLE

    h = export_array(_fake_array(0x7000_0000_1240, (2, 3)), "input 0", address_range=lambda p: (0x7000_0000_0000, 1 << 20),
                     ipc_handle=ipc_handle)
    assert asked == [0x7000_0000_0000], "the handle must be taken of the allocation's base, not the array's pointer"
    assert h == ArrayHandle(HANDLE, 0x7000_0000_0000, 0x1240, (2, 3), "float32")


def test_offset_outside_the_allocation_is_refused():
    with pytest.raises(ValueError, match="outside the allocation"):
        allocation_offset(0x2000, 0x1000, 0x1000)
    assert allocation_offset(0x1fff, 0x1000, 0x1000) == 0xfff


def test_memory_without_an_ipc_handle_is_explained():
    def refuse(base):
        raise RuntimeError("cudaErrorInvalidValue")

    with pytest.raises(RuntimeError, match=r"output 0 of k: its memory cannot be shared .*cudaMalloc memory"):
        export_array(_fake_array(0x1000), "output 0 of k", address_range=lambda p: (0x1000, 64), ipc_handle=refuse)


def test_array_handle_validates_its_fields():
    with pytest.raises(ValueError, match="handle: expected 64 bytes, got 3"):
        ArrayHandle(b"abc", 0x1000, 0, (1,), "float32")
    with pytest.raises(ValueError, match="offset: expected >= 0"):
        ArrayHandle(HANDLE, 0x1000, -1, (1,), "float32")


def test_worker_opens_each_allocation_once_and_closes_the_least_recently_used():
    opened, closed = [], []
    bases = itertools.count(0x10_0000, 0x10_0000)

    def open_handle(handle):
        opened.append(handle)
        return next(bases)

    allocations = OpenedAllocations(open_handle, closed.append, capacity=2)
    h1, h2, h3 = (bytes([i]) * 64 for i in (1, 2, 3))
    assert allocations.pointer(ArrayHandle(h1, 0xA000, 16, (1,), "float32")) == 0x10_0000 + 16
    assert allocations.pointer(ArrayHandle(h1, 0xA000, 32, (1,), "float32")) == 0x10_0000 + 32
    assert opened == [h1], "one allocation is opened once (a second open fails in CUDA)"
    allocations.pointer(ArrayHandle(h2, 0xB000, 0, (1,), "float32"))
    allocations.pointer(ArrayHandle(h1, 0xA000, 0, (1,), "float32"))  # h1 is now the most recent
    allocations.pointer(ArrayHandle(h3, 0xC000, 0, (1,), "float32"))
    assert closed == [0x20_0000], "h2 was the least recently used"
    allocations.close_all()
    assert len(allocations) == 0 and sorted(closed) == [0x10_0000, 0x20_0000, 0x30_0000]


def test_a_new_allocation_at_a_known_address_replaces_the_old_mapping():
    closed = []
    bases = itertools.count(0x10_0000, 0x10_0000)
    allocations = OpenedAllocations(lambda h: next(bases), closed.append)
    old, new = bytes([1]) * 64, bytes([2]) * 64
    assert allocations.pointer(ArrayHandle(old, 0xA000, 0, (1,), "float32")) == 0x10_0000
    assert allocations.pointer(ArrayHandle(new, 0xA000, 0, (1,), "float32")) == 0x20_0000
    assert closed == [0x10_0000], "the freed allocation's mapping is closed before the new one opens"
    assert len(allocations) == 1


# -- the worker protocol against a fake worker ------------------------------------------------
class FakeProcess:
    pids = itertools.count(5000)

    def __init__(self):
        self.pid = next(self.pids)
        self.returncode = None

    def poll(self):
        return self.returncode

    def kill(self):
        if self.returncode is None:
            self.returncode = -9

    def wait(self, timeout=None):
        return self.returncode


class FakeWorkers:
    """spawn() for WorkerClient: each worker is a thread answering with `behave(request)`,
    which returns a reply, "hang" (never answers) or "die" (closes the connection)."""

    def __init__(self, behave):
        self.behave = behave
        self.requests: list[Launch] = []
        self.spawned: list[FakeProcess] = []

    def __call__(self, device):
        parent, child = multiprocessing.Pipe()
        process = FakeProcess()
        self.spawned.append(process)
        threading.Thread(target=self._serve, args=(child, process), daemon=True).start()
        return WorkerProcess(parent, process)

    def _serve(self, conn, process):
        conn.send(Ready(process.pid, 0))
        while process.returncode is None:
            if not conn.poll(0.02):
                continue
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return
            self.requests.append(request)
            reply = self.behave(request)
            if reply == "hang":
                while process.returncode is None:
                    time.sleep(0.01)
                return
            if reply == "die":
                process.returncode = 139
                conn.close()
                return
            conn.send(reply)
            if isinstance(reply, Fault):
                process.returncode = 3
                return


def _payload():
    return KernelPayload({"name": "k", "cubin": b"\x7fELF"})


def test_a_launch_sends_the_kernel_once_per_worker():
    workers = FakeWorkers(lambda r: Done(0.001))
    client = WorkerClient(0, spawn=workers)
    assert isinstance(client.launch("d1", (), _payload, 5), Done)
    assert isinstance(client.launch("d1", (), _payload, 5), Done)
    assert [r.kernel is not None for r in workers.requests] == [True, False]
    assert client.restarts == 0 and client.pid == workers.spawned[0].pid


def test_a_fault_restarts_the_worker_and_the_kernel_is_sent_again():
    replies = iter([Fault("cudaErrorIllegalAddress", "an illegal memory access was encountered"), Done(0.001)])
    workers = FakeWorkers(lambda r: next(replies))
    client = WorkerClient(0, spawn=workers)
    first_pid = client.ensure_started()
    reply = client.launch("d1", (), _payload, 5)
    assert isinstance(reply, Fault) and reply.cuda_error == "cudaErrorIllegalAddress"
    assert client.restarts == 1 and len(workers.spawned) == 2
    assert workers.spawned[0].returncode is not None, "the poisoned worker must be gone"
    assert isinstance(client.launch("d1", (), _payload, 5), Done)
    assert client.pid != first_pid
    assert workers.requests[-1].kernel is not None, "a new worker has no kernels loaded"


def test_a_hang_times_out_kills_and_restarts():
    workers = FakeWorkers(lambda r: "hang" if len(workers.requests) == 1 else Done(0.001))
    client = WorkerClient(0, spawn=workers)
    t0 = time.perf_counter()
    with pytest.raises(WorkerGone) as e:
        client.launch("d1", (), _payload, 0.3)
    assert e.value.timed_out and time.perf_counter() - t0 < 5
    assert workers.spawned[0].returncode == -9, "a hung worker is killed"
    assert client.restarts == 1
    assert isinstance(client.launch("d1", (), _payload, 5), Done)


def test_a_crash_reports_the_exit_code_and_restarts():
    workers = FakeWorkers(lambda r: "die" if len(workers.requests) == 1 else Done(0.001))
    client = WorkerClient(0, spawn=workers)
    with pytest.raises(WorkerGone) as e:
        client.launch("d1", (), _payload, 5)
    assert not e.value.timed_out and e.value.exit_code == 139
    assert isinstance(client.launch("d1", (), _payload, 5), Done) and client.restarts == 1


def test_a_non_sticky_failure_keeps_the_worker():
    workers = FakeWorkers(lambda r: Failed("ValueError", "smem too large"))
    client = WorkerClient(0, spawn=workers)
    assert isinstance(client.launch("d1", (), _payload, 5), Failed)
    assert client.restarts == 0 and "d1" not in client.loaded


def test_kernel_digest_changes_with_the_cubin_and_the_launch_configuration():
    spec = {"cubin": b"a", "name": "k", "grid": [1, 1, 1], "block": [128, 1, 1]}
    assert kernel_digest(spec) == kernel_digest(dict(spec))
    assert kernel_digest(spec) != kernel_digest({**spec, "cubin": b"b"})
    assert kernel_digest(spec) != kernel_digest({**spec, "grid": [2, 1, 1]})


def test_cuda_error_names_are_pulled_out_of_cupy_and_driver_messages():
    assert cuda_error_name(RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")) == (
        "cudaErrorIllegalAddress", "an illegal memory access was encountered")
    assert cuda_error_name(RuntimeError("cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED"))[0] == "CUDA_ERROR_LAUNCH_FAILED"
    assert cuda_error_name(KeyError("x"))[0] == "KeyError"


# -- launch_isolated with the worker faked ------------------------------------------------------
class _Client:
    def __init__(self, reply):
        self.reply = reply

    def launch(self, digest, arrays, payload, timeout_s):
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def _launcher():
    compiled = SimpleNamespace(tma_descriptors=(), sass="", line_map=())
    return SimpleNamespace(name="oob_write", n_in=0, spec={"cubin": b"x", "name": "oob_write"}, compiled=compiled,
                           last_profile=None)


@pytest.fixture
def fake_isolation(monkeypatch):
    monkeypatch.setattr(isolation, "export_array", lambda a, what: a)
    monkeypatch.setattr(isolation, "_caller_stream", lambda s: SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setattr(fault_report, "find_sanitizer", lambda: None)

    def use(reply):
        monkeypatch.setattr(isolation, "worker_for", lambda device: _Client(reply))

    return use


def test_a_fault_becomes_kernel_fault_error_naming_kernel_and_cuda_error(fake_isolation):
    fake_isolation(Fault("cudaErrorIllegalAddress", "an illegal memory access was encountered"))
    arrays = [SimpleNamespace(nbytes=16)]
    with pytest.raises(KernelFaultError) as e:
        isolation.launch_isolated(_launcher(), arrays, 0)
    assert e.value.kernel == "oob_write" and e.value.cuda_error == "cudaErrorIllegalAddress"
    text = str(e.value)
    assert text.startswith("kernel oob_write faulted in the isolated worker: cudaErrorIllegalAddress "
                           "(an illegal memory access was encountered)")
    assert "compute-sanitizer not found" in text and "this process's CUDA context is healthy" in text


def test_a_hang_becomes_kernel_fault_error_with_the_timeout(fake_isolation):
    fake_isolation(WorkerGone("no reply", timed_out=True))
    with pytest.raises(KernelFaultError, match=r"oob_write faulted in the isolated worker: timeout \(no reply within 2 s"):
        isolation.launch_isolated(_launcher(), [], 0, timeout_s=2)


def test_a_dead_worker_becomes_kernel_fault_error_with_its_exit_code(fake_isolation):
    fake_isolation(WorkerGone("died", exit_code=-11, log="Fatal Python error: Segmentation fault\n"))
    with pytest.raises(KernelFaultError, match=r"worker died \(exit code -11\)[\s\S]*Segmentation fault"):
        isolation.launch_isolated(_launcher(), [], 0)


def test_a_refused_launch_is_an_isolated_launch_error(fake_isolation):
    fake_isolation(Failed("ValueError", "smem: needs 300000 bytes"))
    with pytest.raises(isolation.IsolatedLaunchError, match="oob_write could not run in the isolated worker: ValueError"):
        isolation.launch_isolated(_launcher(), [], 0)


def test_done_returns_the_outputs_and_keeps_the_profile(fake_isolation):
    profile = np.arange(4, dtype=np.uint32)
    fake_isolation(Done(0.001, profile))
    launcher = _launcher()
    a, out = object(), object()
    launcher.n_in = 1
    assert isolation.launch_isolated(launcher, [a, out], 0) is out
    assert launcher.last_profile is profile


def test_bad_timeouts_are_refused():
    with pytest.raises(ValueError, match="timeout_s: expected a positive number of seconds, got 0"):
        isolation.set_isolation(True, timeout_s=0)
    with pytest.raises(TypeError, match="enabled: expected True or False"):
        isolation.set_isolation("yes")


def test_isolated_block_turns_the_switch_on_and_restores_it():
    assert not isolation.SETTINGS.enabled
    with isolation.isolated(timeout_s=7, locate_faults=False) as settings:
        assert settings.enabled and settings.timeout_s == 7 and not settings.locate_faults
    assert not isolation.SETTINGS.enabled and isolation.SETTINGS.timeout_s == isolation.DEFAULT_TIMEOUT_S
    assert isolation.SETTINGS.locate_faults


# -- fault reports ------------------------------------------------------------------------------
SANITIZER_REPORT = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at oob_write+0x90 in /home/u/fault_kernels.py:42
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f3a00004000 is out of bounds
=========     and is 4096 bytes after the nearest allocation at 0x7f3a00000000 of size 16384 bytes
=========
========= ERROR SUMMARY: 1 error
"""

SASS = """\
        .text.oob_write:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        //## File "/home/u/fault_kernels.py", line 42
        /*0090*/                   STG.E desc[UR4][R2.64], R5 ;
        /*00a0*/                   EXIT ;
"""


def test_the_sanitizer_report_gives_the_error_pc_and_line():
    finding = fault_report.parse_sanitizer_report(SANITIZER_REPORT)
    assert finding.error == "Invalid __global__ write of size 4 bytes"
    assert finding.pc == 0x90 and finding.where == "/home/u/fault_kernels.py:42"
    assert "Address 0x7f3a00004000 is out of bounds" in finding.details
    assert fault_report.parse_sanitizer_report("========= ERROR SUMMARY: 0 errors\n") is None


def test_the_pc_maps_to_the_sass_instruction_and_the_source_line():
    from mgpu_lab.compiler.compiled_kernel import SourceSpan

    assert fault_report.sass_instruction_at(SASS, 0x90) == (3, "STG.E desc[UR4][R2.64], R5 ;")
    assert fault_report.sass_instruction_at(SASS, 0x40) is None
    line_map = (SourceSpan("/home/u/fault_kernels.py", 41, (), (3,)),)
    compiled = SimpleNamespace(sass=SASS, line_map=line_map)
    finding = fault_report.parse_sanitizer_report(SANITIZER_REPORT.replace(" in /home/u/fault_kernels.py:42", ""))
    assert finding.where is None
    assert fault_report.locate(compiled, finding) == ("/home/u/fault_kernels.py:42", "STG.E desc[UR4][R2.64], R5 ;")


def test_the_fault_message_names_kernel_error_line_and_instruction():
    finding = fault_report.parse_sanitizer_report(SANITIZER_REPORT)
    text = fault_report.fault_message("oob_write", "cudaErrorIllegalAddress", "an illegal memory access was encountered",
                                      location="/home/u/fault_kernels.py:42", sass="STG.E desc[UR4][R2.64], R5 ;",
                                      finding=finding)
    lines = text.splitlines()
    assert lines[0] == ("kernel oob_write faulted in the isolated worker: cudaErrorIllegalAddress "
                        "(an illegal memory access was encountered)")
    assert lines[1] == "  at /home/u/fault_kernels.py:42: STG.E desc[UR4][R2.64], R5 ;"
    assert lines[2] == "  compute-sanitizer: Invalid __global__ write of size 4 bytes"
    assert "The worker was restarted" in lines[-1]


def test_kernel_call_routes_to_the_isolated_worker_when_asked(monkeypatch):
    from mgpu_lab.examples.vector_add import make_vector_add
    from mgpu_lab.runtime.kernel import Kernel

    calls = []
    monkeypatch.setattr(Kernel, "_call_isolated",
                        lambda self, launcher, args, out, stream, timeout_s: calls.append(timeout_s))
    k = Kernel(make_vector_add(1024).program)
    k._launcher = SimpleNamespace(call=lambda args, out, stream: calls.append("in process"), single=None)
    k._settings = isolation.SETTINGS
    k(isolate=True, timeout_s=3)
    with isolation.isolated():
        k()
    k()
    k.isolate = True
    k()
    with isolation.isolated():
        k(isolate=False)
    assert calls == [3, None, "in process", None, "in process"]


def test_a_real_worker_that_cannot_start_reports_its_log():
    """The real spawn path (socket handed to `python -m ...isolated_worker serve`): device 999
    exists nowhere, so the worker exits while starting and its log says why."""
    client = WorkerClient(999)
    try:
        with pytest.raises(WorkerGone) as e:
            client.ensure_started()
        assert "exited while starting" in str(e.value)
        assert e.value.exit_code not in (None, 0)
        assert "Traceback" in e.value.log or "Error" in e.value.log, e.value.log
    finally:
        client.close()


# -- the worker's request handling (CUDA faked) ---------------------------------------------------
def _worker_state(monkeypatch, launch_error, poisoned):
    from mgpu_lab.runtime import isolated_worker

    class FakeLauncher:
        last_profile = None

        def launch_unchecked(self, *arrays):
            raise launch_error

    built = []
    monkeypatch.setattr(isolated_worker, "build_launcher", lambda payload: built.append(payload) or FakeLauncher())
    monkeypatch.setattr(isolated_worker, "as_cupy_array", lambda ptr, shape, dtype, device: ptr)
    monkeypatch.setattr(isolated_worker, "context_poisoned", lambda: poisoned)
    state = isolated_worker.WorkerState(0, OpenedAllocations(lambda h: 0x1000, lambda b: None))
    return state, built


def test_the_worker_answers_a_sticky_error_with_fault(monkeypatch):
    error = RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
    state, built = _worker_state(monkeypatch, error, poisoned=True)
    reply = state.handle(Launch("d", (ArrayHandle(HANDLE, 0xA000, 0, (4,), "float32"),), _payload()))
    assert reply == Fault("cudaErrorIllegalAddress", "an illegal memory access was encountered")
    assert len(built) == 1


def test_the_worker_answers_a_non_sticky_error_with_failed_and_keeps_the_kernel(monkeypatch):
    state, built = _worker_state(monkeypatch, RuntimeError("cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE"),
                                 poisoned=False)
    reply = state.handle(Launch("d", (), _payload()))
    assert isinstance(reply, Failed) and "CUDA_ERROR_INVALID_VALUE" in reply.message
    state.handle(Launch("d", (), None))  # loaded once, reused
    assert len(built) == 1
    assert state.handle(Launch("other", (), None)) == Failed(
        "KeyError", "the worker has no kernel other and none was sent")


def test_a_worker_that_died_between_requests_is_replaced_before_the_launch():
    workers = FakeWorkers(lambda r: Done(0.001))
    client = WorkerClient(0, spawn=workers)
    client.ensure_started()
    workers.spawned[0].kill()  # killed from outside while idle
    assert isinstance(client.launch("d1", (), _payload, 5), Done)
    assert client.restarts == 1 and len(workers.spawned) == 2


def test_sanitizer_reports_with_signatures_and_access_lines_parse():
    report = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 8 bytes
=========     at compress(const unsigned int *, const unsigned int *, uint2 *, int)+0x4bd0
=========     by thread (16,0,0) in block (0,0,0)
=========     Access at 0x0 is out of bounds
=========     and is 140229602181120 bytes before the nearest allocation at 0x7f89bfa00000 of size 1020 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
"""
    finding = fault_report.parse_sanitizer_report(report)
    assert finding.pc == 0x4bd0 and finding.where is None
    assert finding.details[:2] == ("by thread (16,0,0) in block (0,0,0)", "Access at 0x0 is out of bounds")


def test_real_worker_processes_start_answer_fault_hang_crash_and_restart(monkeypatch):
    """The process plumbing with a CUDA-free stand-in worker (tests/fake_isolated_worker.py)."""
    import functools
    import os
    from pathlib import Path

    from mgpu_lab.runtime.worker_client import spawn_worker_process

    tests = str(Path(__file__).parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    client = WorkerClient(0, spawn=functools.partial(spawn_worker_process, module="fake_isolated_worker"))
    try:
        first = client.ensure_started()
        array = ArrayHandle(HANDLE, 0xA000, 0x40, (2, 3), "float32")
        reply = client.launch("ok", (array,), _payload, 10)
        assert reply == Done(0.0, [(0x40, (2, 3))]), "the request must arrive whole in the other process"
        assert isinstance(client.launch("fault", (), _payload, 10), Fault)
        assert client.restarts == 1 and client.ensure_started() != first
        with pytest.raises(WorkerGone) as hang:
            client.launch("hang", (), _payload, 0.5)
        assert hang.value.timed_out and client.restarts == 2
        with pytest.raises(WorkerGone) as crash:
            client.launch("crash", (), _payload, 10)
        assert crash.value.exit_code == 139 and client.restarts == 3
        assert isinstance(client.launch("ok", (), _payload, 10), Done)
    finally:
        client.close()
