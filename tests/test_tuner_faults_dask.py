"""The Dask path loses only what it must: a compile worker that dies costs its candidate a
retry, a GPU worker that dies mid-tune loses no copy of the scattered inputs, and a lost
scheduler ends the tune with a one-line TuneBackendLost, the finished candidates journalled."""

from __future__ import annotations

import os
import threading
import time

import pytest

import mgpu_lab
from mgpu_lab.tuning import TuneBackendLost
from mgpu_lab.tuning.journal import Journal
from mgpu_lab.tuning.timers import HostTimer

distributed = pytest.importorskip("distributed", reason="the Dask path needs distributed (mgpu_lab[distributed])")

from test_tune_parallel import cache, make_candidate, make_inputs  # noqa: E402,F401 - shared candidates


def slow_build(delay_ms: float):
    """make_kernel whose build takes 0.3 s, so compiles are still running when workers are killed."""
    time.sleep(0.3)
    return make_candidate(delay_ms)


def exit_soon() -> None:
    """Run on a worker by client.run: the worker process dies 0.1 s after answering."""
    threading.Timer(0.1, os._exit, args=(1,)).start()


def _tune(client, make, space, **kw):
    return mgpu_lab.tune(make, space, args=make_inputs, reference=lambda a, b: a + b, cluster=client,
                         timer=HostTimer(iters=3), progress=False, retime_top=1, **kw)


def test_dead_workers_cost_their_candidates_a_retry_and_the_inputs_survive(cache):
    from distributed import Client, Nanny, Scheduler, SpecCluster

    from mgpu_lab.tuning.dask_backend import DaskStages
    from mgpu_lab.tuning.pipeline import build_callable
    from mgpu_lab.tuning.timing_worker import Setup

    workers = {"cpu0": {"cls": Nanny, "options": {"nthreads": 1}}}
    workers |= {f"gpu{i}": {"cls": Nanny, "options": {"nthreads": 1, "resources": {"GPU": 1}}} for i in range(2)}
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
    with SpecCluster(workers=workers, scheduler=scheduler) as cluster, Client(cluster) as client:
        client.wait_for_workers(3)
        info = client.scheduler_info(n_workers=-1)["workers"]
        cpu = [a for a, w in info.items() if not w["resources"]]
        gpu = sorted(a for a, w in info.items() if w["resources"])
        setup = Setup(HostTimer(), [make_inputs()], None, None)
        stages = DaskStages(client, make_candidate, build_callable, setup, 5.0)
        assert set(client.who_has([stages.setup])[stages.setup.key]) == set(info)  # a copy on every worker
        stages.close(False)
        killed = []

        def kill_workers(record):
            if not killed:  # after the first candidate: the compile worker mid-build, and one GPU worker
                killed.extend([*cpu, gpu[0]])  # ... with its copy of the scattered inputs
                client.run(exit_soon, workers=killed)

        result = _tune(client, slow_build, {"delay_ms": [1, 15, 30, 45, 60, 75]}, on_record=kill_workers)
        assert killed and [c.status for c in result.candidates] == ["timed"] * 6, result.table()
        assert result.best_config == {"delay_ms": 1}


def test_a_lost_scheduler_ends_the_tune_in_one_line_keeping_the_finished(cache):
    import dask
    from distributed import Client, LocalCluster

    # The client gives up reconnecting after 2 s (default 30 s), so the test ends quickly.
    quick = dask.config.set({"distributed.comm.timeouts.connect": "2s"})
    with quick, LocalCluster(n_workers=1, processes=False, threads_per_worker=2, resources={"GPU": 1},
                             dashboard_address=None) as cluster, Client(cluster) as client:
        seen = []

        def lose_the_scheduler(record):
            seen.append(record)
            if len(seen) == 2:
                client.sync(cluster.scheduler.close)

        with pytest.raises(TuneBackendLost) as lost:
            _tune(client, make_candidate, {"delay_ms": [1, 2, 3, 4, 5, 6, 7, 8]}, on_record=lose_the_scheduler)
    # The in-process worker's timing subprocess could not be told to stop through the lost scheduler.
    from mgpu_lab.tuning.dask_backend import _stop_timing_worker

    assert _stop_timing_worker()
    message = str(lost.value)
    assert "\n" not in message and message.startswith("cluster: lost the Dask scheduler at ")
    assert "2 of 8 candidates had finished; they are kept in the journal" in message
    (journal,) = cache.glob("*.journal.jsonl")
    assert len(Journal(journal).load()) == 2  # the cancelled ones were not recorded as failures


def test_a_hung_or_dying_build_on_a_dask_worker_costs_only_its_candidate(cache):
    """Builds on the cluster run in a killable process of the worker's own: a build that hangs
    (build_timeout_s) or kills its process fails alone, the worker lives on, the rest is timed."""
    from distributed import Client, Nanny, Scheduler, SpecCluster
    from test_tuner_faults import make_faulty

    workers = {"cpu0": {"cls": Nanny, "options": {"nthreads": 1}},
               "gpu0": {"cls": Nanny, "options": {"nthreads": 1, "resources": {"GPU": 1}}}}
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
    with SpecCluster(workers=workers, scheduler=scheduler) as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        before = set(client.scheduler_info(n_workers=-1)["workers"])
        t0 = time.perf_counter()
        result = _tune(client, make_faulty, {"delay_ms": [1], "behaviour": ["ok", "build-hangs", "build-exits"]},
                       build_timeout_s=2.0)
        assert time.perf_counter() - t0 < 60
        by = {c.config["behaviour"]: c for c in result.candidates}
        assert by["ok"].status == "timed", by["ok"].reason
        assert by["build-hangs"].status == "failed-build" and "build timed out after 2 s" in by["build-hangs"].reason
        assert by["build-exits"].status == "failed-build" and "exit code 9" in by["build-exits"].reason
        assert set(client.scheduler_info(n_workers=-1)["workers"]) == before, "no worker died"
