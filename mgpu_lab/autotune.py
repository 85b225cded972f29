"""Autotuning: compile every configuration in parallel on the CPU, time the ones that build and
fit on the GPU, check each against a reference, keep the fastest (cached per device/kernel/shape).

    result = mgpu_lab.tune(make_gemm, space={"tile_n": [128, 256], "stages": [3, 4]},
                           args=(a, b), reference=lambda a, b: a @ b)
    result.best_config, result.best_kernel, result.table(), result.plot()
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import inspect
import itertools
import json
import multiprocessing
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .atomic_files import write_atomically
from .user_errors import user_facing


@dataclass
class Candidate:
    """One configuration and what happened to it."""

    config: dict[str, Any]
    status: str = "pending"  # built, failed-build, does-not-fit, wrong-result, timed
    reason: str = ""
    median_ms: float | None = None
    rel_error: float | None = None
    compiled: Any = None
    compile_s: float | None = None  # the parallel tune (mgpu_lab/tuning/) fills these four
    spread: float | None = None
    worker: str | None = None
    retimed_ms: float | None = None


@dataclass
class WrappedKernel:
    """A built candidate that is more than one plain Kernel: split-K's two launches, stream-K's
    workspace and flags, the padded GEMM's copies. Only `make_kernel(**config)` knows how to put
    those together, so the process that times it calls that again (its kernels come from the
    compile cache); `compiled` is its main kernel's CompiledKernel, and attributes it lacks
    (`sass`, `resources`, ...) are read from there."""

    make_kernel: Callable[..., Any]
    config: dict[str, Any]
    compiled: Any

    def launchable(self) -> Any:
        return self.make_kernel(**self.config)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("make_kernel", "config", "compiled"):  # (unpickling)
            raise AttributeError(name)
        return getattr(self.compiled, name)


def launchable(payload: Any) -> Any:
    """What a built candidate is launched as: a Kernel of its CompiledKernel, or a WrappedKernel's
    object built again."""
    if isinstance(payload, WrappedKernel):
        return payload.launchable()
    from .builder.kernel import Kernel

    return Kernel(payload)


def _compile_one(make_kernel: Callable[..., Any], config: dict[str, Any]) -> tuple[str, Any]:
    """Runs in a worker: build and compile; return ("built", CompiledKernel or WrappedKernel) or
    (status, reason)."""
    from .errors import KernelBuildError, KernelCompileError, ResourceLimitError

    try:
        kernel = make_kernel(**config)
    except ResourceLimitError as e:
        return "does-not-fit", str(e)
    except (KernelBuildError, KernelCompileError) as e:
        return "failed-build", f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - any error of make_kernel disqualifies this config only
        return "failed-build", f"{type(e).__name__}: {e} (raised by make_kernel{_where(e)})"
    if not hasattr(kernel, "compiled"):
        return "failed-build", f"make_kernel returned {type(kernel).__name__}, not a Kernel"
    from .builder.kernel import Kernel

    compiled = kernel.compiled
    compiled.sass  # noqa: B018 - finish the background disassembly before pickling
    return "built", compiled if type(kernel) is Kernel else WrappedKernel(make_kernel, dict(config), compiled)


def _where(error: BaseException) -> str:
    """' at file:line' of the innermost frame outside mgpu_lab's internals, for candidate reports."""
    from .user_errors import is_library_file

    tb, where = error.__traceback__, ""
    while tb is not None:
        if not is_library_file(tb.tb_frame.f_code.co_filename):
            where = f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def _configs(space: dict[str, Sequence[Any]]) -> list[dict[str, Any]]:
    if not isinstance(space, dict) or not space:
        raise ValueError(f"space: expected a non-empty dict of parameter -> list of values, got {space!r}")
    for key, values in space.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"space[{key!r}]: expected a non-empty list of values, got {values!r}")
    keys = list(space)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(space[k] for k in keys))]


def compile_candidates(make_kernel: Callable[..., Any], space: dict[str, Sequence[Any]],
                       executor: concurrent.futures.Executor | None = None,
                       progress: Callable[[int, int], None] | None = None) -> list[Candidate]:
    """Compile every configuration of `space` with `executor` (default: a process per CPU)."""
    configs = _configs(space)
    own = executor is None
    if own:
        executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=min(len(configs), os.cpu_count() or 1), mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = [executor.submit(_compile_one, make_kernel, c) for c in configs]
        candidates = []
        for i, (config, future) in enumerate(zip(configs, futures)):
            try:
                status, payload = future.result()
            except Exception as e:  # noqa: BLE001 - e.g. a worker died or the result did not pickle
                status, payload = "failed-build", f"{type(e).__name__}: {e}"
            cand = Candidate(config, status)
            if status == "built":
                cand.compiled = payload
            else:
                cand.reason = payload
            candidates.append(cand)
            if progress:
                progress(i + 1, len(configs))
        return candidates
    finally:
        if own:
            executor.shutdown()


def _rel_error(got: Any, want: Any) -> float:
    g = np.asarray(got.get() if hasattr(got, "get") else got, dtype=np.float64)
    w = np.asarray(want.get() if hasattr(want, "get") else want, dtype=np.float64)
    if g.shape != w.shape or not np.isfinite(g).all():
        return float("inf")
    return float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))


@dataclass
class TuneResult:
    """All candidates, the best one, and renderings of the table."""

    candidates: list[Candidate]
    best: Candidate | None
    from_cache: bool = False
    cache_path: str = ""
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def best_config(self) -> dict[str, Any] | None:
        return self.best.config if self.best else None

    @property
    def best_kernel(self) -> Any:
        """The best candidate, ready to call (a Kernel, or what make_kernel returned for it)."""
        if self.best is None or self.best.compiled is None:
            return None
        return launchable(self.best.compiled)

    def rows(self) -> list[dict[str, Any]]:
        return [{**c.config, "status": c.status, "median_ms": c.median_ms, "rel_error": c.rel_error,
                 "reason": c.reason} for c in self.candidates]

    def table(self) -> str:
        rows = self.rows()
        if not rows:
            return "(no candidates)"
        keys = list(rows[0])
        cells = [keys] + [["" if r[k] is None else (f"{r[k]:.4g}" if isinstance(r[k], float) else str(r[k]))[:60]
                           for k in keys] for r in rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(keys))]
        return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells)

    def __str__(self) -> str:
        best = f"best {self.best_config} at {self.best.median_ms:.4g} ms" if self.best else "no candidate worked"
        return f"{self.table()}\n{best}{' (from cache)' if self.from_cache else ''}"

    def _repr_html_(self) -> str:
        import html

        rows = self.rows()
        if not rows:
            return "<p>no candidates</p>"
        head = "".join(f"<th>{html.escape(k)}</th>" for k in rows[0])
        body = "".join("<tr>" + "".join(f"<td>{html.escape('' if v is None else str(v))}</td>" for v in r.values())
                       + "</tr>" for r in rows)
        return f"<table><tr>{head}</tr>{body}</table><p>{html.escape(str(self).splitlines()[-1])}</p>"

    def to_dataframe(self) -> Any:
        """The tuning table as a pandas DataFrame: config, status, compile_s, median_ms, spread,
        retimed_ms, rel_error, worker, reason; fastest first."""
        from .tuning.results import to_dataframe

        return to_dataframe(self.candidates)

    def plot(self, ax: Any = None) -> Any:
        """Bar chart of the timed candidates (matplotlib); after a parallel tune, the fastest 40
        coloured by the worker that timed them."""
        import matplotlib.pyplot as plt

        if any(c.worker for c in self.candidates):
            from .tuning.results import plot_table

            return plot_table(self.candidates, self.best, ax)
        timed = [c for c in self.candidates if c.median_ms is not None]
        if ax is None:
            _, ax = plt.subplots(figsize=(max(4, 0.6 * len(timed)), 3))
        labels = [",".join(f"{k}={v}" for k, v in c.config.items()) for c in timed]
        colors = ["tab:green" if c is self.best else "tab:blue" for c in timed]
        ax.bar(range(len(timed)), [c.median_ms for c in timed], color=colors)
        ax.set_xticks(range(len(timed)), labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("median ms")
        return ax


def _cache_path(make_kernel: Callable[..., Any], space: dict, inputs: Sequence[Any]) -> Path:
    from .runtime.device import current_device

    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(current_device())
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    who = f"{getattr(make_kernel, '__module__', '?')}.{getattr(make_kernel, '__qualname__', repr(make_kernel))}"
    shapes = [(tuple(x.shape), str(x.dtype)) for x in inputs]
    from .compiler.toolchain import versions

    # The kernel's module source and the toolchain: an edited kernel or a new ptxas re-tunes.
    fn = getattr(make_kernel, "func", make_kernel)
    try:
        source = inspect.getsource(inspect.getmodule(fn))
    except (OSError, TypeError):  # no source file (a notebook cell): the function's own bytecode
        source = getattr(getattr(fn, "__code__", None), "co_code", b"").hex() or repr(fn)
    key = hashlib.sha256(json.dumps([name, who, shapes, {k: list(map(repr, v)) for k, v in space.items()},
                                     source, versions()], sort_keys=True).encode()).hexdigest()[:24]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mgpu_lab" / "tune" / f"{key}.json"


def _cached_best_config(cache_file: Path) -> dict[str, Any] | None:
    """The best configuration a previous tune recorded, or None; a corrupt file is a miss."""
    if not cache_file.is_file():
        return None
    try:
        config = json.loads(cache_file.read_text())["best_config"]
        if not isinstance(config, dict):
            raise TypeError(f"best_config is a {type(config).__name__}")
        return config
    except (OSError, ValueError, KeyError, TypeError) as e:
        warnings.warn(f"mgpu_lab: ignoring the corrupt tuning cache file {cache_file} "
                      f"({type(e).__name__}: {e}); tuning again", stacklevel=3)
        cache_file.unlink(missing_ok=True)
        return None


def _progress_reporter(label: str) -> Callable[[int, int], None]:
    """A notebook progress bar when ipywidgets is shown, else a line on stderr."""
    try:
        from IPython import get_ipython

        if type(get_ipython()).__name__ == "ZMQInteractiveShell":
            import ipywidgets
            from IPython.display import display

            bar = ipywidgets.IntProgress(description=label, min=0, max=1)
            display(bar)

            def update(done: int, total: int) -> None:
                bar.max, bar.value = total, done
            return update
    except ImportError:
        pass

    def text(done: int, total: int) -> None:
        print(f"\r{label}: {done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)
    return text


@user_facing
def tune(make_kernel: Callable[..., Any], space: dict[str, Sequence[Any]], args: Any,
         reference: Callable[..., Any] | None = None, *, rtol: float = 1e-2,
         executor: concurrent.futures.Executor | None = None, warmup: int = 5, iters: int = 20,
         use_cache: bool = True, gpus: str | Sequence[int] | None = None, cluster: Any = None,
         **parallel: Any) -> TuneResult:
    """Compile `make_kernel(**config)` for every config in `space`, time and check those that work.

    args: the input arrays, or a list of input tuples to rotate through while timing (use
    several sets larger than L2 in total so timings do not measure the cache).
    reference: `reference(*inputs)` -> expected output (first output is compared), rel. error <= rtol.
    executor: any concurrent.futures-style executor for the compiles (default: spawn processes).
    The best configuration is cached per device, kernel and input shapes; a cached answer is
    recompiled (from the kernel cache) but not re-timed.
    gpus: "all" or device indices [0, 1]: time in one worker process per GPU while compiling
    (a faulting or hanging candidate costs its worker a restart, nothing more), re-time the top
    3 on one GPU, journal every candidate so an interrupted tune resumes; None: this process.
    cluster: a dask.distributed Client: compile on its workers, time on those with a GPU resource.
    With gpus or cluster, `args` may also be a picklable callable returning the inputs, and
    `parallel` takes timer=, build=, journal=, retime_top=, timeout_s=, progress= (see
    mgpu_lab/tuning/pipeline.py).
    """
    if gpus is not None or cluster is not None:
        from .tuning.pipeline import tune_parallel

        return tune_parallel(make_kernel, space, args, reference, rtol=rtol, executor=executor, warmup=warmup,
                             iters=iters, use_cache=use_cache, gpus=gpus, cluster=cluster, **parallel)
    if parallel:
        raise TypeError(f"tune: {', '.join(sorted(parallel))} need gpus= or cluster= (the parallel tune)")
    input_sets = [tuple(a) for a in args] if isinstance(args, list) else [tuple(args)]
    if not input_sets or not input_sets[0]:
        raise ValueError("args: expected the kernel's input arrays (a tuple) or a list of such tuples")
    _configs(space)  # a malformed space fails here, before any GPU work
    cache_file = _cache_path(make_kernel, space, input_sets[0])
    config = _cached_best_config(cache_file) if use_cache else None
    if config is not None:
        status, payload = _compile_one(make_kernel, config)
        if status == "built":
            best = Candidate(config, "cached", compiled=payload)
            return TuneResult([best], best, from_cache=True, cache_path=str(cache_file))

    candidates = compile_candidates(make_kernel, space, executor, _progress_reporter("compile"))
    from .runtime.timing import time_cuda
    from .tuning.timers import launch_on_poisoned_outputs

    built = [c for c in candidates if c.status == "built"]
    report = _progress_reporter("time")
    for i, cand in enumerate(built):
        try:
            kernel = launchable(cand.compiled)
            out = launch_on_poisoned_outputs(kernel, input_sets[0])
        except Exception as e:  # noqa: BLE001 - a launch failure disqualifies this candidate only
            cand.status, cand.reason = "failed-launch", f"{type(e).__name__}: {e}"
            report(i + 1, len(built))
            continue
        if reference is not None:
            first = out[0] if isinstance(out, tuple) else out
            want = reference(*input_sets[0])
            cand.rel_error = _rel_error(first, want[0] if isinstance(want, tuple) else want)
            if not cand.rel_error <= rtol:
                cand.status, cand.reason = "wrong-result", f"relative error {cand.rel_error:.3g} > {rtol}"
                report(i + 1, len(built))
                continue
        cand.median_ms = time_cuda(lambda k: kernel(*input_sets[k % len(input_sets)]),
                                   warmup=warmup, iters=iters).median_ms
        cand.status = "timed"
        report(i + 1, len(built))
    timed = [c for c in candidates if c.status == "timed"]
    best = min(timed, key=lambda c: c.median_ms) if timed else None
    if best is not None:
        try:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(cache_file, json.dumps({"best_config": best.config, "median_ms": best.median_ms}).encode())
        except (OSError, TypeError, ValueError) as e:  # unwritable folder, a config that is not JSON
            warnings.warn(f"mgpu_lab: could not record the best configuration in {cache_file}: {e}", stacklevel=2)
    return TuneResult(candidates, best, cache_path=str(cache_file))
