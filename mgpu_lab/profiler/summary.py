"""Per-region statistics of a `Trace`: the table a kernel author reads first.

Share is the fraction of the recording units' lifetime spent in the region:

    share(region) = time inside the region summed over units
                    / summed lifetimes of the (block, unit) pairs that recorded an event

A unit's lifetime is its block's, start stamp to end stamp, so the share means the same
with one wave of blocks or twenty (a region covering every unit's whole life has share 1).
Units without events are left out of the denominator: a trace that keeps 8 of 2,048 blocks
(`Trace.filter`, or a sampled recording) would otherwise read 0.2% for a region that fills
a third of each recorded unit's life. It is not a partition: nested regions count in their
parent too, so shares can add up to more than 1.

Every presentation of shares (this table, the CLI, the timeline widget and its static view)
takes them from `summarize`, and states the denominator with `SHARE_DENOMINATOR`.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from mgpu_lab.profiler.trace import Trace

# What a share is a fraction of, said next to every table that shows one.
SHARE_DENOMINATOR = (
    "share of recorded unit time: time in the region summed over units / "
    "summed lifetimes of the units that recorded"
)

# (row key, column title, kind): kind says how to format the value.
_COLUMNS = (
    ("region", "region", "text"),
    ("count", "count", "int"),
    ("total_ns", "total µs", "time"),
    ("mean_ns", "mean µs", "time"),
    ("p50_ns", "p50 µs", "time"),
    ("p95_ns", "p95 µs", "time"),
    ("min_ns", "min µs", "time"),
    ("max_ns", "max µs", "time"),
    ("share", "share", "percent"),
)


class RegionSummary:
    """Statistics per region; `.rows` holds one dict per region, largest total first.

    Row keys: region (name), region_id, count, total_ns, mean_ns, p50_ns, p95_ns, min_ns,
    max_ns, share (see the module docstring), unbalanced (instances whose end was inferred).
    """

    def __init__(
        self,
        rows: list[dict[str, Any]],
        kernel_name: str,
        duration_ns: float,
        num_units: int,
        unit_kind: str,
        dropped: int,
        unit_time_ns: float = float("nan"),
        buffer: str = "smem",
    ) -> None:
        self.rows = rows
        self.unit_time_ns = unit_time_ns  # the shares' denominator (see the module docstring)
        self.kernel_name = kernel_name
        self.duration_ns = duration_ns
        self.num_units = num_units
        self.unit_kind = unit_kind
        self.dropped = dropped
        self.buffer = buffer  # where the device kept the events (Trace.buffer)

    def title(self) -> str:
        """One line describing what the table covers."""
        name = self.kernel_name or "kernel"
        text = (
            f"{name}: {self.duration_ns / 1e3:.3f} µs, {self.num_units} {self.unit_kind}s, "
            f"{sum(row['count'] for row in self.rows)} region instances"
        )
        if self.buffer == "global":  # the default (smem) goes unsaid: titles stay as they were
            text += ", events recorded to global memory"
        if self.dropped:
            text += f", {self.dropped} events dropped (buffer full)"
        return text

    def _cells(self) -> list[list[str]]:
        return [[_format(row[key], kind) for key, _, kind in _COLUMNS] for row in self.rows]

    def __str__(self) -> str:
        header = [title for _, title, _ in _COLUMNS]
        body = self._cells()
        widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

        def line(cells: list[str]) -> str:
            # Names read best left-aligned, numbers right-aligned so their digits line up.
            parts = [cells[0].ljust(widths[0])]
            parts += [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
            return "  ".join(parts).rstrip()

        rule = "  ".join("-" * width for width in widths)
        return "\n".join([self.title(), line(header), rule, *(line(cells) for cells in body), self.share_note()])

    def share_note(self) -> str:
        """What the share column divides by, with the number."""
        return f"{SHARE_DENOMINATOR} ({self.unit_time_ns / 1e3:.3f} µs)"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(title)}</th>" for _, title, _ in _COLUMNS)
        body = "".join(
            "<tr>"
            + "".join(
                f'<td style="text-align:{"left" if i == 0 else "right"}">{html.escape(cell)}</td>'
                for i, cell in enumerate(cells)
            )
            + "</tr>"
            for cells in self._cells()
        )
        return (
            f"<table><caption>{html.escape(self.title())}</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<div>{html.escape(self.share_note())}</div>"
        )

    def to_dataframe(self) -> Any:
        """The rows as a pandas DataFrame indexed by region name."""
        try:
            import pandas as pd
        except ImportError as err:
            raise ImportError(
                "RegionSummary.to_dataframe needs pandas, which is not installed: "
                "pip install pandas"
            ) from err
        columns = [key for key, _, _ in _COLUMNS] + ["region_id", "unbalanced"]
        return pd.DataFrame(self.rows, columns=columns).set_index("region")


def summarize(trace: Trace) -> RegionSummary:
    """Count, total, mean, p50, p95, min, max and share of kernel time for every region."""
    durations = trace.duration_column_ns
    unit_time = recorded_unit_time_ns(trace)
    rows: list[dict[str, Any]] = []
    if trace.num_events:
        # Group by region with one sort instead of one boolean mask per region.
        order = np.argsort(trace.region, kind="stable")
        ids, first = np.unique(trace.region[order], return_index=True)
        groups = np.split(durations[order], first[1:])
        unbalanced = np.split(trace.flags[order] != 0, first[1:])
        for region, values, flagged in zip(ids.tolist(), groups, unbalanced, strict=True):
            total = float(values.sum())
            p50, p95 = np.percentile(values, [50, 95])
            rows.append(
                {
                    "region": trace.region_name(region),
                    "region_id": region,
                    "count": int(values.size),
                    "total_ns": total,
                    "mean_ns": total / values.size,
                    "p50_ns": float(p50),
                    "p95_ns": float(p95),
                    "min_ns": float(values.min()),
                    "max_ns": float(values.max()),
                    "share": share(total, unit_time),
                    "unbalanced": int(np.count_nonzero(flagged)),
                }
            )
    rows.sort(key=lambda row: (-row["total_ns"], row["region_id"]))
    return RegionSummary(
        rows=rows,
        kernel_name=trace.kernel_name,
        duration_ns=trace.duration_ns,
        num_units=trace.num_units,
        unit_kind=trace.unit_kind,
        dropped=trace.dropped,
        unit_time_ns=unit_time,
        buffer=trace.buffer,
    )


def recorded_unit_time_ns(trace: Trace) -> float:
    """Sum of block lifetimes over the distinct (block, unit) pairs that recorded an event."""
    block = np.asarray(trace.block, dtype=np.int64)
    if not len(block):
        return 0.0
    unit = np.asarray(trace.unit, dtype=np.int64)
    stride = int(unit.max()) + 1
    pairs = np.unique(block * stride + unit)
    ids = np.asarray(trace.block_ids, dtype=np.int64)
    if not len(ids):
        return 0.0
    life = np.asarray(trace.block_end_ns, dtype=np.float64) - np.asarray(trace.block_start_ns, dtype=np.float64)
    order = np.argsort(ids, kind="stable")
    # Look each pair's block up in the per-block arrays (sorted once, binary search).
    pos = np.clip(np.searchsorted(ids[order], pairs // stride), 0, len(ids) - 1)
    known = ids[order][pos] == pairs // stride
    return float(np.sum(life[order][pos][known]))


def share(total_ns: float, unit_time_ns: float) -> float:
    """A region's share: its time over the recorded unit time (NaN when there is none)."""
    return total_ns / unit_time_ns if unit_time_ns > 0 else float("nan")


def _format(value: Any, kind: str) -> str:
    if kind == "time":
        return f"{value / 1e3:.3f}"  # ns -> µs
    if kind == "percent":
        return format_share(value)
    return str(value)


def format_share(value: float) -> str:
    """A share as a percentage, "n/a" when it has no denominator (NaN); every view uses it."""
    return "n/a" if np.isnan(value) else f"{100 * value:.1f}%"
