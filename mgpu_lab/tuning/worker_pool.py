"""The parent's side of timing: one worker process per GPU, each fed one candidate at a time
by its own thread, so no two timings ever share a GPU. A worker that faults, hangs or dies costs
only the candidate it was timing: it is killed, reported, and a fresh worker takes its place.

The process handling (socket pair, log file, PYTHONPATH) reuses the isolated runtime's
`worker_client` pieces; the protocol differs because a tuning worker keeps one context and
many loaded candidates, where the isolated worker serves launches on the caller's memory.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..runtime.worker_client import WorkerProcess, worker_env
from .timing_worker import Setup

START_TIMEOUT_S = 180.0  # CuPy import, a context, inputs copied in: generous on a busy machine


@dataclass(frozen=True)
class Outcome:
    """What timing one candidate gave: status "timed" with a Measurement, or a failure reason."""

    status: str
    reason: str = ""
    measurement: Any = None
    worker: str = ""


def visible_device(index: int, parent_visible: str | None = None) -> str:
    """CUDA_VISIBLE_DEVICES for a worker on the parent's device `index` (through the parent's own list)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if parent_visible is None else parent_visible
    if visible:
        entries = [v.strip() for v in visible.split(",") if v.strip()]
        if index >= len(entries):
            raise ValueError(f"gpus: device {index} is not visible (CUDA_VISIBLE_DEVICES={visible!r})")
        return entries[index]
    return str(index)


def _start_process(device: str | None) -> WorkerProcess:
    from multiprocessing.connection import Connection

    parent_end, child_end = socket.socketpair()
    log = tempfile.NamedTemporaryFile(prefix="mgpu_lab_tune_worker_", suffix=".log", delete=False)  # noqa: SIM115
    env = worker_env()
    # The caller's own modules (a notebook's folder, a test folder) must import in the worker too.
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], *(p for p in sys.path if p and os.path.isdir(p))])
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    try:
        process = subprocess.Popen([sys.executable, "-m", "mgpu_lab.tuning.timing_worker", str(child_end.fileno())],
                                   pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, env=env)
    finally:
        child_end.close()
        log.close()
    return WorkerProcess(Connection(parent_end.detach()), process, log.name)


class TimingWorker:
    """One worker process on one device (`device`: a CUDA_VISIBLE_DEVICES entry, None to inherit),
    replaced after every fault, hang or death. `restarts` counts replacements."""

    def __init__(self, device: str | None, setup: Setup, start_timeout_s: float = START_TIMEOUT_S):
        self.device, self.setup, self.start_timeout_s = device, setup, start_timeout_s
        self.restarts = 0
        self._name = f"gpu{device}" if device is not None else "worker"
        self.label = self._name  # + what the worker reports about its device, once it is up
        self._proc: WorkerProcess | None = None
        self._ready = False
        self.closed = False  # set by an interrupted tune: no more restarts
        self._start()

    def _start(self) -> None:
        if self.closed:
            return
        # Only the process now: the (possibly large) Setup is sent by the thread that waits for it.
        self._proc, self._ready = _start_process(self.device), False

    def _kill(self) -> str:
        """Kill the current process; its log tail (for the report)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return ""
        try:
            proc.process.kill()
            proc.process.wait(timeout=30)
        except Exception:  # noqa: BLE001 - best effort: a process the driver is slow to tear down
            pass
        proc.conn.close()
        return proc.log_tail()

    def _restart(self) -> None:
        self._kill()
        self.restarts += 1
        self._start()

    def _wait_ready(self) -> str | None:
        """None when ready, else why not (and the worker is restarted)."""
        proc = self._proc  # close() may take it away from another thread at any moment
        if proc is None:
            return "the tune was interrupted"
        conn = proc.conn
        try:
            conn.send(self.setup)
            if not conn.poll(self.start_timeout_s):
                why = f"the timing worker did not start within {self.start_timeout_s:.0f} s"
            else:
                reply = conn.recv()
                if reply[0] == "ready":
                    self._ready, self.label = True, f"{self._name} {reply[1]}"
                    return None
                why = f"the timing worker could not set up: {reply[1]}"
        except (EOFError, OSError, BrokenPipeError):
            why = f"the timing worker exited while starting (exit code {proc.process.poll()})"
        except Exception as e:  # noqa: BLE001 - e.g. inputs that do not pickle: reported per candidate
            why = f"could not send the inputs to the timing worker: {type(e).__name__}: {e}"
        log = self._kill()
        self.restarts += 1
        self._start()
        return why + (f"; its log ends: {log[-300:]}" if log.strip() else "")

    def warm_up(self) -> None:
        """Send the inputs and wait for the worker (a failure is retried by the next `measure`)."""
        if not self._ready and not self.closed:
            self._wait_ready()

    def measure(self, key: str, payload: Any, timeout_s: float) -> Outcome:
        """Time one candidate; never raises for the candidate's own failures."""
        if not self._ready and not self.closed:
            why = self._wait_ready()
            if why is not None:
                return Outcome("failed-worker", why, worker=self.label)
        proc = self._proc
        if self.closed or proc is None:
            return Outcome("failed-worker", "the tune was interrupted", worker=self.label)
        conn = proc.conn
        try:
            conn.send(("measure", key, payload))
        except (OSError, EOFError) as e:
            self._restart()
            return Outcome("failed-worker", f"could not reach the timing worker: {e}", worker=self.label)
        except Exception as e:  # noqa: BLE001 - a payload that does not pickle: this candidate only
            return Outcome("failed-launch", f"could not send the candidate: {type(e).__name__}: {e}",
                           worker=self.label)
        try:
            if not conn.poll(timeout_s):
                self._restart()
                return Outcome("hung", f"no answer within {timeout_s:g} s: the worker was killed and restarted",
                               worker=self.label)
            reply = conn.recv()
        except (EOFError, OSError):
            if self.closed:
                return Outcome("failed-worker", "the tune was interrupted", worker=self.label)
            code = proc.process.wait(timeout=30)
            log = proc.log_tail()
            self._restart()
            tail = f"; its log ends: {log.strip()[-300:]}" if log.strip() else ""
            return Outcome("crashed", f"the worker died (exit code {code}) timing this candidate{tail}",
                           worker=self.label)
        if reply[0] == "ok":
            return Outcome("timed", measurement=reply[1], worker=self.label)
        if reply[0] == "fault":
            self._restart()
            return Outcome("fault", f"{reply[1]} (the worker's context was poisoned; restarted)", worker=self.label)
        return Outcome(reply[0], reply[1], worker=self.label)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.conn.send(("stop",))
            proc.process.wait(timeout=5)
        except Exception:  # noqa: BLE001 - a stuck worker is killed
            proc.process.kill()
        finally:
            proc.conn.close()


class GpuPool:
    """Timing workers fed from one queue, one thread per worker (one timing per GPU at a time).

    `submit(key, payload)` returns a concurrent.futures.Future of an Outcome."""

    def __init__(self, devices: Sequence[str | None], setup: Setup, timeout_s: float):
        self.timeout_s = timeout_s
        self.workers = [TimingWorker(d, setup) for d in devices]
        self.busy_s = [0.0] * len(self.workers)  # seconds each worker spent timing (the timing stage)
        self._queue: queue.Queue = queue.Queue()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True, name=f"tune-{w.label}")
                         for i, w in enumerate(self.workers)]
        for t in self._threads:
            t.start()

    def _run(self, index: int) -> None:
        worker = self.workers[index]
        worker.warm_up()  # while the first candidates compile
        while True:
            item = self._queue.get()
            if item is None:
                return
            key, payload, future = item
            if not future.set_running_or_notify_cancel():
                continue
            t0 = time.perf_counter()
            try:
                outcome = worker.measure(key, payload, self.timeout_s)
                self.busy_s[index] += time.perf_counter() - t0
                future.set_result(outcome)
            except BaseException as e:  # noqa: BLE001 - hand any surprise to the waiting caller
                future.set_exception(e)

    def submit(self, key: str, payload: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((key, payload, future))
        return future

    def measure_on_first(self, key: str, payload: Any) -> Outcome:
        """Time on the first worker directly (call only when the queue is drained: re-timing)."""
        return self.workers[0].measure(key, payload, self.timeout_s)

    def close(self, interrupted: bool = False) -> None:
        """Stop every worker; `interrupted`: also kill those still timing (a Ctrl-C)."""
        while True:  # drop what is still queued (an interrupted tune)
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[2].cancel()
        for _ in self._threads:
            self._queue.put(None)
        if interrupted:
            for w in self.workers:
                w.closed = True
                w._kill()  # a thread may still wait on a timing: its worker's death ends the wait
        for t in self._threads:
            t.join(timeout=60)
        for w in self.workers:
            w.close()


def retime(measure: Callable[[str, Any], Outcome], candidates: Sequence[tuple[str, Any]],
           rounds: int = 3) -> dict[str, tuple[float, list[Outcome]]]:
    """Time each (key, payload) `rounds` times, interleaved (A B C C B A A B C ...), on one
    measure function: key -> (median of the rounds' medians, outcomes). A candidate failing
    any round gets inf."""
    outcomes: dict[str, list[Outcome]] = {k: [] for k, _ in candidates}
    for r in range(rounds):
        order = candidates if r % 2 == 0 else list(reversed(candidates))
        for key, payload in order:
            outcomes[key].append(measure(key, payload))
    result = {}
    for key, outs in outcomes.items():
        medians = sorted(o.measurement.median_ms for o in outs if o.status == "timed")
        ok = len(medians) == len(outs)
        result[key] = (medians[len(medians) // 2] if ok else float("inf"), outs)
    return result
