"""The tuner's records: a `Candidate` per configuration (its Kernel once built), the
`TuneResult` of a tune, and the steps every backend shares: expanding the search space, building
one candidate in a compile worker, reading a cached answer."""

from __future__ import annotations

import concurrent.futures
import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runtime.kernel import Kernel
from ..user_errors import user_facing


@dataclass
class Candidate:
    """One configuration and what happened to it; `kernel` is its Kernel once built."""

    config: dict[str, Any]
    status: str = "pending"  # built, failed-build, does-not-fit, wrong-result, timed
    reason: str = ""
    median_ms: float | None = None
    rel_error: float | None = None
    kernel: Any = None  # the built Kernel (for HostTimer tunes: the built callable)
    compile_s: float | None = None
    spread: float | None = None
    worker: str | None = None
    retimed_ms: float | None = None

    @property
    def compiled(self) -> Any:
        """Deprecated (0.2): the candidate's Kernel is `kernel`; this alias goes away in 0.3."""
        from mgpu_lab.deprecation import warn_moved

        warn_moved("Candidate.compiled", "Candidate.kernel")
        return self.kernel


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
        """The best candidate's Kernel, ready to call, export or show (None if none worked)."""
        if self.best is None or self.best.kernel is None:
            return None
        return self.best.kernel

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
        from .results import to_dataframe

        return to_dataframe(self.candidates)

    def plot(self, ax: Any = None) -> Any:
        """Bar chart of the timed candidates (matplotlib); after a parallel tune, the fastest 40
        coloured by the worker that timed them."""
        import matplotlib.pyplot as plt

        if any(c.worker for c in self.candidates):
            from .results import plot_table

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


def compile_candidate(make_kernel: Callable[..., Any], config: dict[str, Any]) -> tuple[str, Any]:
    """Runs in a compile worker: build and compile; return ("built", the Kernel) or (status, reason).
    Every candidate is a Kernel, whatever its program holds (split-K's two launches, stream-K's
    scratch buffers, a padded GEMM's copies): it pickles whole and runs as it is where it is timed."""
    from ..errors import KernelBuildError, KernelCompileError, ResourceLimitError

    try:
        kernel = make_kernel(**config)
    except ResourceLimitError as e:
        return "does-not-fit", str(e)
    except (KernelBuildError, KernelCompileError) as e:
        return "failed-build", f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - any error of make_kernel disqualifies this config only
        return "failed-build", f"{type(e).__name__}: {e} (raised by make_kernel{_where(e)})"
    if not isinstance(kernel, Kernel):
        return "failed-build", f"make_kernel returned {type(kernel).__name__}, not an mgpu_lab.Kernel"
    for compiled in kernel.launches:
        compiled.wait_disassembly()  # finish the background disassembly before pickling
    return "built", kernel


def _where(error: BaseException) -> str:
    """' at file:line' of the innermost frame outside mgpu_lab's internals, for candidate reports."""
    from ..user_errors import is_library_file

    tb, where = error.__traceback__, ""
    while tb is not None:
        if not is_library_file(tb.tb_frame.f_code.co_filename):
            where = f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def expand_space(space: dict[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every configuration of `space` ({parameter: [values]}), in product order."""
    if not isinstance(space, dict) or not space:
        raise ValueError(f"space: expected a non-empty dict of parameter -> list of values, got {space!r}")
    for key, values in space.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"space[{key!r}]: expected a non-empty list of values, got {values!r}")
    keys = list(space)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(space[k] for k in keys))]


@user_facing
def compile_candidates(make_kernel: Callable[..., Any], space: dict[str, Sequence[Any]],
                       executor: concurrent.futures.Executor | None = None,
                       build_timeout_s: float = 300.0) -> list[Candidate]:
    """Build every configuration of `space` with `executor` (default: a BuildPool of one killable
    process per CPU, each build within `build_timeout_s`); each Candidate is "built" with its
    Kernel, or carries the reason it failed. With a caller's executor, isolating one build from
    another is that executor's business."""
    from .build_pool import BuildPool, build_timed

    configs = expand_space(space)
    pool = BuildPool(min(len(configs), os.cpu_count() or 1), build_timeout_s) if executor is None else None
    try:
        if pool is not None:
            futures = [pool.submit(compile_candidate, make_kernel, c) for c in configs]
        else:
            futures = [executor.submit(build_timed, compile_candidate, make_kernel, c) for c in configs]
        candidates = []
        for config, future in zip(configs, futures):
            try:
                status, payload, _ = future.result()
            except Exception as e:  # noqa: BLE001 - e.g. a worker died or the result did not pickle
                status, payload = "failed-build", f"{type(e).__name__}: {e}"
            cand = Candidate(config, status)
            if status == "built":
                cand.kernel = payload
            else:
                cand.reason = payload
            candidates.append(cand)
        return candidates
    finally:
        if pool is not None:
            pool.close()


def cached_best_config(cache_file: Path, configs: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """The best configuration a previous tune recorded (as `configs`, the current space, spells
    it), or None. A file another user could have written, a corrupt one, one whose fields have
    the wrong types or whose config is outside `configs` is a miss: warned about and removed."""
    from .checked_files import answer_problem, config_in_space, discard, load_checked_json

    data = load_checked_json(cache_file, "tuning cache file")
    if data is None:
        return None
    problem = answer_problem(data)
    if problem is not None:
        discard(cache_file, f"the corrupt tuning cache file {cache_file} ({problem}); tuning again")
        return None
    config = data["best_config"]
    if configs is None:
        return config
    found = config_in_space(config, configs)
    if found is None:
        discard(cache_file, f"the tuning cache file {cache_file}: its best_config {config} is not in the "
                            "search space; tuning again")
    return found
