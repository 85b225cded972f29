"""The parallel tune's two stages on a Dask distributed cluster (the `mgpu_lab[distributed]` extra).

    client = distributed.Client("tcp://scheduler:8786")
    mgpu_lab.tune(make_gemm, space, args=make_inputs, reference=ref, cluster=client)

Compiles go to the workers that declare no GPU resource (all workers when every one has a GPU);
timings go to workers started with `dask worker ADDRESS --resources GPU=1` (one worker process per
GPU, e.g. CUDA_VISIBLE_DEVICES set per worker as dask-cuda does), and the resource makes the
scheduler run one timing per GPU at a time. Inside a GPU worker the timing itself runs in this
package's TimingWorker subprocess, kept across tasks: the Dask worker never creates a CUDA context,
so a faulting or hanging candidate costs that subprocess a restart and the candidate a "failed"
row, never the Dask worker or the other candidates. The compiled kernel moves from the compile
worker to the GPU worker directly (a task dependency); the inputs and reference are scattered
once to every worker (so one worker's death loses no copy) and cached on each GPU worker. A
worker that dies costs only the candidates it held a retry (the scheduler's allowed-failures);
a lost scheduler ends the tune with a one-line `TuneBackendLost`, the finished candidates kept
in the journal. Nothing here is imported by the single-host path.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .journal import config_key, make_record
from .build_once import build_isolated
from .errors import TuneBackendLost
from .timing_worker import Setup
from .worker_pool import Outcome, TimingWorker

_LOCAL: dict[str, Any] = {}  # in each Dask worker process: the TimingWorker of the current tune
_LOCAL_LOCK = threading.Lock()


def _timing_worker(token: str, setup: Setup) -> tuple[TimingWorker, threading.Lock]:
    """This Dask worker's TimingWorker for the tune `token` (one from an earlier tune is stopped)."""
    with _LOCAL_LOCK:
        if _LOCAL.get("token") != token:
            old = _LOCAL.get("worker")
            if old is not None:
                old.close()
            _LOCAL.update(token=token, worker=TimingWorker(None, setup), lock=threading.Lock())
        return _LOCAL["worker"], _LOCAL["lock"]


def time_task(built: tuple[str, Any, float | None], setup: Setup, token: str, timeout_s: float,
              key: str) -> tuple[str, str, float | None, Outcome | None]:
    """A Dask task on a GPU worker: time one built candidate; (status, reason, compile s, outcome)."""
    status, payload, seconds = built
    if status != "built":
        return status, str(payload), seconds, None
    from distributed import get_worker

    worker, lock = _timing_worker(token, setup)
    with lock:  # a worker declaring GPU=2 would otherwise overlap two timings on one device
        outcome = worker.measure(key, payload, timeout_s)
    where = f"{get_worker().address} {outcome.worker}"
    return outcome.status, outcome.reason, seconds, Outcome(outcome.status, outcome.reason, outcome.measurement, where)


def _stop_timing_worker() -> bool:
    with _LOCAL_LOCK:
        old = _LOCAL.pop("worker", None)
        _LOCAL.clear()
    if old is not None:
        old.close()
    return old is not None


def _gpu_workers(client: Any) -> tuple[list[str], list[str]]:
    workers = client.scheduler_info(n_workers=-1)["workers"] if _takes_n_workers(client) else \
        client.scheduler_info()["workers"]
    gpu = sorted(a for a, w in workers.items() if (w.get("resources") or {}).get("GPU", 0) >= 1)
    cpu = sorted(a for a in workers if a not in gpu)
    return gpu, cpu


def _takes_n_workers(client: Any) -> bool:
    import inspect

    return "n_workers" in inspect.signature(client.scheduler_info).parameters


def _check_client(client: Any) -> list[str]:
    if not (hasattr(client, "submit") and hasattr(client, "scheduler_info")):
        raise TypeError(f"cluster: expected a dask.distributed Client, got {type(client).__name__}")
    gpu, _ = _gpu_workers(client)
    if not gpu:
        raise ValueError("cluster: no worker declares a GPU resource; start GPU workers with "
                         "`dask worker SCHEDULER --nthreads 1 --resources GPU=1` (one per GPU)")
    return gpu


def device_model_on_cluster(client: Any, timer: Any) -> str:
    """The device model as a GPU worker sees it (the tune's cache key)."""
    _check_client(client)
    return client.submit(timer.device_model, resources={"GPU": 1}, pure=False).result()


class DaskStages:
    """Compile and time on `client`'s workers; same interface as pipeline.LocalStages."""

    def __init__(self, client: Any, make_kernel: Callable[..., Any], build: Callable[..., Any], setup: Setup,
                 timeout_s: float, build_timeout_s: float = 300.0):
        self.client, self.make_kernel, self.build, self.timeout_s = client, make_kernel, build, timeout_s
        self.build_timeout_s = build_timeout_s
        self.gpu_workers = _check_client(client)
        _, cpu = _gpu_workers(client)
        self.compile_workers = cpu or None  # None: any worker
        self.token = uuid.uuid4().hex
        self.address = getattr(getattr(client, "scheduler", None), "address", None) or "?"
        # On every worker (and copied to any that joins): the death of one worker loses no copy of it.
        self.setup = client.scatter(setup, hash=False, broadcast=True)
        self.built: dict[str, Any] = {}
        self._timings: dict[Any, dict[str, Any]] = {}  # timing futures not yet reported
        self.workers = list(self.gpu_workers)

    def _build(self, config: dict[str, Any]) -> Any:
        # Loose: a compile worker that died comes back under a new address, and a strict
        # restriction to the old one would wait for it forever; with no compile worker left,
        # the scheduler places the build on any worker.
        loose = self.compile_workers is not None  # Dask allows it only with a worker list
        # In a killable process of the worker's own (build_isolated): a hung or dying build costs
        # its candidate one row, not the worker (and not the scheduler's retries).
        future = self.client.submit(build_isolated, self.build, self.make_kernel, config, self.build_timeout_s,
                                    pure=False, workers=self.compile_workers, allow_other_workers=loose)
        self.built[config_key(config)] = future
        return future

    def _time(self, built: Any, key: str, workers: Sequence[str] | None = None) -> Any:
        return self.client.submit(time_task, built, self.setup, self.token, self.timeout_s, key, pure=False,
                                  resources={"GPU": 1}, workers=workers, retries=0)

    def _lost(self, error: BaseException) -> TuneBackendLost | None:
        """A TuneBackendLost when `error` came from losing the scheduler (the client then cancels
        every future at once), else None (the error is this candidate's own)."""
        status = getattr(self.client, "status", "running")
        if status == "running" and "scheduler-connection-lost" not in str(error):
            return None
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return TuneBackendLost(f"cluster: lost the Dask scheduler at {self.address} (client {status}; "
                               f"{type(error).__name__}: {first})")

    def _result(self, future: Any) -> Any:
        try:
            return future.result()
        except Exception as e:  # noqa: BLE001 - sorted below: the scheduler's loss, or re-raised
            lost = self._lost(e)
            if lost is not None:
                raise lost from None
            raise

    def run(self, configs: Sequence[dict[str, Any]], progress: Any) -> Iterator[dict[str, Any]]:
        from distributed import as_completed

        timings = self._timings
        for config in configs:
            built = self._build(config)
            built.add_done_callback(lambda _f: progress.compiled())
            timings[self._time(built, config_key(config))] = config
        for future in as_completed(list(timings)):
            config = timings.pop(future)
            try:
                status, reason, seconds, outcome = self._result(future)
            except TuneBackendLost:
                raise  # not this candidate's failure: it is not recorded, a rerun does it
            except Exception as e:  # noqa: BLE001 - e.g. KilledWorker: this candidate only
                yield make_record(config, "failed-worker", f"the Dask task failed: {type(e).__name__}: {e}")
                continue
            yield make_record(config, status, reason, seconds, outcome)

    def payloads(self, configs: Sequence[dict[str, Any]]) -> list[tuple[str, Any, float | None]]:
        """Futures of the built candidates (rebuilt when resumed from the journal)."""
        return [("built", self.built.get(config_key(c)) or self._build(c), None) for c in configs]

    def measure_one(self, key: str, payload: Any) -> Outcome:
        live, _ = _gpu_workers(self.client)  # asked each time: the first GPU worker may have died
        status, reason, _, outcome = self._result(self._time(payload, key, workers=live[:1] or None))
        return outcome if outcome is not None else Outcome(status, reason)

    def resolve(self, payload: Any) -> Any:
        """The CompiledKernel behind a build future."""
        if hasattr(payload, "result"):
            status, compiled, _ = self._result(payload)
            return compiled if status == "built" else None
        return payload

    def close(self, interrupted: bool) -> None:
        if getattr(self.client, "status", "running") != "running":
            return  # the scheduler is gone: nothing to withdraw, and a call would wait for it to return
        try:
            for future in [*self._timings, *self.built.values()]:
                future.cancel()  # an interrupted tune leaves no work queued on the cluster
            live, _ = _gpu_workers(self.client)  # not the dead: a call to one waits out the connect timeout
            self.client.run(_stop_timing_worker, workers=live)
        except Exception:  # noqa: BLE001 - a worker or scheduler that went away has nothing to stop
            pass
