"""The tuning journal: one JSON line per finished candidate, so an interrupted tune resumes.

Each record is appended with a single `os.write` on an O_APPEND descriptor and fsync'd before
the next candidate is reported, so a kill at any moment leaves whole lines plus at most one
torn last line; reading skips a torn or unreadable line (that candidate is simply done again).
A journal is read only when this user alone can have written it, and each record only when its
fields have the expected types (`checked_files`); anything else is done again, with a warning.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cache_key import config_key
from .checked_files import make_private_folder, read_checked, record_problem

if TYPE_CHECKING:
    from .worker_pool import Outcome


def make_record(config: dict[str, Any], status: str, reason: str = "", compile_s: float | None = None,
                outcome: Outcome | None = None, payload: Any = None) -> dict[str, Any]:
    """One candidate's journal record: its key and configuration, how it ended, its build seconds
    and, where it was timed, the measurement and the worker that took it."""
    m = outcome.measurement if outcome is not None else None
    return {"key": config_key(config), "config": config, "status": status, "reason": reason,
            "compile_s": compile_s, "median_ms": m.median_ms if m else None, "spread": m.spread if m else None,
            "rel_error": m.rel_error if m else None, "worker": outcome.worker if outcome else "", "payload": payload}


class Journal:
    """Records of finished candidates, keyed by `config_key`."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def load(self) -> dict[str, dict[str, Any]]:
        """Every whole, well-formed record written so far (later lines win)."""
        records: dict[str, dict[str, Any]] = {}
        data = read_checked(self.path, "tuning journal")
        if data is None:
            return records
        bad = []
        for line in data.decode(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                continue  # a line torn by a kill
            problem = record_problem(record)
            if problem is None:
                records[record["key"]] = record
            else:
                bad.append(problem)
        if bad:
            warnings.warn(f"mgpu_lab: ignoring {len(bad)} malformed record(s) of the tuning journal {self.path} "
                          f"(the first: {bad[0]}); those candidates are tuned again", stacklevel=3)
        return records

    def append(self, record: dict[str, Any]) -> None:
        """Write one record durably (one write call: the line lands whole or not at all)."""
        line = (json.dumps(record, default=repr) + "\n").encode()
        make_private_folder(self.path.parent)
        # O_NOFOLLOW: never append through a link planted where the journal goes
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            if os.fstat(fd).st_size and not self._ends_with_newline():
                line = b"\n" + line  # after a torn line, start on a line of our own
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
