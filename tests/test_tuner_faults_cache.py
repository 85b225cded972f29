"""Cached answers and journal records are checked before use: a folder or file another user
could have written, a config outside the space, fields of the wrong types, JSON nested past the
parser, or an answer that no longer passes the reference are each a miss with a warning (the bad
file removed), never an exception and never a planted answer returned."""

from __future__ import annotations

import concurrent.futures
import json
import os
from pathlib import Path

import pytest

import mgpu_lab
from mgpu_lab.errors import CacheSecurityWarning
from mgpu_lab.tuning.journal import Journal, config_key
from mgpu_lab.tuning.timers import HostTimer

from test_tune_parallel import cache, make_candidate, make_inputs  # noqa: F401 - shared candidates

SPACE = {"delay_ms": [1, 20], "behaviour": ["ok", "wrong"]}
OTHER_UID = 12345  # a user that is not us


def tune(**kw):
    return mgpu_lab.tune(make_candidate, SPACE, args=make_inputs, reference=lambda a, b: a + b, gpus=[0],
                         timer=HostTimer(iters=3), progress=False, retime_top=1,
                         executor=concurrent.futures.ThreadPoolExecutor(2), **kw)


def plant(path: Path, best_config: object) -> None:
    """An answer as another tune (or another user) would have written it."""
    path.write_text(json.dumps({"best_config": best_config, "median_ms": 0.001, "key": {}, "table": []}))


@pytest.fixture
def answer(cache) -> Path:
    """The cache file of a finished tune of SPACE (its best: delay 1, ok)."""
    result = tune()
    assert result.best_config == {"delay_ms": 1, "behaviour": "ok"} and not result.from_cache
    return Path(result.cache_path)


def test_a_cached_answer_is_checked_once_then_used(answer):
    first = tune()
    assert first.from_cache and first.notes == {"cache_checked": True}
    assert first.best.median_ms > 0 and first.best.rel_error == 0.0  # built, checked and timed again
    again = tune()
    assert again.from_cache and again.best_config == first.best_config and "cache_checked" not in again.notes


def test_a_cached_answer_that_no_longer_passes_is_removed_and_tuned_again(answer):
    plant(answer, {"delay_ms": 1, "behaviour": "wrong"})  # inside the space, but computes a - b
    with pytest.warns(UserWarning, match=r"it no longer passes \(wrong-result: relative error"):
        result = tune()
    assert not result.from_cache and result.best_config == {"delay_ms": 1, "behaviour": "ok"}


def test_a_planted_answer_in_a_folder_others_can_write_is_not_used(answer):
    plant(answer, {"delay_ms": 20, "behaviour": "ok"})
    os.chmod(answer.parent, 0o777)
    with pytest.warns(CacheSecurityWarning, match=r"not using the tuning cache folder: .* is writable by group "
                                                  r"or others \(mode 777\)"):
        result = tune()
    assert not result.from_cache and result.best_config == {"delay_ms": 1, "behaviour": "ok"}
    assert not list(answer.parent.glob("*.journal.jsonl"))  # nothing written there either


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_an_answer_owned_by_another_user_is_removed_not_used(answer):
    plant(answer, {"delay_ms": 20, "behaviour": "ok"})
    os.chown(answer, OTHER_UID, -1)
    with pytest.warns(CacheSecurityWarning, match=f"is owned by uid {OTHER_UID}, not by the current user"):
        result = tune(use_cache=True, journal=False)
    assert not result.from_cache and result.best_config == {"delay_ms": 1, "behaviour": "ok"}
    assert answer.stat().st_uid == os.getuid()  # the planted file went; this tune wrote its own


@pytest.mark.parametrize("content, why", [
    ('{"best_config": {"delay_ms": 99, "behaviour": "ok"}}', "is not in the search space"),
    ('{"best_config": {"delay_ms": 1, "behaviour": "ok"}, "median_ms": "fast"}', "median_ms is a str"),
    ('{"best_config": {"delay_ms": 1, "behaviour": "ok"}, "table": {}}', "table is a dict, not a list"),
    ("[" * 100_000 + "]" * 100_000, "RecursionError"),
    ('{"best_config": ' + "[" * 50 + "]" * 50 + "}", "best_config is a list"),
])
def test_a_malformed_answer_is_a_miss_never_an_exception(answer, content, why):
    answer.write_text(content)
    with pytest.warns(UserWarning, match=why):
        result = tune()
    assert not result.from_cache and result.best_config == {"delay_ms": 1, "behaviour": "ok"}


def _record(config: dict, **fields) -> dict:
    return {"key": config_key(config), "config": config, "status": "timed", "reason": "", "compile_s": 0.1,
            "median_ms": 1.0, "spread": 0.0, "rel_error": 0.0, "worker": "gpu0 cpu:1", **fields}


def test_malformed_journal_records_are_tuned_again_with_a_warning(tmp_path):
    book = Journal(tmp_path / "tune" / "j.jsonl")
    good = _record({"delay_ms": 1})
    book.append(good)
    book.append({k: v for k, v in _record({"delay_ms": 2}).items() if k != "status"})  # no status
    book.append(_record({"delay_ms": 3}, median_ms="1.0"))
    book.append(_record({"delay_ms": 4}, key="not its key"))
    book.append(_record({"delay_ms": 5}, status="timed", median_ms=None))
    with open(book.path, "a") as f:
        f.write("[" * 100_000 + "]" * 100_000 + "\n")  # nested past the parser: skipped like a torn line
    with pytest.warns(UserWarning, match=r"ignoring 4 malformed record\(s\) of the tuning journal .* \(the first: "
                                         r"status None is not one of"):
        assert book.load() == {good["key"]: good}


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_a_journal_another_user_wrote_is_removed_not_read(tmp_path):
    book = Journal(tmp_path / "tune" / "j.jsonl")
    book.append(_record({"delay_ms": 1}))
    os.chown(book.path, OTHER_UID, -1)
    with pytest.warns(CacheSecurityWarning, match=f"tuning journal .* is owned by uid {OTHER_UID}"):
        assert book.load() == {}
    assert not book.path.exists()
