"""The parallel tune on the CPU, for real: plain Python candidates timed by HostTimer in two
pinned worker processes (the GPU path's processes, protocol and restarts, with host timing),
candidates that crash, hang, raise or compute wrong; the journal and resume; the table."""

from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import mgpu_lab
from mgpu_lab.tuning.journal import Journal, config_key
from mgpu_lab.tuning.timers import HostTimer

N = 1000


def run_candidate(delay_ms: float, behaviour: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A candidate 'kernel': a + b after `delay_ms`, or one of the ways a candidate goes wrong."""
    if behaviour == "crash":
        os._exit(7)  # as a segfaulting kernel would take its process down
    if behaviour == "hang":
        time.sleep(3600)
    if behaviour == "raise":
        raise RuntimeError("bad launch configuration")
    time.sleep(delay_ms / 1e3)
    return a - b if behaviour == "wrong" else a + b


def make_candidate(delay_ms: float, behaviour: str = "ok", log_dir: str | None = None):
    """make_kernel for the tests: `log_dir` gets one file per build (to count them)."""
    if log_dir is not None:
        Path(log_dir, f"{delay_ms}-{behaviour}-{uuid.uuid4().hex}").touch()
    if behaviour == "nobuild":
        raise ValueError("tile_n: expected a multiple of 64")
    return functools.partial(run_candidate, delay_ms, behaviour)


def make_inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal(N), rng.standard_normal(N)


def builds(log_dir: Path) -> list[tuple[int, str]]:
    return [(int(p.name.split("-")[0]), p.name.split("-")[1]) for p in log_dir.iterdir()]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "mgpu_lab" / "tune"


def tune(space, **kw):
    kw.setdefault("executor", concurrent.futures.ThreadPoolExecutor(2))
    return mgpu_lab.tune(make_candidate, space, args=make_inputs, reference=lambda a, b: a + b, gpus=[0, 1],
                         timer=HostTimer(iters=5), progress=False, **kw)


def test_failures_cost_one_candidate_each_and_the_fastest_correct_one_wins(cache):
    space = {"delay_ms": [1, 15, 40], "behaviour": ["ok", "crash", "hang", "wrong", "raise", "nobuild"]}
    result = tune(space, timeout_s=2.0)
    by = {(c.config["delay_ms"], c.config["behaviour"]): c for c in result.candidates}
    for d in space["delay_ms"]:
        assert by[d, "ok"].status == "timed" and by[d, "ok"].rel_error == 0.0
        assert by[d, "crash"].status == "crashed" and "exit code 7" in by[d, "crash"].reason
        assert by[d, "hang"].status == "hung" and "no answer within 2 s" in by[d, "hang"].reason
        assert by[d, "wrong"].status == "wrong-result" and "relative error" in by[d, "wrong"].reason
        assert by[d, "raise"].status == "failed-launch" and "bad launch configuration" in by[d, "raise"].reason
        assert by[d, "nobuild"].status == "failed-build" and "tile_n: expected" in by[d, "nobuild"].reason
    assert result.best_config == {"delay_ms": 1, "behaviour": "ok"}
    # both pinned workers timed candidates, each timed candidate says which one
    assert {c.worker.split()[0] for c in result.candidates if c.status == "timed"} <= {"gpu0", "gpu1"}
    assert {c.worker.split()[0] for c in result.candidates if c.worker} == {"gpu0", "gpu1"}
    assert all(len(c.worker.split()) == 2 for c in result.candidates if c.worker)  # "gpu0 cpu:PID", after restarts too
    # the top 3 were re-timed on one worker; the winner by that re-time
    retimed = [c for c in result.candidates if c.retimed_ms is not None]
    assert len(retimed) == 3 and result.best.retimed_ms == min(c.retimed_ms for c in retimed)
    frame = result.to_dataframe()
    assert len(frame) == 18 and list(frame.columns[:2]) == ["delay_ms", "behaviour"]
    assert frame.iloc[0]["delay_ms"] == 1 and frame.iloc[0]["status"] == "timed"
    assert {"compile_s", "median_ms", "spread", "rel_error", "worker", "reason"} <= set(frame.columns)
    ax = result.plot()  # the timed candidates, one bar each, coloured by worker
    assert len(ax.patches) == 3 and ax.get_xlabel() == "median ms"
    saved = json.loads(Path(result.cache_path).read_text())
    assert saved["best_config"] == result.best_config and len(saved["table"]) == 18
    assert saved["key"]["kernel_source"] and saved["key"]["inputs"] == [[[N], "float64"], [[N], "float64"]]
    again = tune(space)
    assert again.from_cache and again.best_config == result.best_config


def test_an_interrupted_tune_resumes_with_only_the_rest(cache, tmp_path):
    log_dir = tmp_path / "builds"
    log_dir.mkdir()
    make = functools.partial(make_candidate, log_dir=str(log_dir))
    space = {"delay_ms": [1, 2, 3, 4, 5, 6, 7, 8], "behaviour": ["ok"]}
    seen = []

    def stop_after_three(record):
        seen.append(record["key"])
        if len(seen) == 3:
            raise KeyboardInterrupt

    def run(**kw):
        return mgpu_lab.tune(make, space, args=make_inputs, reference=lambda a, b: a + b, gpus=[0, 1],
                             timer=HostTimer(iters=3), progress=False, retime_top=1,
                             executor=concurrent.futures.ThreadPoolExecutor(1), **kw)

    with pytest.raises(KeyboardInterrupt):
        run(on_record=stop_after_three)
    journals = list(cache.glob("*.journal.jsonl"))
    assert len(journals) == 1
    done = Journal(journals[0]).load()
    assert set(done) == set(seen) and len(done) == 3
    for p in log_dir.iterdir():
        p.unlink()
    second = []
    result = run(on_record=lambda r: second.append(r["key"]))
    rest = {config_key(c) for c in (dict(delay_ms=d, behaviour="ok") for d in space["delay_ms"])} - set(done)
    assert set(second) == rest and len(second) == 5  # only the rest were timed
    built = {config_key({"delay_ms": d, "behaviour": b}) for d, b in builds(log_dir)}
    assert built == rest | {config_key(result.best_config)}  # ... and compiled (plus the winner, to return it)
    assert result.notes["resumed"] == 3 and len(result.candidates) == 8
    assert all(c.status == "timed" for c in result.candidates)
    assert not journals[0].exists()  # a finished tune leaves the answer in the cache, not a journal


def slow_candidate(delay_ms: float, log_dir: str):
    """make_kernel whose build takes 50 ms and leaves a file when it finishes."""
    time.sleep(0.05)
    return make_candidate(delay_ms, log_dir=log_dir)


def test_an_interrupted_tune_leaves_no_compile_running_on_the_callers_executor(cache, tmp_path):
    """Ctrl-C in a tune given the caller's executor: its queued compiles are withdrawn and the
    running one has finished when the KeyboardInterrupt arrives; nothing builds afterwards."""
    log_dir = tmp_path / "builds"
    log_dir.mkdir()
    executor = concurrent.futures.ThreadPoolExecutor(1)

    def stop(record):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mgpu_lab.tune(functools.partial(slow_candidate, log_dir=str(log_dir)), {"delay_ms": list(range(1, 21))},
                      args=make_inputs, reference=lambda a, b: a + b, gpus=[0], timer=HostTimer(iters=3),
                      progress=False, executor=executor, on_record=stop)
    after_interrupt = len(list(log_dir.iterdir()))
    time.sleep(0.3)  # six more builds' time, were any still queued
    assert len(list(log_dir.iterdir())) == after_interrupt < 20
    assert executor.submit(lambda: "free").result(timeout=1) == "free"
    executor.shutdown()


def test_a_torn_journal_line_is_skipped(tmp_path):
    book = Journal(tmp_path / "j.jsonl")
    book.append({"key": config_key({"d": 1}), "config": {"d": 1}, "status": "timed", "median_ms": 1.5})
    with open(book.path, "ab") as f:
        f.write(b'{"key": "b", "sta')  # killed mid-write
    book.append({"key": config_key({"d": 3}), "config": {"d": 3}, "status": "failed-build", "reason": "no"})
    assert sorted(book.load()) == [config_key({"d": 1}), config_key({"d": 3})]


def test_the_default_compile_pool_and_progress_text(cache, capsys):
    result = mgpu_lab.tune(make_candidate, {"delay_ms": [1, 30]}, args=make_inputs, reference=lambda a, b: a + b,
                           gpus=[0], timer=HostTimer(iters=3))
    assert result.best_config == {"delay_ms": 1}
    err = capsys.readouterr().err
    assert "tune: compiled 2/2  timed 2  failed 0  done 2/2" in err


@pytest.mark.parametrize("kw, message", [
    ({"gpus": "some"}, "gpus: expected 'all', None or a list of distinct device indices"),
    ({"gpus": [0, 0]}, "gpus: expected 'all', None or a list of distinct device indices"),
    ({"gpus": [0], "timeout_s": 0}, "timeout_s: expected a positive number of seconds, got 0"),
    ({"gpus": [0], "retime_top": -1}, "retime_top: expected a count >= 0, got -1"),
    ({"cluster": object(), "timer": HostTimer()}, "cluster: expected a dask.distributed Client, got object"),
])
def test_bad_parallel_arguments(cache, kw, message):
    with pytest.raises((ValueError, TypeError)) as e:
        mgpu_lab.tune(make_candidate, {"delay_ms": [1]}, args=make_inputs, **kw)
    assert message in str(e.value)


def test_the_single_host_path_does_not_import_dask():
    import subprocess
    import sys

    code = ("import sys, mgpu_lab.tuning.pipeline, mgpu_lab.tuning; "
            "print(any(m.split('.')[0] in ('dask', 'distributed') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_retime_interleaves_rounds_and_a_failed_round_disqualifies():
    from mgpu_lab.tuning.timers import Measurement
    from mgpu_lab.tuning.worker_pool import Outcome, retime

    calls = []
    ms = {"a": [3.0, 1.0, 2.0], "b": [5.0, 5.0, 4.0], "c": [0.5, None, 0.5]}

    def measure(key, payload):
        value = ms[key][sum(k == key for k in calls)]
        calls.append(key)
        if value is None:
            return Outcome("hung", "no answer")
        return Outcome("timed", measurement=Measurement(value, 0.0, None))

    result = retime(measure, [("a", 1), ("b", 2), ("c", 3)], rounds=3)
    assert calls == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert result["a"][0] == 2.0 and result["b"][0] == 5.0 and result["c"][0] == float("inf")


def test_worker_devices_go_through_the_callers_visible_list():
    from mgpu_lab.tuning.worker_pool import visible_device

    assert visible_device(1, "4,5") == "5" and visible_device(3, "") == "3"
    with pytest.raises(ValueError, match=r"gpus: device 2 is not visible \(CUDA_VISIBLE_DEVICES='4,5'\)"):
        visible_device(2, "4,5")


def test_inputs_that_are_not_arrays_are_refused(cache):
    with pytest.raises(ValueError, match=r"args: expected the kernel's input arrays \(a tuple\), a list of such "
                                         r"tuples, or a callable returning them; got tuple"):
        mgpu_lab.tune(make_candidate, {"delay_ms": [1]}, args=lambda: (), gpus=[0], timer=HostTimer())


def test_scheduler_without_dask_says_which_extra(tmp_path, monkeypatch, capsys):
    import sys

    from mgpu_lab.cli import main

    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the extra were not installed
    setup = tmp_path / "problem.py"
    setup.write_text("from test_tune_parallel import make_candidate, make_inputs\n"
                     "problem = dict(make_kernel=make_candidate, space={'delay_ms': [1]}, args=make_inputs)\n")
    assert main(["tune", f"{setup}:problem", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "--scheduler needs Dask distributed: pip install 'mgpu_lab[distributed]'" in capsys.readouterr().err


def test_inputs_made_by_a_lambda_are_refused_before_any_work(cache):
    with pytest.raises(TypeError, match="args: the worker processes need it pickled"):
        mgpu_lab.tune(make_candidate, {"delay_ms": [1]}, args=lambda: make_inputs(), gpus=[0], timer=HostTimer())


def test_the_notebook_progress_bar_counts_compiled_timed_failed(monkeypatch):
    import IPython
    import IPython.display

    from mgpu_lab.tuning.progress import Counts, TuneProgress

    ZMQInteractiveShell = type("ZMQInteractiveShell", (), {})  # what a Jupyter kernel runs
    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: ZMQInteractiveShell())
    monkeypatch.setattr(IPython.display, "display", shown.append)
    progress = TuneProgress(Counts(3))
    progress.compiled()
    progress.compiled()
    progress.finished(True)
    progress.finished(False)
    (box,) = shown
    bar, label = box.children
    assert (bar.value, bar.max) == (2, 3)
    assert label.value == "compiled 2/3  timed 1  failed 1  done 2/3"
