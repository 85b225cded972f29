"""A tuner that loses only the bad candidate: a build that kills its own process or hangs costs
that candidate one row and its build process a replacement; the others build and are timed
(all on the CPU: plain Python candidates timed by HostTimer)."""

from __future__ import annotations

import os
import signal
import time

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
