"""Isolated execution: run launches in a GPU worker process so a bad kernel cannot kill the notebook.

    with mgpu_lab.isolated():          # or mgpu_lab.set_isolation(True), or kernel(x, isolate=True)
        y = k(x)                       # runs in the worker, on x's memory (CUDA IPC, no copies)

A sticky fault (illegal address, trap, misaligned access, an mbarrier-timeout trap) or a hang
raises `KernelFaultError`; the worker restarts by itself and this process's CUDA context is
never touched by the faulting kernel.

Stream order: an isolated call first synchronizes the caller's stream (so the kernel sees
everything queued before it) and returns after the worker synchronized its own (so whatever
is queued after it sees its results). The call is therefore synchronous: it costs one
stream synchronization, two pickled messages over a socket and a context switch between
processes on top of the launch (measured by benchmarks/bench_isolation.py). Making the worker
wait on an IPC event instead would not save the host wait, because fault detection needs the
worker to synchronize before it can answer.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import KernelFaultError, MgpuLabError
from .ipc import export_array
from .streams import external_stream
from .worker_client import WorkerClient, WorkerGone
from .worker_protocol import Done, Failed, Fault, KernelPayload, kernel_digest

DEFAULT_TIMEOUT_S = 60.0


@dataclass
class IsolationSettings:
    """The process-wide switch. `timeout_s`: seconds a launch may take before the worker is
    declared hung, killed and restarted. `locate_faults`: after a fault, re-run the launch under
    compute-sanitizer (when installed) to name the faulting instruction and source line."""

    enabled: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    locate_faults: bool = True


SETTINGS = IsolationSettings()  # mutated in place: the launcher holds a reference to it


class IsolatedLaunchError(MgpuLabError, RuntimeError):
    """The worker refused a launch without poisoning its context (e.g. a module that does not load)."""


def _check_timeout(timeout_s: float | None) -> None:
    if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
        raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout_s!r}")


def set_isolation(enabled: bool = True, *, timeout_s: float | None = None, locate_faults: bool | None = None) -> None:
    """Turn isolated launches on or off for every kernel of this process."""
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled: expected True or False, got {enabled!r}")
    _check_timeout(timeout_s)
    SETTINGS.enabled = enabled
    if timeout_s is not None:
        SETTINGS.timeout_s = float(timeout_s)
    if locate_faults is not None:
        SETTINGS.locate_faults = bool(locate_faults)


@contextlib.contextmanager
def isolated(*, timeout_s: float | None = None, locate_faults: bool | None = None) -> Iterator[IsolationSettings]:
    """Run every launch inside the block in the isolated worker (process-wide while it lasts)."""
    _check_timeout(timeout_s)
    saved = dataclasses.replace(SETTINGS)
    set_isolation(True, timeout_s=timeout_s, locate_faults=locate_faults)
    try:
        yield SETTINGS
    finally:
        SETTINGS.enabled, SETTINGS.timeout_s, SETTINGS.locate_faults = saved.enabled, saved.timeout_s, saved.locate_faults


_clients: dict[int, WorkerClient] = {}
_clients_lock = threading.Lock()


def worker_for(device: int) -> WorkerClient:
    """The worker of `device`, started on first use."""
    with _clients_lock:
        client = _clients.get(device)
        if client is None:
            client = _clients[device] = WorkerClient(device)
        return client


@atexit.register
def shutdown_workers() -> None:
    """Stop every worker (also at interpreter exit)."""
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


def _payload(launcher: Any) -> KernelPayload:
    compiled = launcher.compiled
    return KernelPayload(launcher.spec, tuple(dataclasses.asdict(t) for t in compiled.tma_descriptors))


def _digest(launcher: Any) -> str:
    digest = getattr(launcher, "_isolation_digest", None)
    if digest is None:
        digest = launcher._isolation_digest = kernel_digest(launcher.spec)
    return digest


def _caller_stream(stream: Any) -> Any:
    import cupy

    if stream is None:
        return cupy.cuda.get_current_stream()
    return stream if hasattr(stream, "synchronize") else external_stream(int(stream))


def launch_isolated(launcher: Any, arrays: list, device: int, stream: Any = None,
                    timeout_s: float | None = None) -> Any:
    """Launch `launcher`'s kernel on `arrays` (inputs, then outputs: checked CuPy arrays) in the
    worker of `device`; returns the outputs like an in-process call."""
    _check_timeout(timeout_s)
    timeout_s = SETTINGS.timeout_s if timeout_s is None else float(timeout_s)
    n_in = launcher.n_in
    handles = tuple(export_array(a, f"{'input' if i < n_in else 'output'} {i if i < n_in else i - n_in} "
                                    f"of {launcher.name}") for i, a in enumerate(arrays))
    _caller_stream(stream).synchronize()  # the kernel must see the caller's queued work
    client = worker_for(device)
    try:
        reply = client.launch(_digest(launcher), handles, lambda: _payload(launcher), timeout_s)
    except WorkerGone as gone:
        raise _fault_from_gone(launcher, gone, timeout_s) from None
    if isinstance(reply, Fault):
        raise _fault_error(launcher, reply, arrays, device)
    if isinstance(reply, Failed):
        raise IsolatedLaunchError(f"kernel {launcher.name} could not run in the isolated worker: "
                                  f"{reply.error_type}: {reply.message}")
    assert isinstance(reply, Done), reply
    if reply.profile is not None:
        launcher.last_profile = reply.profile
    outs = arrays[n_in:]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _fault_from_gone(launcher: Any, gone: WorkerGone, timeout_s: float) -> KernelFaultError:
    from .fault_report import fault_message

    if gone.timed_out:
        error = "timeout"
        detail = (f"no reply within {timeout_s:g} s: the kernel hangs (a barrier never completes?) "
                  "or runs longer than timeout_s")
        note = "the worker was killed"
    else:
        error = "worker died"
        detail = f"exit code {gone.exit_code}" if gone.exit_code is not None else str(gone)
        note = ("worker log: " + gone.log.strip().splitlines()[-1]) if gone.log.strip() else None
    note = _with_log_path(note, gone.log_path)
    return KernelFaultError(fault_message(launcher.name, error, detail, note=note),
                            kernel=launcher.name, cuda_error=error)


def _fault_error(launcher: Any, fault: Fault, arrays: list, device: int) -> KernelFaultError:
    from . import fault_report

    finding = location = sass = report = note = None
    if SETTINGS.locate_faults:
        sanitizer = fault_report.find_sanitizer()
        nbytes = sum(a.nbytes for a in arrays)
        if sanitizer is None:
            note = "compute-sanitizer not found: no source line (set MGPU_LAB_COMPUTE_SANITIZER or CUDA_HOME)"
        elif nbytes > fault_report.MAX_REPRO_BYTES:
            note = f"arrays too large ({nbytes} bytes) to re-run under compute-sanitizer"
        else:
            host = [a.get() for a in arrays]  # this process's context is healthy: copies are safe
            finding, report = fault_report.run_sanitizer(_payload(launcher), host, device, sanitizer=sanitizer)
            location, sass = fault_report.locate(launcher.compiled, finding)
            if finding is None:
                note = "a compute-sanitizer re-run did not pin the instruction"
    note = _with_log_path(note, getattr(fault, "log_path", None))
    message = fault_report.fault_message(launcher.name, fault.cuda_error, fault.detail, location=location,
                                         sass=sass, finding=finding, note=note)
    return KernelFaultError(message, kernel=launcher.name, cuda_error=fault.cuda_error,
                            location=location, sass=sass, report=report)


def _with_log_path(note: str | None, log_path: str | None) -> str | None:
    """The note with where the faulted worker's full log was kept (clean exits remove theirs)."""
    if not log_path:
        return note
    kept = f"the worker's full log is kept at {log_path}"
    return f"{note}; {kept}" if note else kept
