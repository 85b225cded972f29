"""The tuner (`mgpu_lab.tune`): compile every candidate on CPU cores, time the built ones on one
or many GPUs (one worker process per GPU) as soon as each is built, re-time the top k on one
GPU, journal every finished candidate (resume), cache the winner.

The stages run on a backend: `LocalStages` (a process pool + one timing worker per local GPU)
or `dask_backend.DaskStages` (a Dask cluster). Both yield one record per finished candidate;
everything else (journal, progress, re-time, cache, the table) is shared here.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pickle
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..atomic_files import write_atomically
from ..errors import CacheSecurityWarning
from ..runtime.portable import ML_DTYPES, dtype_from_name
from ..user_errors import user_facing
from .build_pool import BuildPool, build_timed
from .candidates import Candidate, TuneResult, cached_best_config, compile_candidate, expand_space
from .cache_key import key_digest, tune_dir, tune_key
from .cached_answer import answer_from_cache
from .checked_files import folder_problem, make_private_folder
from .errors import TuneBackendLost
from .journal import Journal, config_key, make_record
from .progress import Counts, TuneProgress
from .timers import CudaTimer, HostTimer
from .timing_worker import Setup
from .worker_pool import GpuPool, Outcome, retime, visible_device

RECORD_FIELDS = ("status", "reason", "compile_s", "median_ms", "spread", "rel_error", "worker")


def build_callable(make_kernel: Callable[..., Any], config: dict[str, Any]) -> tuple[str, Any]:
    """The build step for plain Python candidates (HostTimer): `make_kernel(**config)` is the candidate."""
    try:
        return "built", make_kernel(**config)
    except Exception as e:  # noqa: BLE001 - this config only
        return "failed-build", f"{type(e).__name__}: {e}"


def record_from_outcome(config: dict[str, Any], payload: Any, compile_s: float, outcome: Outcome) -> dict[str, Any]:
    return make_record(config, outcome.status, outcome.reason, compile_s, outcome, payload)


class LocalStages:
    """Builds in a BuildPool (default: one killable process per spare CPU core, each build within
    `build_timeout_s`) or in the caller's `executor` (then isolating one build from another is
    that executor's business), times on one TimingWorker per device of `devices`; the workers
    start at once so their start-up overlaps the first builds."""

    def __init__(self, make_kernel: Callable[..., Any], build: Callable[..., Any],
                 executor: concurrent.futures.Executor | None, devices: Sequence[str], setup: Setup,
                 timeout_s: float, n_configs: int, build_timeout_s: float = 300.0):
        self.make_kernel, self.build = make_kernel, build
        self.executor = executor
        self.builders = None if executor is not None else BuildPool(
            max(1, min(n_configs, (os.cpu_count() or 1) - len(devices))), build_timeout_s)
        self.pool = GpuPool(devices, setup, timeout_s)
        self.workers = [w.label for w in self.pool.workers]
        self.compile_wall_s = 0.0
        self.submitted: list[concurrent.futures.Future] = []  # builds, to withdraw on an interrupt

    def _submit_build(self, config: dict[str, Any]) -> concurrent.futures.Future:
        """A Future of (status, Kernel or reason, seconds) for one config."""
        if self.builders is not None:
            future = self.builders.submit(self.build, self.make_kernel, config)
        else:
            future = self.executor.submit(build_timed, self.build, self.make_kernel, config)
        self.submitted.append(future)
        return future

    def stage_seconds(self) -> dict[str, Any]:
        """Wall time until the last compile finished; seconds each worker spent timing."""
        return {"compile_wall": self.compile_wall_s, "timing_busy": list(self.pool.busy_s)}

    def run(self, configs: Sequence[dict[str, Any]], progress: TuneProgress) -> Iterator[dict[str, Any]]:
        t0 = time.perf_counter()
        compiles = {self._submit_build(c): c for c in configs}
        timings: dict[concurrent.futures.Future, tuple] = {}
        pending = set(compiles)
        while pending:
            done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                if future in compiles:
                    config = compiles.pop(future)
                    try:
                        status, payload, seconds = future.result()
                    except Exception as e:  # noqa: BLE001 - a compile worker died or the result did not pickle
                        status, payload, seconds = "failed-build", f"{type(e).__name__}: {e}", None
                    progress.compiled()
                    if not compiles:
                        self.compile_wall_s = time.perf_counter() - t0
                    if status == "built":
                        timing = self.pool.submit(config_key(config), payload)
                        timings[timing] = (config, payload, seconds)
                        pending.add(timing)
                    else:
                        yield make_record(config, status, str(payload), seconds)
                else:
                    config, payload, seconds = timings.pop(future)
                    yield record_from_outcome(config, payload, seconds, future.result())
        self.workers = [w.label for w in self.pool.workers]

    def payloads(self, configs: Sequence[dict[str, Any]]) -> list[tuple[str, Any, float]]:
        """Build again (from the kernel cache) candidates resumed from the journal."""
        futures = [self._submit_build(c) for c in configs]
        return [f.result() for f in futures]

    def resolve(self, payload: Any) -> Any:
        return payload

    def measure_one(self, key: str, payload: Any) -> Outcome:
        return self.pool.measure_on_first(key, payload)

    def close(self, interrupted: bool) -> None:
        self.pool.close(interrupted=interrupted)
        if self.builders is not None:
            self.builders.close(interrupted=interrupted)
        elif interrupted:
            # The caller's executor outlives this tune: withdraw its queued compiles and let the
            # running ones finish here, so none of this tune's work goes on after it returned.
            running = [f for f in self.submitted if not f.cancel()]
            concurrent.futures.wait(running)


def _to_host(x: Any) -> Any:
    """A numpy copy of a CuPy array, a torch tensor or anything numpy takes. Torch's bfloat16 and
    float8 tensors, which `.numpy()` refuses, come back as ml_dtypes arrays of the same bits (what
    a CuPy array of those dtypes gives with `.get()`)."""
    if hasattr(x, "get"):
        return x.get()
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        t = x.detach().cpu()
        name = str(t.dtype).removeprefix("torch.")
        if name in ML_DTYPES:
            import torch

            bits = t.view(torch.int16 if t.element_size() == 2 else torch.uint8).numpy()
            return bits.view(dtype_from_name(name))
        return t.numpy()
    return np.asarray(x)


def _reference_on_host(want: Any) -> np.ndarray:
    first = want[0] if isinstance(want, tuple) else want
    host = _to_host(first)
    return np.asarray(host, dtype=np.float32) if np.asarray(host).dtype != np.float64 else np.asarray(host)


def _input_sets(args: Any) -> tuple[list[tuple], Callable[[], Any] | None]:
    """(the caller's input sets, the make_inputs callable when `args` is one)."""
    make_inputs = args if callable(args) else None
    made = args() if make_inputs else args
    sets = [tuple(a) for a in made] if isinstance(made, list) else [tuple(made)]
    if not sets or not sets[0]:
        raise ValueError("args: expected the kernel's input arrays (a tuple), a list of such tuples, or a "
                         f"callable returning them; got {type(made).__name__}")
    return sets, make_inputs


def _check_seconds(name: str, value: Any) -> None:
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and value > 0):
        raise ValueError(f"{name}: expected a positive number of seconds, got {value!r}")


def _devices(gpus: Any) -> list[str]:
    """CUDA_VISIBLE_DEVICES entries of the workers for `gpus` ('all' or indices)."""
    if gpus == "all":
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
        if count == 0:
            raise ValueError("gpus='all': no CUDA device is visible")
        gpus = list(range(count))
    if isinstance(gpus, (str, bytes)) or not isinstance(gpus, Sequence) or not gpus or \
            not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in gpus) or len(set(gpus)) != len(gpus):
        raise ValueError(f"gpus: expected 'all', None or a list of distinct device indices like [0, 1], got {gpus!r}")
    return [visible_device(g) for g in gpus]


def _current_device(timer: Any) -> int:
    """The device a tune without gpus= times on: CuPy's current one (0 for host timers)."""
    if isinstance(timer, HostTimer):
        return 0
    from ..runtime.device import current_device, has_gpu

    if not has_gpu():
        raise RuntimeError("no CUDA GPU or driver found: compiling works, launching and tuning need a Hopper GPU")
    return current_device()


def _worker_setup(timer: Any, input_sets: list[tuple], make_inputs: Callable[[], Any] | None,
                  reference: Callable[..., Any] | None) -> Setup:
    """What every worker gets once: host copies of the inputs (or make_inputs) and the reference
    output, computed here once."""
    for what, value in (("args", make_inputs), ("timer", timer)):
        try:
            pickle.dumps(value)
        except Exception as e:  # noqa: BLE001 - lambdas, local functions, open handles ...
            raise TypeError(f"{what}: the worker processes need it pickled (a module-level function, a "
                            f"functools.partial of one, or plain data), but {value!r} is not: {e}") from None
    want = reference(*input_sets[0]) if reference is not None else None
    return Setup(timer, None if make_inputs else [tuple(_to_host(a) for a in s) for s in input_sets],
                 make_inputs, None if want is None else _reference_on_host(want))


def _resumed(configs: list[dict[str, Any]], book: Journal | None, bar: TuneProgress) -> dict[str, dict[str, Any]]:
    """Records the journal already holds for these configs (an interrupted tune of the same key)."""
    done = book.load() if book is not None else {}
    records = {}
    for config in configs:
        record = done.get(config_key(config))
        if record is not None:
            records[record["key"]] = {**record, "config": config, "payload": None}
            bar.finished(record["status"] == "timed", resumed=True)
    return records


def _candidate(record: dict[str, Any]) -> Candidate:
    cand = Candidate(record["config"], record["status"], record.get("reason") or "",
                     median_ms=record.get("median_ms"), rel_error=record.get("rel_error"),
                     kernel=record.get("payload"))
    for name in ("compile_s", "spread", "worker"):
        setattr(cand, name, record.get(name))
    return cand


@user_facing
def tune(make_kernel: Callable[..., Any], space: dict[str, Sequence[Any]], args: Any,
         reference: Callable[..., Any] | None = None, *, rtol: float = 1e-2,
         executor: concurrent.futures.Executor | None = None, warmup: int = 5, iters: int = 20,
         use_cache: bool = True, gpus: Any = None, cluster: Any = None, timer: Any = None,
         build: Callable[..., Any] | None = None, journal: bool = True, retime_top: int = 3,
         retime_rounds: int = 3, timeout_s: float = 60.0, build_timeout_s: float = 300.0, progress: bool = True,
         on_record: Callable[[dict[str, Any]], None] | None = None) -> TuneResult:
    """Build `make_kernel(**config)` for every config in `space`, check each against `reference`
    and time it; return every candidate and the fastest correct one (`mgpu_lab.tune`).

    Every candidate is a Kernel, whatever it runs (a split-K GEMM's two launches, stream-K's
    scratch, a padded GEMM's copies). Builds run in a process pool (`executor`, default one
    process per CPU core) and each built candidate is timed as soon as it is built, in a worker
    process per GPU (`gpus`: "all" or device indices; default: the current device), so a
    candidate that faults or hangs costs its worker a restart, nothing more; the top
    `retime_top` are re-timed in interleaved rounds on one GPU; every finished candidate is
    journalled, so an interrupted tune resumes with the rest; the winner is cached per device
    model, kernel, input shapes and toolchain (a cached answer is rebuilt from the kernel cache,
    not re-timed). `cluster`: a dask.distributed Client: build on its workers, time on those with
    a GPU resource.

    args: the input arrays, a list of input tuples to rotate through while timing (several sets
    larger than L2 in total, so timings do not measure the cache), or a picklable callable
    returning them. reference: `reference(*inputs)` -> the expected output (the first output is
    compared; relative error <= rtol). timer: what a worker does with a candidate (default
    `CudaTimer`; `HostTimer` times plain Python callables). timeout_s bounds each timing.
    build_timeout_s bounds each build: without `executor`, every build runs in a process of its
    own pool that is killed and replaced when the build hangs past it or kills its process, so
    that candidate alone gets a "failed-build" row. With a caller's `executor` the builds run
    there as given, and isolating them is that executor's business (no time limit is applied).
    """
    configs = expand_space(space)
    if not isinstance(retime_top, int) or retime_top < 0:
        raise ValueError(f"retime_top: expected a count >= 0, got {retime_top!r}")
    _check_seconds("timeout_s", timeout_s)
    _check_seconds("build_timeout_s", build_timeout_s)
    timer = timer if timer is not None else CudaTimer(warmup=warmup, iters=iters, rtol=rtol)
    build = build or (build_callable if isinstance(timer, HostTimer) else compile_candidate)
    input_sets, make_inputs = _input_sets(args)
    if gpus is None and cluster is None:
        gpus = [_current_device(timer)]
    devices = _devices(gpus) if cluster is None else []

    if cluster is not None:
        from .dask_backend import device_model_on_cluster

        device_model = device_model_on_cluster(cluster, timer)
    else:
        device_model = timer.device_model(0 if gpus == "all" else gpus[0])
    key_parts = tune_key(device_model, make_kernel, input_sets, space)
    digest = key_digest(key_parts)
    folder = tune_dir()
    problem = folder_problem(folder)
    if problem is not None:
        # Another user could plant an answer or a journal there: read nothing, write nothing.
        warnings.warn(f"mgpu_lab: not using the tuning cache folder: {problem}. Tuning without a cached answer "
                      "or a journal; make the folder private (chmod go-w) or set XDG_CACHE_HOME to a folder "
                      "only you can write", CacheSecurityWarning, stacklevel=3)
        use_cache = journal = False
    cache_file = folder / f"{digest}.json"
    book = Journal(folder / f"{digest}.journal.jsonl") if journal else None
    if not use_cache and book is not None:
        book.remove()
    setup = _worker_setup(timer, input_sets, make_inputs, reference)

    def make_stages(n_configs: int, on: Sequence[str]) -> Any:
        if cluster is not None:
            from .dask_backend import DaskStages

            return DaskStages(cluster, make_kernel, build, setup, timeout_s, build_timeout_s)
        return LocalStages(make_kernel, build, executor, on, setup, timeout_s, n_configs, build_timeout_s)

    if use_cache:
        config = cached_best_config(cache_file, configs)
        if config is not None:
            cached = answer_from_cache(config, cache_file, lambda: make_stages(1, devices[:1]), build, make_kernel)
            if cached is not None:
                return cached

    bar = TuneProgress(Counts(len(configs)), enabled=progress)
    records = _resumed(configs, book, bar)
    pending = [c for c in configs if config_key(c) not in records]

    t_start = time.perf_counter()
    stages = make_stages(max(1, len(pending)), devices)
    interrupted = True
    try:
        for record in stages.run(pending, bar):
            records[record["key"]] = record
            if book is not None:
                book.append({k: v for k, v in record.items() if k != "payload"})
            bar.finished(record["status"] == "timed")
            if on_record is not None:
                on_record(record)
        t_timed = time.perf_counter()
        candidates = [_candidate(records[config_key(c)]) for c in configs]
        best = _retime_top(candidates, stages, retime_top, retime_rounds)
        interrupted = False
    except TuneBackendLost as e:
        kept = (f"; they are kept in the journal {book.path}: run the same tune again to resume with the rest"
                if book is not None else " (journal=False: nothing is kept)")
        raise TuneBackendLost(f"{e}; {len(records)} of {len(configs)} candidates had finished{kept}") from None
    finally:
        stages.close(interrupted)
    t_end = time.perf_counter()

    notes = {"workers": getattr(stages, "workers", []), "resumed": len(configs) - len(pending),
             "seconds": {"compile_and_time": t_timed - t_start, "retime": t_end - t_timed, "total": t_end - t_start,
                         **(stages.stage_seconds() if hasattr(stages, "stage_seconds") else {})},
             "key": key_parts}
    if best is not None and problem is None:
        _write_cache(cache_file, best, key_parts, candidates)
    if book is not None:
        book.remove()  # complete: the cache holds the answer and the table
    return TuneResult(candidates, best, cache_path=str(cache_file), notes=notes)


def _retime_top(candidates: list[Candidate], stages: Any, top_k: int, rounds: int) -> Candidate | None:
    """Re-time the `top_k` fastest on one GPU (interleaved rounds); the best by that re-time."""
    timed = sorted((c for c in candidates if c.status == "timed"), key=lambda c: c.median_ms)
    if not timed:
        return None
    top = timed[:top_k]
    missing = [c for c in top if c.kernel is None]  # resumed from the journal: rebuild (kernel cache)
    for cand, (status, payload, _) in zip(missing, stages.payloads([c.config for c in missing])):
        if status == "built":
            cand.kernel = payload
    top = [c for c in top if c.kernel is not None]
    if len(top) >= 2:
        again = retime(stages.measure_one, [(config_key(c.config), c.kernel) for c in top], rounds=rounds)
        for cand in top:
            cand.retimed_ms = again[config_key(cand.config)][0]
        finite = [c for c in top if np.isfinite(c.retimed_ms)]
        best = min(finite, key=lambda c: c.retimed_ms) if finite else timed[0]
    else:
        best = top[0] if top else timed[0]
    for cand in top:
        cand.kernel = stages.resolve(cand.kernel)  # a cluster's build future -> the kernel
    return best


def _write_cache(cache_file: Any, best: Candidate, key_parts: dict[str, Any], candidates: list[Candidate]) -> None:
    from .results import candidate_rows

    record = {"best_config": best.config, "median_ms": best.median_ms, "retimed_ms": best.retimed_ms,
              "key": key_parts, "table": candidate_rows(candidates)}
    try:
        make_private_folder(cache_file.parent)
        write_atomically(cache_file, json.dumps(record, default=repr).encode())
    except (OSError, TypeError, ValueError) as e:
        warnings.warn(f"mgpu_lab: could not record the best configuration in {cache_file}: {e}", stacklevel=3)
