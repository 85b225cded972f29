"""Static timeline: a rasterized image (Pillow for the notebook output, matplotlib for `save`)
and an HTML page with the region summary.

The image is computed per pixel column (which region covers each pixel of each lane) rather
than drawing one rectangle per event, so a million-event trace renders in well under a second.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import io
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import numpy as np

from mgpu_lab.widgets.palette import categorical
from mgpu_lab.profiler.summary import format_share
from mgpu_lab.widgets.static_html import esc, format_ns, scroll_box, section, table
from mgpu_lab.widgets.timeline_layout import TimelineLayout

SUMMARY_HEADERS = ("region", "count", "total", "mean", "p50", "p95", "share")


def rasterize(
    layout: TimelineLayout,
    t0: float,
    t1: float,
    width: int,
    hidden: Sequence[int] = (),
    rows: Sequence[int] | None = None,
) -> np.ndarray:
    """Region index drawn at each (level row, pixel) of [t0, t1), -1 where nothing is.

    Image rows are the levels of `rows` (default: every row) in order (row 0 level 0, row 0
    level 1, ..., row 1 ...). An event narrower than a pixel still marks the pixel it starts
    in, so short regions show.
    """
    rows = np.arange(layout.num_rows) if rows is None else np.asarray(rows, dtype=np.int64)
    level_base = np.full(layout.num_rows + 1, -1, dtype=np.int64)
    level_base[rows] = np.concatenate([[0], np.cumsum(layout.row_levels[rows])])[:-1]
    height = int(layout.row_levels[rows].sum()) if len(rows) else 0
    image = np.full((height, width), -1, dtype=np.int32)
    if t1 <= t0:
        return image
    dt = (t1 - t0) / width
    centers = t0 + (np.arange(width) + 0.5) * dt
    hidden_mask = np.isin(layout.region, np.asarray(list(hidden), dtype=np.int64))
    for lane in np.flatnonzero(level_base[layout.lane_row] >= 0).tolist():
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


def rows_with_events(layout: TimelineLayout) -> np.ndarray:
    """Indexes of the rows that hold at least one event, in order."""
    return np.unique(layout.lane_row).astype(np.int64)


def timeline_png(
    layout: TimelineLayout,
    region_names: Sequence[str],
    view: tuple[float, float],
    rows: Sequence[int],
    width: int = 900,
    max_height: int = 520,
) -> bytes:
    """A PNG of `rows` over `view` (ns) with row labels, a time axis and the region legend,
    drawn with Pillow.

    Built from `rasterize` without matplotlib: ~20 ms where a figure took over a second. The
    legend is drawn in the picture: a sanitizer keeps an image output whole, but strips the
    colours of an HTML legend.
    """
    from PIL import Image, ImageDraw

    t0, t1 = view
    rows = np.asarray(rows, dtype=np.int64)
    image = rasterize(layout, t0, t1, width, rows=rows)
    levels = max(image.shape[0], 1)
    level_h = int(np.clip(max_height // levels, 1, 12))
    gap = 1 if level_h >= 4 else 0
    label_w, axis_h = 120, 22
    heights = layout.row_levels[rows] * level_h + gap
    plot_h = int(heights.sum()) if len(rows) else level_h
    palette = np.array([[255, 255, 255]] + [_rgb(categorical(i)) for i in range(len(region_names))], dtype=np.uint8)
    legend = _legend_places(region_names, label_w + width)
    legend_h = (max((y for _, y in legend), default=-LEGEND_ROW_PX) + LEGEND_ROW_PX + 4) if legend else 0
    canvas = np.full((plot_h + axis_h + legend_h, label_w + width, 3), 255, dtype=np.uint8)
    y, level = 0, 0
    for k, row in enumerate(rows.tolist()):
        if (int(layout.row_sm[row]) if len(layout.row_sm) else 0) % 2 == 0:
            canvas[y : y + int(heights[k]), :] = (244, 244, 246)  # alternate SM bands
        for _ in range(int(layout.row_levels[row])):
            strip = image[level]
            colored = strip >= 0
            block = palette[strip[colored] + 1]
            canvas[y : y + level_h, label_w:][:, colored] = block[None, :, :]
            y += level_h
            level += 1
        y += gap
    picture = Image.fromarray(canvas)
    draw = ImageDraw.Draw(picture)
    draw.font = picture_font()
    step = max(1, int(np.ceil(11 / max(level_h * float(np.mean(layout.row_levels[rows])) if len(rows) else 1, 1))))
    tops = np.concatenate([[0], np.cumsum(heights)])
    for k in range(0, len(rows), step):
        draw.text((3, int(tops[k])), layout.row_labels[int(rows[k])][:20], fill=(40, 40, 40))
    draw.line([(label_w, plot_h), (label_w + width, plot_h)], fill=(120, 120, 120))
    span = max(t1 - t0, 1e-9)
    tick = _tick_step(span, 7)
    t = np.ceil(t0 / tick) * tick
    while t <= t1:
        x = label_w + int((t - t0) / span * width)
        draw.line([(x, plot_h), (x, plot_h + 4)], fill=(120, 120, 120))
        draw.text((x + 2, plot_h + 6), format_ns(t), fill=(40, 40, 40))
        t += tick
    for i, (x, y) in enumerate(legend):
        top = plot_h + axis_h + y
        draw.rectangle([(x, top + 2), (x + 9, top + 11)], fill=tuple(_rgb(categorical(i))))
        draw.text((x + 13, top + 1), region_names[i], fill=(40, 40, 40))
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=False, compress_level=6)
    return out.getvalue()


@functools.cache
def picture_font() -> Any:
    """DejaVu Sans from matplotlib's own fonts (it has the µ of "µs"; Pillow's built-in font
    draws a box for it), found without importing matplotlib; else Pillow's default font."""
    from PIL import ImageFont

    spec = importlib.util.find_spec("matplotlib")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        if path.exists():
            return ImageFont.truetype(str(path), 10)
    return ImageFont.load_default()


LEGEND_ROW_PX = 14


def _legend_places(region_names: Sequence[str], width: int) -> list[tuple[int, int]]:
    """(x, y) of each region's legend entry, in rows that wrap at `width` pixels."""
    places, x, y = [], 4, 0
    for name in region_names:
        entry = 13 + int(picture_font().getlength(name)) + 14
        if x > 4 and x + entry > width:
            x, y = 4, y + LEGEND_ROW_PX
        places.append((x, y))
        x += entry
    return places


def _rgb(color: str) -> list[int]:
    return [int(color[i : i + 2], 16) for i in (1, 3, 5)]


def _tick_step(span: float, target: int) -> float:
    raw = span / max(target, 1)
    power = 10 ** np.floor(np.log10(raw))
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return float(m * power)
    return float(10 * power)


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
    ax.set_xlabel("time since kernel start (µs)")
    ax.set_title(title or "timeline", fontsize=10)
    handles = [Patch(color=categorical(i), label=n) for i, n in enumerate(region_names) if i not in set(hidden)]
    if handles:
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=7, ncols=min(len(handles), 8))
    return fig


def summary_table_rows(summary: Any) -> list[list[str]]:
    """Formatted cells of a `RegionSummary` (its `.rows` dicts), for HTML tables.

    The share is the summary's own (`profiler.summary`), so every view shows the same figure.
    """
    return [
        [
            str(row["region"]),
            f"{row['count']:,}",
            format_ns(row["total_ns"]),
            format_ns(row["mean_ns"]),
            format_ns(row["p50_ns"]),
            format_ns(row["p95_ns"]),
            format_share(row["share"]),
        ]
        for row in summary.rows
    ]


def timeline_picture(layout: TimelineLayout, region_names: Sequence[str], view: tuple[float, float] | None = None) -> bytes:
    """The PNG of the rows with events over `view` (default: the whole trace)."""
    view = view if view is not None else (0.0, max(layout.duration_ns, 1.0))
    return timeline_png(layout, region_names, view, rows_with_events(layout))


def timeline_html(
    layout: TimelineLayout,
    region_names: Sequence[str],
    summary: Any,
    title: str,
    view: tuple[float, float] | None = None,
    picture: bytes | None = None,
) -> str:
    """The heading, `picture` (a PNG, or none: a notebook shows it as an output of its own) and
    the region table, self-contained."""
    rows = rows_with_events(layout)
    view = view if view is not None else (0.0, max(layout.duration_ns, 1.0))
    hidden = layout.num_rows - len(rows)
    note = f" ({hidden:,} rows without events not drawn)" if hidden else ""
    caption = summary.title() if hasattr(summary, "title") else title
    image = ""
    if picture is not None:
        data = base64.b64encode(picture).decode("ascii")
        image = f'<img alt="timeline of {esc(title)}" style="max-width:100%" src="data:image/png;base64,{data}"/>'
    return scroll_box(
        section(f"Timeline: {title}: {len(rows):,} rows{note}, {format_ns(view[0])} to {format_ns(view[1])}", image)
        + section(f"Regions ({summary.share_note()})",
                  table(SUMMARY_HEADERS, summary_table_rows(summary), caption=caption))
    )
