"""Colours shared by the widgets (JavaScript) and the static renderings (matplotlib, HTML).

Kept in Python and sent to the browser so a region or buffer has the same colour in every view.
"""

from __future__ import annotations

# A categorical palette legible on light and dark backgrounds (Tableau 10 + 2 extra hues).
CATEGORICAL = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#8cd17d",
    "#86bcb6",
)

# Shared-memory buffer kinds in the address map.
KIND_COLORS = {"buffer": "#4e79a7", "barrier": "#e15759", "profiler": "#b07aa1"}

# Bank-conflict levels: conflict-free, and increasingly many words queued in one bank.
CONFLICT_FREE = "#59a14f"
CONFLICT_LEVELS = ("#edc948", "#f28e2b", "#e15759", "#9d2a2c")


def categorical(index: int) -> str:
    """The colour of the `index`-th category (cycles after the palette's 12 colours)."""
    return CATEGORICAL[index % len(CATEGORICAL)]


def conflict_color(ways: int) -> str:
    """Colour for a word whose bank serves `ways` distinct words in one phase (1 = no conflict)."""
    if ways <= 1:
        return CONFLICT_FREE
    # 2-way, 3-4-way, 5-8-way, worse.
    level = 0 if ways == 2 else 1 if ways <= 4 else 2 if ways <= 8 else 3
    return CONFLICT_LEVELS[level]

# Logical 16-byte chunk of an element within its row (bank view): pale hues so the conflict
# colours on top stay readable. Eight chunks make a 128-byte row.
CHUNK_COLORS = ("#dbe9f6", "#fde4c8", "#dcefd8", "#f9d6d5", "#d9eeec", "#fbf1c7", "#ebdcea", "#eee6e0")
