"""`IrView`: the MLIR module after each compiler pass, and what each pass changed.

The pass list marks passes that left the module unchanged; selecting a pass shows the
module after it, or (in diff mode) the unified diff against the module before it. Diffs are
computed here with difflib when asked for, so a long pipeline costs nothing up front. The
view opens on the diff of the first pass that changes the builder's module; modules are
shown without locations and compared without SSA numbering (`ir_diff`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget
import traitlets

from mgpu_lab.user_errors import user_facing
from mgpu_lab.widgets.esm import view_module
from mgpu_lab.widgets.fallback import StaticFallback
from mgpu_lab.widgets.ir_diff import PassTexts, diff_text
from mgpu_lab.widgets.static_ir import ir_figure, ir_html
from mgpu_lab.widgets.view_inputs import compiled_for_view

HERE = Path(__file__).parent
MODES = ("module", "diff")
MAX_LINE = 2000  # characters of one line sent to the browser (a gpu.binary line is ~50 KB)


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE else f"{line[:MAX_LINE]} … ({len(line) - MAX_LINE:,} more characters)"


class IrView(StaticFallback, anywidget.AnyWidget):
    """IR viewer of a `CompiledKernel` (its `passes`): `IrView(kernel)`.

    Synced: `selected` (pass index), `mode` ("module" or "diff"); `content` holds the lines
    shown, as [kind, text] pairs (kind "text", or for diffs "hunk", "add", "del", "ctx").
    """

    _esm = view_module("ir_view")
    _css = HERE / "widgets.css"

    title = traitlets.Unicode("").tag(sync=True)
    passes = traitlets.List().tag(sync=True)  # [{name, lines, added, removed, changed}, ...]
    selected = traitlets.Int(0).tag(sync=True)
    mode = traitlets.Unicode("module").tag(sync=True)
    content = traitlets.List().tag(sync=True)
    height = traitlets.Int(460).tag(sync=True)

    @user_facing
    def __init__(self, kernel: Any, mode: str | None = None, **kwargs: Any) -> None:
        kernel = compiled_for_view(kernel, "IrView")
        self.pass_texts = PassTexts(kernel.passes)
        self.stats = self.pass_texts.stats()
        first = self.pass_texts.first_change()
        super().__init__(
            title=kernel.name,
            passes=[
                {"name": s.name, "lines": s.lines, "added": s.added, "removed": s.removed, "changed": s.changed}
                for s in self.stats
            ],
            selected=first,
            mode=mode or ("diff" if first else "module"),
            **kwargs,
        )
        self._update_content()

    @traitlets.validate("mode")
    def _check_mode(self, proposal: Any) -> str:
        if proposal["value"] not in MODES:
            raise traitlets.TraitError(f"mode must be one of {MODES}, not {proposal['value']!r}")
        return str(proposal["value"])

    @traitlets.observe("selected", "mode")
    def _on_choice(self, _change: Any) -> None:
        self._update_content()

    def _update_content(self) -> None:
        if not self.pass_texts:
            self.content = []
            return
        i = min(max(self.selected, 0), len(self.pass_texts) - 1)
        if self.mode == "diff":
            self.content = [[kind, _clip(text)] for kind, text in self.pass_texts.diff(i)]
        else:
            self.content = [["text", _clip(line)] for line in self.pass_texts.lines[i]]

    def diff(self, index: int) -> str:
        """The unified diff of pass `index` as text (`+`/`-`/` ` prefixed lines)."""
        return diff_text(self.pass_texts.diff(index))

    @property
    def static_title(self) -> str:  # type: ignore[override]
        return f"IR: {self.title}"

    def to_html(self) -> str:
        return ir_html(self.pass_texts, self.stats, self.title)

    def to_figure(self) -> Any:
        return ir_figure(self.stats, self.title)
