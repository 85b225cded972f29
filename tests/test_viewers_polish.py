"""Viewer polish (issue 29 item 8): buffers under the kernel's names (and a note where the
kernel left them unnamed), one spelling of microseconds, and an honest Perfetto UI button."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "widgets"))
from widget_fixtures import fixture_kernel

import mgpu_lab
from mgpu_lab.builder.smem import plan_smem
from mgpu_lab.widgets.static_html import format_ns

WIDGETS = Path(mgpu_lab.__file__).parent / "widgets"


def _kernel_with_smem(tree):
    kernel = fixture_kernel()
    plan = plan_smem(tree)
    return replace(kernel, spec=replace(kernel.spec, smem_layout=plan.records, dynamic_smem_bytes=plan.total_bytes))


def test_smem_buffers_carry_the_kernels_names() -> None:
    from mgpu_lab.widgets import SmemView

    sd = mgpu_lab.ShapeDtype
    named = SmemView(_kernel_with_smem((sd((64, 64), "bfloat16", name="a_tile"), {"acc": sd((64, 32), "float32")})))
    assert [b["path"] for b in named.buffers] == ["a_tile", "1.acc"]
    assert all(b["named"] for b in named.buffers) and named.unnamed_note == ""
    assert "a_tile" in named.to_html() and "unnamed" not in named.to_html()

    unnamed = SmemView(_kernel_with_smem((sd((64, 64), "bfloat16"), sd((64, 32), "float32"))))
    assert [b["named"] for b in unnamed.buffers] == [False, False]
    assert "position in the smem tree" in unnamed.unnamed_note
    assert "ShapeDtype(..., name=...)" in unnamed.to_html()


def test_one_spelling_of_microseconds() -> None:
    assert format_ns(5_000) == "5 µs" and format_ns(25_000) == "25.0 µs"
    for path in [*WIDGETS.glob("*.py"), *WIDGETS.glob("*.js")]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\d\s?us\b|\(us\)|\bus`|\" us\b", text), path.name


def test_perfetto_ui_button_says_it_needs_internet() -> None:
    js = (WIDGETS / "timeline.js").read_text(encoding="utf-8")
    assert '"Open in Perfetto UI (needs internet)"' in js
    assert "openBtn.disabled = !navigator.onLine" in js
    assert "offlineNote.textContent" in js  # a visible note, not only a tooltip
