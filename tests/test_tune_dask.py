"""The parallel tune on a Dask cluster of real worker processes (two compile-only workers, two
declaring a GPU resource), candidates timed by HostTimer: the scheduling (compiles off the GPU
workers, one timing per GPU worker), failure isolation, resume and the re-time run for real."""

from __future__ import annotations

import functools

import pytest

import mgpu_lab
from mgpu_lab.tuning.journal import Journal
from mgpu_lab.tuning.timers import HostTimer

distributed = pytest.importorskip("distributed")

from test_tune_parallel import builds, cache, make_candidate, make_inputs  # noqa: E402,F401 - shared candidates


@pytest.fixture(scope="module")
def client():
    from distributed import Client, Nanny, Scheduler, SpecCluster

    workers = {f"cpu{i}": {"cls": Nanny, "options": {"nthreads": 1}} for i in range(2)}
    workers |= {f"gpu{i}": {"cls": Nanny, "options": {"nthreads": 2, "resources": {"GPU": 1}}} for i in range(2)}
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
    with SpecCluster(workers=workers, scheduler=scheduler) as cluster, Client(cluster) as c:
        c.wait_for_workers(4)
        yield c


def _addresses(client, resource: bool) -> set[str]:
    info = client.scheduler_info(n_workers=-1)["workers"]
    return {a for a, w in info.items() if bool((w.get("resources") or {}).get("GPU")) == resource}


def test_compiles_on_cpu_workers_timings_on_gpu_workers_failures_isolated(client, cache, tmp_path):
    space = {"delay_ms": [1, 15, 40], "behaviour": ["ok", "crash", "hang", "wrong", "nobuild"]}
    result = mgpu_lab.tune(make_candidate, space, args=make_inputs, reference=lambda a, b: a + b, cluster=client,
                           timer=HostTimer(iters=5), timeout_s=2.0, progress=False)
    by = {(c.config["delay_ms"], c.config["behaviour"]): c for c in result.candidates}
    for d in space["delay_ms"]:
        assert by[d, "ok"].status == "timed"
        assert by[d, "crash"].status == "crashed" and "exit code 7" in by[d, "crash"].reason
        assert by[d, "hang"].status == "hung"
        assert by[d, "wrong"].status == "wrong-result"
        assert by[d, "nobuild"].status == "failed-build" and "tile_n: expected" in by[d, "nobuild"].reason
    assert result.best_config == {"delay_ms": 1, "behaviour": "ok"}
    gpu = _addresses(client, True)
    timed_on = {c.worker.split()[0] for c in result.candidates if c.worker}
    assert timed_on <= gpu and len(timed_on) == 2  # both GPU workers timed, nothing else did
    assert sum(c.retimed_ms is not None for c in result.candidates) == 3
    # the Dask workers survived every crash and hang (only their timing subprocesses were replaced)
    assert len(client.scheduler_info(n_workers=-1)["workers"]) == 4


def test_compile_tasks_avoid_gpu_workers(client, cache, tmp_path):
    from mgpu_lab.tuning.dask_backend import DaskStages
    from mgpu_lab.tuning.pipeline import build_callable
    from mgpu_lab.tuning.timing_worker import Setup

    # the CPU workers as the stages see them when they place the builds: read later, a worker the
    # previous test's crashes restarted may be between addresses (CI once read none)
    cpu_workers = _addresses(client, False)
    stages = DaskStages(client, make_candidate, build_callable, Setup(HostTimer(), [make_inputs()], None, None), 5.0)
    assert cpu_workers and set(stages.compile_workers) == cpu_workers
    futures = [stages._build({"delay_ms": d}) for d in range(8)]
    keys = [f.key for f in futures]

    def placement(dask_scheduler, keys):
        tasks = [dask_scheduler.tasks[k] for k in keys if k in dask_scheduler.tasks]
        return [(sorted(t.worker_restrictions or ()), t.loose_restrictions) for t in tasks]

    # Builds are placed on the workers without a GPU; loosely, so that a compile worker that dies
    # and comes back under a new address does not leave its builds waiting forever (then an idle
    # GPU worker may take one).
    seen = {f.result()[0] for f in futures}
    assert seen == {"built"}
    placed = client.run_on_scheduler(placement, keys=keys)
    assert len(placed) == 8
    for restrictions, loose in placed:
        assert set(restrictions) == cpu_workers and loose
    stages.close(False)


def test_an_interrupted_cluster_tune_resumes(client, cache, tmp_path):
    log_dir = tmp_path / "builds"
    log_dir.mkdir()
    make = functools.partial(make_candidate, log_dir=str(log_dir))
    space = {"delay_ms": [1, 2, 3, 4, 5, 6], "behaviour": ["ok"]}
    count = []

    def stop(record):
        count.append(record)
        if len(count) == 2:
            raise KeyboardInterrupt

    def run(**kw):
        return mgpu_lab.tune(make, space, args=make_inputs, reference=lambda a, b: a + b, cluster=client,
                             timer=HostTimer(iters=3), progress=False, **kw)

    with pytest.raises(KeyboardInterrupt):
        run(on_record=stop)
    (journal,) = cache.glob("*.journal.jsonl")
    done = Journal(journal).load()
    assert len(done) == 2
    second = []
    result = run(on_record=lambda r: second.append(r["key"]))
    assert len(second) == 4 and not set(second) & set(done)
    assert result.notes["resumed"] == 2 and all(c.status == "timed" for c in result.candidates)


def test_a_cluster_without_gpu_workers_is_refused(cache):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster, Client(cluster) as c:
        with pytest.raises(ValueError, match="cluster: no worker declares a GPU resource"):
            mgpu_lab.tune(make_candidate, {"delay_ms": [1]}, args=make_inputs, cluster=c, timer=HostTimer())


def test_the_command_line_tunes_on_a_scheduler(client, cache, tmp_path, capsys):
    from mgpu_lab.cli import main

    setup = tmp_path / "problem.py"
    setup.write_text(
        "from mgpu_lab.tuning.timers import HostTimer\n"
        "from test_tune_parallel import make_candidate, make_inputs\n"
        "def problem():\n"
        "    return dict(make_kernel=make_candidate, space={'delay_ms': [1, 30]}, args=make_inputs,\n"
        "                reference=lambda a, b: a + b, timer=HostTimer(iters=3), progress=False)\n")
    assert main(["tune", f"{setup}:problem", "--scheduler", client.scheduler.address]) == 0
    out = capsys.readouterr().out
    assert "best {'delay_ms': 1}" in out and "timed" in out
