"""The tuning journal: one JSON line per finished candidate, so an interrupted tune resumes.

Each record is appended with a single `os.write` on an O_APPEND descriptor and fsync'd before
the next candidate is reported, so a kill at any moment leaves whole lines plus at most one
torn last line; reading skips a torn or unreadable line (that candidate is simply done again).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def config_key(config: dict[str, Any]) -> str:
    """A stable text key of one configuration (JSON, sorted keys; repr for values JSON lacks)."""
    return json.dumps(config, sort_keys=True, default=repr)


class Journal:
    """Records of finished candidates, keyed by `config_key`."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def load(self) -> dict[str, dict[str, Any]]:
        """Every whole record written so far (later lines win)."""
        records: dict[str, dict[str, Any]] = {}
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return records
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line torn by a kill
            if isinstance(record, dict) and isinstance(record.get("key"), str):
                records[record["key"]] = record
        return records

    def append(self, record: dict[str, Any]) -> None:
        """Write one record durably (one write call: the line lands whole or not at all)."""
        line = (json.dumps(record, default=repr) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
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
