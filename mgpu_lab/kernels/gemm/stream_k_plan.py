"""Stream-K's static schedule (stream_k.py): which k-steps of which work items each persistent
unit runs. Pure Python, so the configuration model (model.py) and the L2 replay (l2_replay.py)
read the kernel's own plan without MLIR."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .pieces import GemmTiling

MAX_CONTRIBUTORS = 8  # partials one owner may sum: beyond, one whole round fewer (longer pieces)
MAX_TEAM = 8  # blocks of a stream-K team (GemmTiling.team_m): a column of up to 8 row tiles


@dataclass(frozen=True)
class StreamKPlan:
    """The static schedule: `units` persistent units over `items` work items of `k_steps` each."""

    units: int
    items: int
    k_steps: int

    @classmethod
    def of(cls, t: GemmTiling) -> StreamKPlan:
        return cls(t.grid // t.unit_blocks, t.work_items, t.k_steps)

    @functools.cached_property
    def dp_rounds(self) -> int:
        """Whole-tile rounds before the split ones (every unit takes one tile per round)."""
        whole = self.items // self.units
        if whole and _contributors(self.units, self.items - whole * self.units, self.k_steps) > MAX_CONTRIBUTORS:
            return whole - 1
        return whole

    @property
    def dp_items(self) -> int:
        return self.dp_rounds * self.units

    @property
    def sk_steps(self) -> int:
        """k-steps of the split tiles, shared out evenly over the units."""
        return (self.items - self.dp_items) * self.k_steps

    @property
    def every_unit_splits(self) -> bool:
        """Whether the split tiles give every unit at least one k-step, or there are none: what
        the kernel needs (stream_k.check_stream_k) and what the model offers stream-K grids by."""
        return not 0 < self.sk_steps < self.units

    def start(self, unit: Any) -> Any:
        """First split k-step of `unit` (an int, or an index value in a kernel)."""
        return unit * self.sk_steps // self.units

    def segments(self, unit: int) -> list[tuple[int, int, int]]:
        """(split item, first k-step in it, k-steps) of unit's segments in the order it runs them
        (host side, for checks and tests)."""
        s0, s1 = self.start(unit), self.start(unit + 1)
        out = []
        for item in reversed(range(s0 // self.k_steps, -(-s1 // self.k_steps))):
            lo, hi = max(s0, item * self.k_steps), min(s1, (item + 1) * self.k_steps)
            out.append((item, lo - item * self.k_steps, hi - lo))
        return out

    @property
    def max_contributors(self) -> int:
        """The most partials an owner sums: units whose split range ends strictly inside one item."""
        return _contributors(self.units, self.items - self.dp_items, self.k_steps)

    @property
    def max_steps(self) -> int:
        """The most k-steps one unit multiplies (whole tiles and its split range)."""
        return self.dp_rounds * self.k_steps + -(-self.sk_steps // self.units)


def _contributors(units: int, items: int, k_steps: int) -> int:
    """The most of `units` range ends (u * S // units, S = items * k_steps) strictly inside one item."""
    total = items * k_steps
    counts = [0] * max(items, 1)
    for u in range(1, units):
        end = u * total // units
        if end % k_steps:
            counts[end // k_steps] += 1
    return max(counts)


__all__ = ["MAX_CONTRIBUTORS", "MAX_TEAM", "StreamKPlan"]
