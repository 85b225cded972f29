"""A tuner that loses only the bad candidate: a build that kills its own process or hangs costs
that candidate one row and its build process a replacement; the others build and are timed. A
lost backend ends the tune in one line with the finished candidates journalled (all on the CPU:
plain Python candidates timed by HostTimer)."""

from __future__ import annotations

import os
import signal
import time

import pytest

import mgpu_lab
from mgpu_lab.tuning.timers import HostTimer

from test_tune_parallel import cache, make_candidate, make_inputs  # noqa: F401 - shared candidates


def make_faulty(delay_ms: float, behaviour: str = "ok"):
    """make_kernel whose build goes wrong in the ways a native compiler can."""
    if behaviour == "build-exits":
        os._exit(9)
    if behaviour == "build-segfaults":
        os.kill(os.getpid(), signal.SIGSEGV)
    if behaviour == "build-hangs":
        time.sleep(3600)
    return make_candidate(delay_ms)


def tune_faulty(space, **kw):
    return mgpu_lab.tune(make_faulty, space, args=make_inputs, reference=lambda a, b: a + b, gpus=[0],
                         timer=HostTimer(iters=3), progress=False, retime_top=1, **kw)


def test_a_build_that_kills_its_process_or_hangs_costs_only_that_candidate(cache):
    space = {"delay_ms": [2, 1], "behaviour": ["ok", "build-exits", "build-segfaults", "build-hangs"]}
    t0 = time.perf_counter()
    result = tune_faulty(space, build_timeout_s=1.5)
    assert time.perf_counter() - t0 < 20
    by = {(c.config["delay_ms"], c.config["behaviour"]): c for c in result.candidates}
    for d in space["delay_ms"]:
        assert by[d, "ok"].status == "timed", by[d, "ok"].reason
        exits, segv, hangs = by[d, "build-exits"], by[d, "build-segfaults"], by[d, "build-hangs"]
        assert exits.status == "failed-build" and "the build process died (exit code 9)" in exits.reason
        assert segv.status == "failed-build" and f"(exit code {-signal.SIGSEGV})" in segv.reason
        assert hangs.status == "failed-build" and "build timed out after 1.5 s" in hangs.reason
    assert result.best_config == {"delay_ms": 1, "behaviour": "ok"}


def test_a_lost_backend_ends_the_tune_in_one_line_and_the_journal_keeps_the_finished(cache, monkeypatch):
    """The stages raise TuneBackendLost after three candidates (as DaskStages does when its
    scheduler goes away): tune says so in one line, the journal holds those three, a rerun
    does only the rest."""
    import concurrent.futures

    from mgpu_lab.tuning import TuneBackendLost
    from mgpu_lab.tuning.journal import Journal
    from mgpu_lab.tuning.pipeline import LocalStages

    real_run = LocalStages.run

    def run_then_lose_the_scheduler(self, configs, progress):
        for n, record in enumerate(real_run(self, configs, progress)):
            yield record
            if n == 2:
                raise TuneBackendLost("cluster: lost the Dask scheduler at tcp://10.0.0.1:8786")

    space = {"delay_ms": [1, 2, 3, 4, 5, 6], "behaviour": ["ok"]}
    kw = dict(executor=concurrent.futures.ThreadPoolExecutor(1))
    monkeypatch.setattr(LocalStages, "run", run_then_lose_the_scheduler)
    with pytest.raises(TuneBackendLost) as lost:
        tune_faulty(space, **kw)
    message = str(lost.value)
    assert "\n" not in message and message.startswith("cluster: lost the Dask scheduler at tcp://10.0.0.1:8786; "
                                                      "3 of 6 candidates had finished; they are kept in the journal ")
    assert message.endswith("run the same tune again to resume with the rest")
    (journal,) = cache.glob("*.journal.jsonl")
    done = Journal(journal).load()
    assert len(done) == 3 and all(r["status"] == "timed" for r in done.values())
    monkeypatch.setattr(LocalStages, "run", real_run)
    again = []
    result = tune_faulty(space, on_record=lambda r: again.append(r["key"]), **kw)
    assert len(again) == 3 and not set(again) & set(done) and result.notes["resumed"] == 3
    assert all(c.status == "timed" for c in result.candidates)


def test_an_interrupt_kills_the_running_builds_and_leaves_no_build_process(cache):
    """Ctrl-C while a build hangs: the tune stops at once (not after build_timeout_s) and its
    build processes are gone."""
    import multiprocessing

    def stop(record):
        raise KeyboardInterrupt

    space = {"delay_ms": [1, 2], "behaviour": ["ok", "build-hangs"]}
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        tune_faulty(space, build_timeout_s=60, on_record=stop)
    assert time.perf_counter() - t0 < 15
    assert not [p for p in multiprocessing.active_children() if p.name == "mgpu_lab-build"]
