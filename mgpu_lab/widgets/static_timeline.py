"""Static timeline: a rasterized matplotlib image and an HTML page with the region summary.

The image is computed per pixel column (which region covers each pixel of each lane) rather
than drawing one rectangle per event, so a million-event trace renders in well under a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mgpu_lab.widgets.palette import categorical
from mgpu_lab.widgets.static_html import figure_img, format_ns, section, table
from mgpu_lab.widgets.timeline_layout import TimelineLayout

SUMMARY_HEADERS = ("region", "count", "total", "mean", "p50", "p95", "share")


def rasterize(
    layout: TimelineLayout,
    t0: float,
    t1: float,
    width: int,
    hidden: Sequence[int] = (),
) -> np.ndarray:
    """Region index drawn at each (level row, pixel) of [t0, t1), -1 where nothing is.

    Image rows are the rows' levels in order (row 0 level 0, row 0 level 1, ..., row 1 ...).
    An event narrower than a pixel still marks the pixel it starts in, so short regions show.
    """
    level_base = np.concatenate([[0], np.cumsum(layout.row_levels)])
    image = np.full((int(level_base[-1]), width), -1, dtype=np.int32)
    if t1 <= t0:
        return image
    dt = (t1 - t0) / width
    centers = t0 + (np.arange(width) + 0.5) * dt
    hidden_mask = np.isin(layout.region, np.asarray(list(hidden), dtype=np.int64))
    for lane in range(len(layout.lane_row)):
        sl = layout.lane_slice(lane)
        start, end, region = layout.start_ns[sl], layout.end_ns[sl], layout.region[sl]
        keep = ~hidden_mask[sl]
        start, end, region = start[keep], end[keep], region[keep].astype(np.int32)
        if not len(start):
            continue
        y = level_base[layout.lane_row[lane]] + layout.lane_level[lane]
        idx = np.searchsorted(start, centers, side="right") - 1
        covered = (idx >= 0) & (end[np.maximum(idx, 0)] > centers)
        image[y, covered] = region[idx[covered]]
        px = np.floor((start - t0) / dt).astype(np.int64)
        inside = (px >= 0) & (px < width) & (end > t0)
        image[y, px[inside]] = region[inside]
    return image


def timeline_figure(
    layout: TimelineLayout,
    region_names: Sequence[str],
    title: str = "",
    hidden: Sequence[int] = (),
    view: tuple[float, float] | None = None,
    width: int = 1200,
) -> Any:
    """A matplotlib Figure of the timeline: one band per row, regions coloured as in the widget."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    t0, t1 = view if view is not None else (0.0, max(layout.duration_ns, 1.0))
    image = rasterize(layout, t0, t1, width, hidden)
    colors = ["#ffffff"] + [categorical(i) for i in range(len(region_names))]
    levels = max(int(image.shape[0]), 1)
    fig = Figure(figsize=(12, min(2 + 0.12 * levels, 14)))
    ax = fig.add_subplot()
    ax.imshow(
        image + 1,
        aspect="auto",
        interpolation="nearest",
        cmap=ListedColormap(colors),
        vmin=0,
        vmax=len(colors) - 1,
        extent=(t0 / 1e3, t1 / 1e3, levels, 0),
    )
    centers = np.cumsum(layout.row_levels) - layout.row_levels / 2
    step = max(1, layout.num_rows // 40)  # at most ~40 labels stay legible
    ax.set_yticks(centers[::step], [layout.row_labels[i] for i in range(0, layout.num_rows, step)], fontsize=7)
    ax.set_xlabel("time since kernel start (us)")
    ax.set_title(title or "timeline", fontsize=10)
    handles = [Patch(color=categorical(i), label=n) for i, n in enumerate(region_names) if i not in set(hidden)]
    if handles:
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=7, ncols=min(len(handles), 8))
    return fig


def summary_table_rows(summary: Any) -> list[list[str]]:
    """Formatted cells of a `RegionSummary` (its `.rows` dicts), for HTML tables."""
    return [
        [
            str(row["region"]),
            f"{row['count']:,}",
            format_ns(row["total_ns"]),
            format_ns(row["mean_ns"]),
            format_ns(row["p50_ns"]),
            format_ns(row["p95_ns"]),
            f"{100 * row['share']:.1f}%",
        ]
        for row in summary.rows
    ]


def timeline_html(layout: TimelineLayout, region_names: Sequence[str], summary: Any, title: str) -> str:
    """Image plus summary table, self-contained."""
    figure = timeline_figure(layout, region_names, title)
    caption = summary.title() if hasattr(summary, "title") else title
    return (
        section(f"Timeline: {title}", figure_img(figure, alt=f"timeline of {title}"))
        + section("Regions", table(SUMMARY_HEADERS, summary_table_rows(summary), caption=caption))
    )
