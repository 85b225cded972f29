"""The parent's handle on one isolated GPU worker: start it, send requests with a timeout,
and replace it after a fault, a hang or a crash.

The parent only ever talks to the worker through a socket; it never touches the worker's
CUDA context, so a poisoned worker costs a restart, not the notebook. A replacement worker is
started the moment the old one is given up, so its start-up (Python, CuPy, a CUDA context:
about a second or two) overlaps whatever the caller does next.

Each worker writes its output to a log in the temp folder: a clean exit removes it; after a
fault, a hang or a crash it stays, and the error names its path (`LoggedFault`, `WorkerGone`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .worker_protocol import Done, Failed, Fault, KernelPayload, Launch, Ready, Shutdown

START_TIMEOUT_S = 120.0  # a cold start imports CuPy and creates a context; generous on a busy machine
_LOG_TAIL_CHARS = 2000


class WorkerGone(Exception):
    """The worker stopped answering: it died (`exit_code`) or hung past the timeout (`timed_out`).
    `log` is the tail of its log, `log_path` the whole log, kept for the user to read."""

    def __init__(self, message: str, *, timed_out: bool = False, exit_code: int | None = None, log: str = "",
                 log_path: str | None = None):
        super().__init__(message)
        self.timed_out, self.exit_code, self.log, self.log_path = timed_out, exit_code, log, log_path


@dataclass(frozen=True)
class LoggedFault(Fault):
    """A Fault reply with the path of the faulted worker's log, kept for the error message."""

    log_path: str | None = None


@dataclass
class WorkerProcess:
    """A started worker: the parent's end of the socket, the process, and its log file."""

    conn: Any  # multiprocessing.connection.Connection (send, recv, poll, close)
    process: Any  # subprocess.Popen-like: pid, poll(), kill(), wait(timeout)
    log_path: str | None = None

    def remove_log(self) -> None:
        """Delete the log of a worker that exited cleanly: only a fault's log is worth keeping
        (one file per worker start would otherwise pile up in the temp folder)."""
        if self.log_path:
            try:
                os.unlink(self.log_path)
            except OSError:
                pass

    def log_tail(self) -> str:
        if not self.log_path:
            return ""
        try:
            return Path(self.log_path).read_text(errors="replace")[-_LOG_TAIL_CHARS:]
        except OSError:
            return ""


def worker_env() -> dict:
    """This environment with this copy of mgpu_lab first on PYTHONPATH (for `python -m` children)."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])  # the folder holding mgpu_lab/
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    return env


WORKER_MODULE = "mgpu_lab.runtime.isolated_worker"


def spawn_worker_process(device: int, module: str = WORKER_MODULE) -> WorkerProcess:
    """Start `python -m MODULE serve FD DEVICE` (the isolated worker) with this package first on
    its path; FD is the worker's end of a socket pair."""
    from multiprocessing.connection import Connection

    parent_end, child_end = socket.socketpair()
    log = tempfile.NamedTemporaryFile(prefix="mgpu_lab_worker_", suffix=".log", delete=False)  # noqa: SIM115
    env = worker_env()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", module, "serve", str(child_end.fileno()), str(device)],
            pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
    finally:
        child_end.close()
        log.close()
    return WorkerProcess(Connection(parent_end.detach()), process, log.name)


def _reap(process: Any) -> None:
    try:
        process.wait(timeout=60)
    except Exception:  # noqa: BLE001 - best effort: a worker the driver is slow to tear down
        pass


class WorkerClient:
    """One worker on one device, replaced whenever it faults, hangs or dies.

    `spawn(device) -> WorkerProcess` starts a worker (tests pass a fake). `restarts` counts
    replacements; `loaded` holds the kernel digests the current worker has loaded."""

    def __init__(self, device: int, spawn: Callable[[int], WorkerProcess] = spawn_worker_process,
                 start_timeout_s: float = START_TIMEOUT_S):
        self.device = device
        self._spawn, self._start_timeout_s = spawn, start_timeout_s
        self._lock = threading.Lock()
        self.restarts = 0
        self.worker: WorkerProcess | None = None
        self.loaded: set[str] = set()
        self.pid: int | None = None
        self._start()

    def _start(self) -> None:
        self.worker = self._spawn(self.device)
        self.loaded, self.pid = set(), None

    def _give_up(self) -> None:
        """Kill the current worker (never waiting on it) and start its replacement."""
        old = self.worker
        if old is not None:
            try:
                old.process.kill()
            except OSError:
                pass
            try:
                old.conn.close()
            except OSError:
                pass
            threading.Thread(target=_reap, args=(old.process,), daemon=True).start()
        self.restarts += 1
        self._start()

    def _gone(self, what: str, *, timed_out: bool = False) -> WorkerGone:
        worker = self.worker
        code = None
        if worker is not None:
            code = worker.process.poll()
            if code is None and not timed_out:  # its socket closed: the exit status follows shortly
                try:
                    code = worker.process.wait(timeout=5)
                except Exception:  # noqa: BLE001 - still running: report no exit code
                    code = None
        log = worker.log_tail() if worker is not None else ""
        self._give_up()  # the log stays: the error points at it
        return WorkerGone(what, timed_out=timed_out, exit_code=code, log=log,
                          log_path=worker.log_path if worker is not None else None)

    def _wait_ready(self) -> None:
        conn = self.worker.conn
        try:
            if not conn.poll(self._start_timeout_s):
                raise self._gone(f"the isolated worker did not start within {self._start_timeout_s:.0f} s",
                                 timed_out=True)
            reply = conn.recv()
        except (EOFError, OSError):
            raise self._gone("the isolated worker exited while starting") from None
        if not isinstance(reply, Ready):
            raise self._gone(f"the isolated worker sent {reply!r} instead of Ready")
        self.pid = reply.pid

    def ensure_started(self) -> int:
        """Wait until the worker is up; its pid."""
        with self._lock:
            if self.pid is None:
                self._wait_ready()
            return self.pid

    def launch(self, digest: str, arrays: tuple, payload: Callable[[], KernelPayload],
               timeout_s: float) -> Done | Fault | Failed:
        """Run one launch. A Fault reply (the worker exits after it) or a hang or a crash
        (WorkerGone) leaves a fresh worker starting behind."""
        with self._lock:
            if self.pid is not None and self.worker.process.poll() is not None:
                self._give_up()  # it died between requests (killed from outside): not this kernel's fault
            if self.pid is None:
                self._wait_ready()
            request = Launch(digest, tuple(arrays), None if digest in self.loaded else payload())
            conn = self.worker.conn
            try:
                conn.send(request)
                if not conn.poll(timeout_s):
                    raise self._gone(f"no reply within {timeout_s:g} s (the kernel hangs or runs too long)",
                                     timed_out=True)
                reply = conn.recv()
            except (EOFError, OSError, BrokenPipeError):
                raise self._gone("the isolated worker process died during the launch") from None
            if isinstance(reply, Fault):
                log_path = self.worker.log_path
                self._give_up()  # the log stays: the error points at it
                reply = LoggedFault(reply.cuda_error, reply.detail, log_path)
            elif isinstance(reply, Done):
                self.loaded.add(digest)
            return reply

    def close(self) -> None:
        """Ask the worker to exit; kill it if it does not within a few seconds."""
        with self._lock:
            worker, self.worker = self.worker, None
            if worker is None:
                return
            try:
                worker.conn.send(Shutdown())
                clean = worker.process.wait(timeout=5) == 0
            except Exception:  # noqa: BLE001 - a dead or stuck worker is killed below
                worker.process.kill()
                clean = False
            finally:
                worker.conn.close()
            if clean:
                worker.remove_log()
