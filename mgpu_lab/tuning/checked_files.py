"""What the tuner reads back from disk (a cached answer, journal records) is checked before use.

The folder must be private to this user and the file a regular file of ours that others cannot
write (the kernel cache's own rules, `compiler.cache.privacy_problem`), so another user cannot
plant an answer; the content must have the expected fields with the expected types. Anything
else is a miss with a warning: never an exception, never a planted or corrupt value used.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

from ..compiler.cache import UntrustedEntry, privacy_problem
from ..compiler.cache import _read_private as read_private  # the kernel cache's owner/mode-checked read
from ..errors import CacheSecurityWarning
from .cache_key import config_key

NUMBER = (int, float)
# The statuses a finished candidate can have (journal records); anything else is a miss.
STATUSES = frozenset({"timed", "failed-build", "does-not-fit", "wrong-result", "failed-launch", "crashed",
                      "hung", "fault", "failed-worker"})
_OPTIONAL_NUMBERS = ("compile_s", "median_ms", "spread", "rel_error")


def folder_problem(folder: Path) -> str | None:
    """Why `folder` must not hold the tuner's files (owner, mode, a link), or None (also when
    it does not exist yet: it is created private)."""
    try:
        return privacy_problem(os.lstat(folder), f"the folder {folder}")
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"the folder {folder} cannot be examined ({e.strerror})"


def make_private_folder(folder: Path) -> None:
    """Create `folder` (and its parents) with the last part private to this user."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir(mode=0o700, exist_ok=True)


def discard(path: Path, why: str, category: type[Warning] = UserWarning) -> None:
    """Warn that `path` is not used and remove it (a later tune writes a good one)."""
    warnings.warn(f"mgpu_lab: ignoring {why}", category, stacklevel=4)
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # a folder we may not write: nothing else to do, the file is not used


def read_checked(path: Path, what: str) -> bytes | None:
    """The bytes of `path` when only this user can have written it; None when it is missing or
    not (then it is removed, with a warning naming `what`)."""
    if not os.path.lexists(path):
        return None
    try:
        return read_private(path)
    except UntrustedEntry as e:
        discard(path, f"the {what} {path}: {e}; another user may have written it", CacheSecurityWarning)
        return None


def load_checked_json(path: Path, what: str) -> Any:
    """The parsed JSON of `path` (see `read_checked`), or None; a file that is not JSON is
    removed with a warning."""
    data = read_checked(path, what)
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:  # RecursionError: nesting deeper than the parser allows
        discard(path, f"the corrupt {what} {path} ({type(e).__name__}: {e})")
        return None


def _number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, NUMBER) and not isinstance(value, bool))


def _key_of(config: dict[str, Any]) -> str | None:
    """`journal.config_key` of a config read from disk, or None when it cannot have one."""
    try:
        return config_key(config)
    except (ValueError, TypeError, RecursionError):
        return None


def answer_problem(data: Any) -> str | None:
    """Why `data` is not a cached answer ({"best_config": {...}, "median_ms": ..., ...}), or None."""
    if not isinstance(data, dict):
        return f"it holds a {type(data).__name__}, not an object"
    config = data.get("best_config")
    if not isinstance(config, dict) or _key_of(config) is None:
        return f"best_config is a {type(config).__name__}, not a configuration"
    for name in ("median_ms", "retimed_ms"):
        if not _number_or_none(data.get(name)):
            return f"{name} is a {type(data.get(name)).__name__}, not a number"
    for name, kind in (("key", dict), ("table", list)):
        if name in data and not isinstance(data[name], kind):
            return f"{name} is a {type(data[name]).__name__}, not a {kind.__name__}"
    return None


def record_problem(record: Any) -> str | None:
    """Why `record` is not a journal record of a finished candidate, or None."""
    if not isinstance(record, dict):
        return f"a {type(record).__name__}, not an object"
    status = record.get("status")
    if status not in STATUSES:
        return f"status {status!r} is not one of {sorted(STATUSES)}"
    config, key = record.get("config"), record.get("key")
    if not isinstance(config, dict) or not isinstance(key, str) or _key_of(config) != key:
        return "its config and key do not match"
    for name in ("reason", "worker"):
        if not isinstance(record.get(name), (str, type(None))):
            return f"{name} is a {type(record.get(name)).__name__}, not text"
    for name in _OPTIONAL_NUMBERS:
        if not _number_or_none(record.get(name)):
            return f"{name} is a {type(record.get(name)).__name__}, not a number"
    if status == "timed" and not (record.get("median_ms") is not None and math.isfinite(record["median_ms"])):
        return "a timed record without a finite median_ms"
    return None


def config_in_space(config: dict[str, Any], configs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The configuration of the current space equal to `config` (as the space spells it), or None."""
    key = _key_of(config)
    return next((c for c in configs if config_key(c) == key), None)
