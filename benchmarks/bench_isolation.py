"""Isolation: faults survived, time to recover, and what an isolated launch costs.

1. Overhead: an isolated call of a 4096-element vector add against the same call in this
   process followed by a stream synchronization (an isolated call is synchronous), interleaved
   in rounds; `isolated_launch_overhead_us` is the difference of the medians.
2. Faults: injects `--faults` (default 100) faults cycling through the kernels of
   tests/fault_kernels.py (OOB write far and near, trap, mbarrier-timeout trap, misaligned
   vector load). After each it checks that this process's CUDA context works, that arrays the
   faulting kernel never received (sentinels, allocated first, never freed) are bit-identical,
   and that the next isolated launch gives the right answer. `isolation_faults_survived`
   counts faults after which all three hold; `isolation_recovery_s` is the median time from
   the faulting call's return to the next correct launch (the checks in between included:
   a few tens of milliseconds). Arrays the worker has mapped for
   other launches are exposed to stray stores (a near OOB write can land in one instead of
   faulting): `isolation_worker_mapped_arrays_hit` counts that, and they are restored.

Run on a GPU machine:  python benchmarks/bench_isolation.py [--faults 100] [--budget-s 240]
Writes benchmarks/results/isolation_<date>.json (or $OUT/) and prints a table last.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(1, str(HERE.parent))  # this checkout's mgpu_lab, also when run without PYTHONPATH
from common import GpuSampler, table, write_record  # noqa: E402
from fault_kernels import FAULTS, N  # noqa: E402

import mgpu_lab  # noqa: E402
from mgpu_lab.errors import KernelFaultError  # noqa: E402
from mgpu_lab.examples.vector_add import make_vector_add  # noqa: E402
from mgpu_lab.runtime.isolation import worker_for  # noqa: E402

SMALL = 1 << 12


def overhead(rounds: int, calls: int) -> dict:
    import cupy

    k = make_vector_add(SMALL)
    a = cupy.arange(SMALL, dtype=np.float32)
    out = cupy.full_like(a, np.nan)
    k(a, a, out=out, isolate=True)
    assert cupy.array_equal(out, 2 * a), "isolated vector add is wrong"
    stream = cupy.cuda.get_current_stream()

    def in_process():
        k(a, a, out=out)
        stream.synchronize()

    def isolated():
        k(a, a, out=out, isolate=True)

    sides = {"in_process_sync": in_process, "isolated": isolated}
    runs = {name: [] for name in sides}
    for fn in sides.values():
        for _ in range(20):
            fn()
    for r in range(rounds):
        for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            t0 = time.perf_counter()
            for _ in range(calls):
                sides[name]()
            runs[name].append((time.perf_counter() - t0) * 1e6 / calls)
    med = {name: statistics.median(v) for name, v in runs.items()}
    return {"isolated_launch_us": med["isolated"], "in_process_launch_sync_us": med["in_process_sync"],
            "isolated_launch_overhead_us": med["isolated"] - med["in_process_sync"],
            "isolated_vs_in_process_sync": med["isolated"] / med["in_process_sync"], "_runs": runs}


def inject(faults: int, budget_s: float, timeout_s: float) -> tuple[dict, dict]:
    import cupy

    rng = np.random.default_rng(1)
    # Sentinels first and kept: no array sent to the worker shares their allocations.
    sentinels = [cupy.asarray(rng.standard_normal(1 << 20, dtype=np.float32)) for _ in range(4)]
    expected = [s.get() for s in sentinels]
    x, y = cupy.ones(N, np.float32), cupy.zeros(N, np.float32)
    good = make_vector_add(N)
    ga_host, gb_host = (rng.standard_normal(N, dtype=np.float32) for _ in range(2))
    ga, gb = cupy.asarray(ga_host), cupy.asarray(gb_host)
    g_expected = ga_host.astype(np.float64) + gb_host.astype(np.float64)
    g_out = cupy.empty(N, np.float32)
    kernels = {name: (make(), takes_x) for name, (make, takes_x) in FAULTS.items()}
    names = sorted(kernels)
    device = cupy.cuda.runtime.getDevice()
    good(ga, gb, out=g_out, isolate=True)  # starts the worker
    restarts0 = worker_for(device).restarts

    per_kind = collections.defaultdict(collections.Counter)
    recovery, failures, fault_calls = [], [], []
    worker_arrays_hit = 0  # the good kernel's inputs, mapped in the worker, written by a stray store
    t_start = time.perf_counter()
    injected = 0
    with mgpu_lab.isolated(timeout_s=timeout_s, locate_faults=False):
        for i in range(faults):
            if time.perf_counter() - t_start > budget_s:
                break
            name = names[i % len(names)]
            k, takes_x = kernels[name]
            injected += 1
            raised = False
            t_call = time.perf_counter()
            try:
                k(*((x,) if takes_x else ()), out=y)
            except KernelFaultError as e:
                raised = True
                per_kind[name][e.cuda_error] += 1
            t_fault = time.perf_counter()
            per_kind[name]["raised" if raised else "no fault"] += 1
            try:
                healthy = float(cupy.arange(1024, dtype=cupy.float32).sum()) == 1023 * 1024 / 2
                intact = all(np.array_equal(s.get(), e) for s, e in zip(sentinels, expected))
                if not (np.array_equal(ga.get(), ga_host) and np.array_equal(gb.get(), gb_host)):
                    worker_arrays_hit += 1  # a near write landed in another mapping of the worker
                    ga.set(ga_host)
                    gb.set(gb_host)
                g_out.fill(np.nan)
                good(ga, gb, out=g_out)
                next_ok = bool(np.allclose(g_out.get(), g_expected, rtol=1e-6, atol=1e-6))
            except Exception as e:  # noqa: BLE001 - a failure here is what the benchmark counts
                healthy = intact = next_ok = False
                failures.append(f"{i} {name}: {type(e).__name__}: {e}"[:300])
            if raised:
                recovery.append(time.perf_counter() - t_fault)
                fault_calls.append(t_fault - t_call)
            if healthy and intact and next_ok:
                per_kind[name]["survived"] += 1
            elif len(failures) < 20:
                failures.append(f"{i} {name}: healthy={healthy} intact={intact} next_ok={next_ok}")
    survived = sum(c["survived"] for c in per_kind.values())
    figures = {
        "isolation_faults_injected": injected,
        "isolation_faults_survived": survived,
        "isolation_faults_raised": sum(c["raised"] for c in per_kind.values()),
        "isolation_recovery_s": statistics.median(recovery) if recovery else None,
        "isolation_recovery_s_max": max(recovery) if recovery else None,
        "isolation_fault_call_s": statistics.median(fault_calls) if fault_calls else None,
        "isolation_worker_restarts": worker_for(device).restarts - restarts0,
        "isolation_worker_mapped_arrays_hit": worker_arrays_hit,
        "isolation_fault_phase_s": time.perf_counter() - t_start,
    }
    return figures, {"per_kind": {k: dict(v) for k, v in per_kind.items()}, "failures": failures}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--budget-s", type=float, default=240.0, help="stop injecting after this long")
    parser.add_argument("--timeout-s", type=float, default=30.0, help="per-launch timeout in the worker")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=300)
    opts = parser.parse_args()

    with GpuSampler() as gpu:
        over = overhead(opts.rounds, opts.calls)
        runs = over.pop("_runs")
        fault_figures, fault_notes = inject(opts.faults, opts.budget_s, opts.timeout_s)
    figures = {**over, **fault_figures}
    path = write_record("isolation", figures, notes={"overhead_runs_us": runs, **fault_notes}, sampler=gpu)
    for line in fault_notes["failures"]:
        print("failure:", line)
    print("per kind:", fault_notes["per_kind"])
    print(f"record: {path}")
    rec = figures["isolation_recovery_s"]
    print(table([
        ("isolation", "value", "goal"),
        ("faults survived", f"{figures['isolation_faults_survived']}/{figures['isolation_faults_injected']} "
                            f"({figures['isolation_faults_raised']} raised KernelFaultError)", "100/100"),
        ("recovery (median, max)", "-" if rec is None else
         f"{rec:.2f} s, {figures['isolation_recovery_s_max']:.2f} s", "< 10 s"),
        ("isolated launch", f"{over['isolated_launch_us']:.1f} us", "-"),
        ("in-process launch + sync", f"{over['in_process_launch_sync_us']:.1f} us", "-"),
        ("isolation overhead", f"{over['isolated_launch_overhead_us']:.1f} us per call", "-"),
    ]))


if __name__ == "__main__":
    main()
