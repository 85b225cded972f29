"""Progress of a tune, counted in compiled, timed and failed candidates: a progress bar with a
label in a notebook (ipywidgets), one rewritten line on stderr in a terminal."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any


LOG_EVERY_S = 5.0  # when stderr is not a terminal


@dataclass
class Counts:
    total: int
    compiled: int = 0
    timed: int = 0
    failed: int = 0
    resumed: int = 0

    def line(self) -> str:
        resumed = f"  (resumed {self.resumed})" if self.resumed else ""
        return (f"tune: compiled {self.compiled}/{self.total}  timed {self.timed}  failed {self.failed}"
                f"  done {self.timed + self.failed}/{self.total}{resumed}")


def _notebook_view(total: int) -> Any:
    try:
        from IPython import get_ipython

        if type(get_ipython()).__name__ != "ZMQInteractiveShell":
            return None
        import ipywidgets
        from IPython.display import display
    except ImportError:
        return None
    bar = ipywidgets.IntProgress(min=0, max=max(total, 1), description="tune")
    label = ipywidgets.Label()
    display(ipywidgets.HBox([bar, label]))
    return bar, label


@dataclass
class TuneProgress:
    """Call `compiled()`, `finished(ok)` as candidates move on; thread-safe. `enabled=False` counts silently."""

    counts: Counts
    enabled: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _view: Any = field(default=None, repr=False)
    _last_line: float = field(default=-1e9, repr=False)

    def __post_init__(self) -> None:
        if self.enabled:
            self._view = _notebook_view(self.counts.total)

    def compiled(self, n: int = 1) -> None:
        with self._lock:
            self.counts.compiled += n
            self._show()

    def finished(self, ok: bool, resumed: bool = False) -> None:
        with self._lock:
            if ok:
                self.counts.timed += 1
            else:
                self.counts.failed += 1
            self.counts.resumed += resumed
            self._show()

    def _show(self) -> None:
        if not self.enabled:
            return
        c = self.counts
        if self._view is not None:
            bar, label = self._view
            bar.value = c.timed + c.failed
            label.value = c.line().removeprefix("tune: ")
            return
        finished = c.timed + c.failed == c.total
        if sys.stderr.isatty():
            print(f"\r{c.line()}", end="\n" if finished else "", file=sys.stderr, flush=True)
        elif finished or time.monotonic() - self._last_line >= LOG_EVERY_S:
            # a log file or a captured pipe: whole lines, now and then, not a flood of carriage returns
            self._last_line = time.monotonic()
            print(c.line(), file=sys.stderr, flush=True)
