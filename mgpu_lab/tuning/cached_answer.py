"""A cached best configuration is used only after it passed once more: built, checked against
the reference and timed through the same stages and timer as a tune, the first time this
process uses that cache file. An answer that no longer builds or passes is removed, with a
warning, and the caller tunes again."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .candidates import Candidate, TuneResult
from .checked_files import discard
from .progress import Counts, TuneProgress

# (path, mtime, size) of cache files checked in this process: later uses only rebuild the kernel.
_CHECKED: set[tuple[str, int, int]] = set()


def _stamp(path: Path) -> tuple[str, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return str(path), st.st_mtime_ns, st.st_size


def answer_from_cache(config: dict[str, Any], cache_file: Path, make_stages: Callable[[], Any],
                      build: Callable[..., tuple[str, Any]], make_kernel: Callable[..., Any]) -> TuneResult | None:
    """The TuneResult of the cached `config` (from_cache), or None when it does not pass."""
    stamp = _stamp(cache_file)
    if stamp is not None and stamp in _CHECKED:
        status, payload = build(make_kernel, config)  # checked before: the kernel cache rebuilds it fast
        if status == "built":
            best = Candidate(config, "cached", kernel=payload)
            return TuneResult([best], best, from_cache=True, cache_path=str(cache_file))
    stages = make_stages()
    interrupted = True
    try:
        (record,) = list(stages.run([config], TuneProgress(Counts(1), enabled=False)))
        kernel = None
        if record["status"] == "timed":
            kernel = stages.resolve(record.get("payload") or stages.payloads([config])[0][1])
        interrupted = False
    finally:
        stages.close(interrupted)
    if kernel is None:
        discard(cache_file, f"the cached best configuration {config} in {cache_file}: it no longer passes "
                            f"({record['status']}: {record['reason']}); tuning again")
        return None
    if stamp is not None:
        _CHECKED.add(stamp)
    best = Candidate(config, "cached", median_ms=record["median_ms"], rel_error=record["rel_error"], kernel=kernel)
    for name in ("compile_s", "spread", "worker"):
        setattr(best, name, record.get(name))
    return TuneResult([best], best, from_cache=True, cache_path=str(cache_file), notes={"cache_checked": True})
