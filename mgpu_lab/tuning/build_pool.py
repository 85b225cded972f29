"""Builds in processes that can be killed one at a time: a candidate whose build kills its own
process (os._exit, a signal, a segfault in a native library) or hangs costs that candidate one
"failed-build" row and its worker a replacement; the other candidates go on building.

A `concurrent.futures.ProcessPoolExecutor` cannot do this: one dead worker marks the whole pool
broken and fails every queued build, and a hung build cannot be stopped alone. Here each worker
process is fed one candidate at a time over its own Pipe by one thread of the parent, which
waits at most `timeout_s` for the answer.

Messages on a worker's Pipe (pickled): parent -> worker `(build, make_kernel, config)` ... then
EOF; worker -> parent "ready" once, then `(status, payload, seconds)` per candidate.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

START_TIMEOUT_S = 120.0  # a spawned interpreter importing mgpu_lab on a busy machine
BuildResult = tuple[str, Any, "float | None"]  # (status, Kernel or reason, seconds the build took)


def build_timed(build: Callable[..., tuple[str, Any]], make_kernel: Callable[..., Any],
                config: dict[str, Any]) -> tuple[str, Any, float]:
    """Runs in a build worker: (status, Kernel or reason, seconds it took)."""
    t0 = time.perf_counter()
    try:
        status, payload = build(make_kernel, config)
    except Exception as e:  # noqa: BLE001 - a failing build disqualifies this config only
        status, payload = "failed-build", f"{type(e).__name__}: {e}"
    return status, payload, time.perf_counter() - t0


def serve_builds(conn: Any) -> None:
    """A build worker's loop (the target of each spawned process): build until the parent closes."""
    conn.send("ready")
    while True:
        try:
            build, make_kernel, config = conn.recv()
        except (EOFError, OSError):
            return  # the parent closed the pool or exited
        status, payload, seconds = build_timed(build, make_kernel, config)
        try:
            conn.send((status, payload, seconds))
        except Exception as e:  # noqa: BLE001 - a built candidate that does not pickle: this one only
            conn.send(("failed-build", f"the built candidate could not be sent back: {type(e).__name__}: {e}",
                       seconds))


class BuildProcess:
    """One spawned build worker and the parent's end of its Pipe."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")  # fork would copy the caller's threads and CUDA state
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve_builds, args=(child,), name="mgpu_lab-build")
        self.process.start()
        child.close()  # so the worker's death reads as EOF here
        self.ready = False

    def wait_ready(self) -> str | None:
        """None once the worker has started, else why it did not."""
        if self.ready:
            return None
        try:
            if self.conn.poll(START_TIMEOUT_S) and self.conn.recv() == "ready":
                self.ready = True
                return None
        except (EOFError, OSError):
            pass
        return f"the build process did not start (exit code {self.exit_code()})"

    def exit_code(self) -> int | None:
        self.process.join(timeout=5)
        return self.process.exitcode

    def kill(self) -> None:
        self.process.kill()
        self.process.join(timeout=30)
        self.conn.close()

    def stop(self) -> None:
        """Let the worker exit on EOF; kill it if it does not within a few seconds."""
        self.conn.close()
        self.process.join(timeout=5)
        if self.process.exitcode is None:
            self.kill()


class BuildPool:
    """`size` build worker processes fed from one queue; `submit` returns a Future of a
    BuildResult and never fails for a candidate's own reasons. `timeout_s` (> 0, checked by
    the caller) bounds each build."""

    def __init__(self, size: int, timeout_s: float):
        self.timeout_s = timeout_s
        self.restarts = 0
        self.closed = False
        self._queue: queue.Queue = queue.Queue()
        self._processes: list[BuildProcess | None] = [None] * max(1, size)
        self._lock = threading.Lock()  # guards _processes against close() from the caller's thread
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True, name=f"tune-build{i}")
                         for i in range(len(self._processes))]
        for t in self._threads:
            t.start()

    def submit(self, build: Callable[..., Any], make_kernel: Callable[..., Any],
               config: dict[str, Any]) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((build, make_kernel, config, future))
        return future

    def _process(self, index: int) -> BuildProcess | None:
        with self._lock:
            if self.closed:
                return None
            if self._processes[index] is None:
                self._processes[index] = BuildProcess()
            return self._processes[index]

    def _replace(self, index: int) -> None:
        """Kill worker `index` (after a timeout or its death); the next build starts a fresh one."""
        with self._lock:
            proc, self._processes[index] = self._processes[index], None
            self.restarts += 1
        if proc is not None:
            proc.kill()

    def _run(self, index: int) -> None:
        try:
            self._process(index)  # start now: the spawn overlaps the timing workers' start-up
        except Exception:  # noqa: BLE001 - the first build reports it; this thread must live on
            pass
        while True:
            item = self._queue.get()
            if item is None:
                return
            *work, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._build_one(index, *work))
            except BaseException as e:  # noqa: BLE001 - hand any surprise to the waiting caller
                future.set_exception(e)

    def _build_one(self, index: int, build: Callable[..., Any], make_kernel: Callable[..., Any],
                   config: dict[str, Any]) -> BuildResult:
        try:
            proc = self._process(index)
        except Exception as e:  # noqa: BLE001 - e.g. a daemonic process may not start children
            return "failed-build", f"could not start a build process: {type(e).__name__}: {e}", None
        if proc is None:
            return "failed-build", "the tune was interrupted", None
        why = proc.wait_ready()
        if why is not None:
            self._replace(index)
            return "failed-build", why, None
        t0 = time.perf_counter()
        try:
            proc.conn.send((build, make_kernel, config))
        except (OSError, EOFError) as e:
            self._replace(index)
            return "failed-build", f"could not reach the build process: {e}", None
        except Exception as e:  # noqa: BLE001 - make_kernel or the config does not pickle
            return "failed-build", f"could not send the candidate to a build process: {type(e).__name__}: {e}", None
        try:
            if not proc.conn.poll(self.timeout_s):
                self._replace(index)
                return "failed-build", f"build timed out after {self.timeout_s:g} s (build_timeout_s)", self.timeout_s
            return proc.conn.recv()
        except (EOFError, OSError):
            if self.closed:
                return "failed-build", "the tune was interrupted", None
            code = proc.exit_code()
            self._replace(index)
            return ("failed-build", f"the build process died (exit code {code}) building this candidate",
                    time.perf_counter() - t0)

    def close(self, interrupted: bool = False) -> None:
        """Stop the workers; `interrupted`: drop queued builds and kill running ones (a Ctrl-C)."""
        if interrupted:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[-1].cancel()
        for _ in self._threads:
            self._queue.put(None)
        with self._lock:
            self.closed = True
            processes = [p for p in self._processes if p is not None]
            self._processes = [None] * len(self._processes)
        for proc in processes:
            if interrupted:
                proc.kill()  # a thread waiting on its answer reads EOF and reports the interruption
            else:
                proc.stop()
        for t in self._threads:
            t.join(timeout=60)
