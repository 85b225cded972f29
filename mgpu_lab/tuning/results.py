"""The tuning table as data: a pandas DataFrame (one row per candidate) and a plot of it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

COLUMNS = ("status", "compile_s", "median_ms", "spread", "retimed_ms", "rel_error", "worker", "reason")


def candidate_rows(candidates: Sequence[Any]) -> list[dict[str, Any]]:
    """One dict per candidate: its config's parameters, then COLUMNS."""
    return [{**c.config, **{k: getattr(c, k, None) for k in COLUMNS}} for c in candidates]


def to_dataframe(candidates: Sequence[Any]) -> Any:
    """A pandas DataFrame of the candidates, fastest first (failed ones last, with their reason)."""
    import pandas as pd

    frame = pd.DataFrame(candidate_rows(candidates))
    if frame.empty:
        return frame
    return frame.sort_values("median_ms", na_position="last", kind="stable").reset_index(drop=True)


def plot_table(candidates: Sequence[Any], best: Any = None, ax: Any = None, top: int = 40) -> Any:
    """Horizontal bars of the `top` fastest timed candidates, coloured by the worker that timed
    them (the best one outlined), so a device that times slower than the others shows."""
    import matplotlib.pyplot as plt

    timed = sorted((c for c in candidates if c.median_ms is not None), key=lambda c: c.median_ms)[:top]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, max(2.0, 0.22 * len(timed) + 1)))
    workers = sorted({c.worker or "" for c in timed})
    colors = {w: plt.cm.tab10(i % 10) for i, w in enumerate(workers)}
    y = range(len(timed))
    ax.barh(y, [c.median_ms for c in timed], color=[colors[c.worker or ""] for c in timed],
            edgecolor=["black" if c is best else "none" for c in timed], linewidth=1.5)
    ax.set_yticks(list(y), [",".join(f"{k}={v}" for k, v in c.config.items()) for c in timed], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("median ms")
    for w in workers:
        ax.barh([], [], color=colors[w], label=w or "?")
    if len(workers) > 1:
        ax.legend(fontsize=6, loc="lower right")
    return ax
