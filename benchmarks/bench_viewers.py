"""How long a viewer takes to reach the notebook once its data is ready, and how big its output is.

"Data ready" is a CompiledKernel with its SASS (awaited first) or a Trace in hand. Timed is
what `display(view)` does in Python: build the view (widget state included) and both outputs
of `StaticFallback._ipython_display_` (the static rendering and the widget bundle). The
browser's own drawing is not in it (the browser tests check what it draws, not how fast).

The case is the heaviest one the notebooks meet: the 4096^3 GEMM built with `keep_passes=True`
and `profile=True` (13 MB of pass-by-pass IR) and the committed 8192^3 GEMM trace sample.
Goals from issue 10: <= 0.5 s per viewer, <= 1 MB per output. Runs on a machine without a GPU
(compile only). Each viewer is timed `--runs` times; the figure is the median.

    python benchmarks/bench_viewers.py [--runs 5]

Writes a record `viewers_<time>_<commit>.json` under benchmarks/results/ (or $OUT) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parent.parent))  # this checkout's mgpu_lab, also without PYTHONPATH
from common import table, write_record  # noqa: E402

TRACE = Path(__file__).parent / "results" / "gemm_8192_trace_sample.npz"


def _display_once(make_view: Callable[[], Any]) -> tuple[float, int, int]:
    """(seconds, static output bytes, widget state bytes) of one `display(view)` in Python."""
    start = time.perf_counter()
    view = make_view()
    static = json.dumps(view.static_bundle())
    widget = json.dumps(view.widget_bundle())
    state = view.get_state()
    seconds = time.perf_counter() - start
    synced = sum(len(v) if isinstance(v, (bytes, memoryview)) else len(json.dumps(v)) for v in state.values())
    return seconds, len(static) + len(widget), synced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from mgpu_lab.kernels.gemm import make_gemm
    from mgpu_lab.profiler.trace import Trace
    from mgpu_lab.widgets import IrView, SassView, SmemView, Timeline

    start = time.perf_counter()
    kernel = make_gemm(4096, 4096, 4096, transpose_b=True, keep_passes=True, profile=True).compiled
    kernel.wait_disassembly()
    trace = Trace.load(TRACE)
    prepare_s = time.perf_counter() - start
    views = {"sass": lambda: SassView(kernel), "smem": lambda: SmemView(kernel), "ir": lambda: IrView(kernel),
             "timeline": lambda: Timeline(trace)}
    figures: dict[str, float] = {}
    runs: dict[str, list[float]] = {}
    rows = []
    for name, make_view in views.items():
        samples = [_display_once(make_view) for _ in range(args.runs)]
        runs[name] = [s for s, _, _ in samples]
        seconds = statistics.median(runs[name])
        output_bytes, state_bytes = samples[-1][1], samples[-1][2]
        figures[f"viewer_display_s_{name}"] = seconds
        figures[f"viewer_output_bytes_{name}"] = output_bytes
        figures[f"viewer_widget_state_bytes_{name}"] = state_bytes
        rows.append((name, f"{seconds:.3f}", f"{min(runs[name]):.3f}-{max(runs[name]):.3f}",
                     f"{output_bytes / 1e6:.2f}", f"{state_bytes / 1e6:.2f}"))
    figures["viewer_display_s_max"] = max(figures[f"viewer_display_s_{n}"] for n in views)
    passes_mb = sum(len(text) for _, text in kernel.passes) / 1e6
    notes = {"case": "make_gemm(4096, 4096, 4096, transpose_b=True, keep_passes=True, profile=True); "
                     "trace results/gemm_8192_trace_sample.npz",
             "timed": "view construction + static bundle + widget bundle + widget state (Python side)",
             "runs_s": runs, "pass_ir_mb": passes_mb, "compile_and_sass_s": prepare_s,
             "goals": {"seconds": 0.5, "output_bytes": 1_000_000}}
    path = write_record("viewers", figures, notes)
    print(table([("viewer", "median s", "range s", "outputs MB", "widget state MB"), *rows]))
    print(f"pass-by-pass IR: {passes_mb:.1f} MB; compile + SASS first: {prepare_s:.1f} s; record: {path}")


if __name__ == "__main__":
    main()
