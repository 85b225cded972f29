"""Mutation testing of the modules where a wrong answer is silent, with mutmut 3, module by module.

For each module below, mutmut mutates that one file and runs, for each mutant, only the CPU
tests mapped to the module here (and of those, only the tests that executed the mutated
function: mutmut records that once per module). A mutant is killed when a test fails or times
out; it survives when every test still passes. The score per module (killed / mutants run) is
written to an append-only record, `benchmarks/results/mutation_<UTC time>_<commit8>.json`,
through benchmarks/common.py, with every survivor's diff and the reason it survives, read
from scripts/mutation_reasons.json (keyed by the diff, so renumbered mutants keep their reason).

Modules with more than --max-mutants mutants are sampled (seeded, recorded as such).
`--recheck RECORD` re-runs only the survivors of an earlier record (for modules whose file is
unchanged since, so the mutants are the same) after tests were added, and records the total.

    nice python scripts/mutation.py                      # every module (an hour or more on 2 cores)
    nice python scripts/mutation.py --modules profiler.decode,compiler.cache --max-mutants 60
    nice python scripts/mutation.py --recheck benchmarks/results/mutation_<time>_<commit>.json

Needs the [mutation] extra (mutmut). Runs in a temporary copy of the tree; the tree is not touched.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import commit, table, write_record  # noqa: E402

REASONS = Path(__file__).with_name("mutation_reasons.json")


@dataclass(frozen=True)
class Target:
    """One file to mutate, the CPU tests that guard it, optionally only some of its functions."""

    path: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()  # mutate only these (names as mutmut spells them); () = all
    # Modules whose tests compile kernels cost seconds per mutant: sample fewer (recorded).
    max_mutants: int | None = None


MODULES: dict[str, Target] = {
    "builder.layouts": Target("mgpu_lab/builder/layouts.py",
                              ("tests/test_fragmented_ops.py", "tests/test_hopper_wgmma_variants.py",
                               "tests/test_cpu_swizzled_stores.py", "tests/test_cpu_transforms.py",
                               "tests/test_cpu_layouts.py", "tests/test_dsl_gaps.py"), max_mutants=40),
    "builder.transforms": Target("mgpu_lab/builder/transforms.py",
                                 ("tests/test_builder.py", "tests/test_tma.py", "tests/test_cpu_transforms.py"),
                                 max_mutants=40),
    "builder.memref_ops": Target("mgpu_lab/builder/memref_ops.py",
                                 ("tests/test_builder.py", "tests/test_tma.py", "tests/test_cpu_transforms.py"),
                                 max_mutants=40),
    "runtime.portable": Target("mgpu_lab/runtime/portable.py",
                               ("tests/test_cpu_launch_arguments.py", "tests/test_cpu_export_launch.py",
                                "tests/test_cpu_loaded_function.py")),
    "compiler.cache": Target("mgpu_lab/compiler/cache.py",
                             ("tests/test_cache.py", "tests/test_cache_security.py", "tests/test_cpu_cache_key.py"),
                             max_mutants=40),
    "compiler.disassemble.line_map": Target("mgpu_lab/compiler/disassemble.py",
                                            ("tests/test_compile.py", "tests/test_cpu_line_map.py"),
                                            ("ptx_line_sources", "sass_line_sources", "build_line_map")),
    "profiler.decode": Target("mgpu_lab/profiler/decode.py",
                              ("tests/test_profiler_decode.py", "tests/test_cpu_profiler_decode.py")),
    "profiler.perfetto_export": Target("mgpu_lab/profiler/perfetto_export.py",
                                       ("tests/test_profiler_export.py", "tests/test_cpu_profiler_flags.py")),
    "profiler.chrome_export": Target("mgpu_lab/profiler/chrome_export.py",
                                     ("tests/test_profiler_export.py", "tests/test_cpu_profiler_flags.py")),
    "exporter": Target("mgpu_lab/runtime/export.py", ("tests/test_export.py", "tests/test_cpu_export_launch.py"), max_mutants=40),
    "magics": Target("mgpu_lab/magics.py", ("tests/test_magics.py", "tests/test_cpu_magics.py"), max_mutants=40),
}

STATUS = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
          0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", None: "not checked"}
DETECTED = ("killed", "timeout")  # a mutant that hangs the tests is caught too


def _mutmut(workdir: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    exe = str(Path(sys.executable).with_name("mutmut"))
    return subprocess.run([exe, "run", "--max-children", "1", *args], cwd=workdir, capture_output=True,
                          text=True, timeout=timeout)


# mutmut's own failures: it prints one of these and exits 1, which is also its code for a normal
# run, having tested no mutant (every one then reads "not checked").
MUTMUT_FAILURES = ("failed to collect stats", "Failed to run clean test", "Stopping early",
                   "Unable to force test failures")


def _check(result: subprocess.CompletedProcess, target: Target, stage: str) -> None:
    """Stop with mutmut's output when it gave up before testing mutants (e.g. a mapped test
    that fails on the unmutated code run through mutmut's trampolines), rather than record
    a module with 0 mutants run."""
    failure = next((f for f in MUTMUT_FAILURES if f in result.stdout or f in result.stderr), None)
    if failure is not None or result.returncode not in (0, 1):
        raise RuntimeError(f"mutmut {stage} for {target.path} failed ({failure or f'exit {result.returncode}'}); "
                           f"its output ends:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")


def snapshot_tree() -> Path:
    """One copy of the package and the tests for the whole run: every module is measured on
    the same tree, whatever is edited meanwhile."""
    snapshot = Path(tempfile.mkdtemp(prefix="mgpu-mutation-tree-"))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "browser", "executed")
    shutil.copytree(ROOT / "mgpu_lab", snapshot / "mgpu_lab", ignore=ignore)
    shutil.copytree(ROOT / "tests", snapshot / "tests", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", snapshot / "pyproject.toml")
    return snapshot


def _workdir(target: Target, tree: Path) -> Path:
    """A private copy of the snapshot, with mutmut configured for this one file."""
    workdir = Path(tempfile.mkdtemp(prefix="mgpu-mutation-"))
    shutil.copytree(tree, workdir, dirs_exist_ok=True)
    tests = [t for t in target.tests if (tree / t).exists()]
    lines = ["[mutmut]", "source_paths=mgpu_lab", f"only_mutate={target.path}",
             "pytest_add_cli_args_test_selection=", *[f"    {t}" for t in tests],
             "pytest_add_cli_args=", "    -p", "    no:cacheprovider", "    -q", "    -x",
             "    -m", "    not gpu and not browser",
             # Fork from a clean server: the compiler's background threads make plain fork hang.
             "process_isolation=forkserver"]
    (workdir / "setup.cfg").write_text("\n".join(lines) + "\n")
    return workdir


def _meta(workdir: Path, target: Target) -> dict:
    return json.loads((workdir / "mutants" / (target.path + ".meta")).read_text())


def _function_of(mutant: str) -> str:
    """`pkg.mod.x_fn__mutmut_3` or `pkg.mod.xǁClassǁmethod__mutmut_3` -> `fn` / `Class.method`."""
    local = mutant.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]
    if local.startswith("x\u01c1"):  # a method: xǁClassǁname
        return local[2:].replace("\u01c1", ".")
    return local.removeprefix("x_")


def _diff(workdir: Path, mutant: str) -> str:
    exe = str(Path(sys.executable).with_name("mutmut"))
    out = subprocess.run([exe, "show", mutant], cwd=workdir, capture_output=True, text=True, timeout=120).stdout
    changed = [line for line in out.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return "\n".join(line.rstrip() for line in changed)


def _reason_key(module: str, function: str, diff: str) -> str:
    return f"{module}::{function}::" + hashlib.sha256(diff.encode()).hexdigest()[:16]


def _reason(reasons: dict, key: str) -> str:
    """The reason recorded for a survivor: its exact key, else the first glob pattern matching it
    (e.g. `runtime.portable::LoadedFunction.*` for code that needs a GPU)."""
    if key in reasons:
        return reasons[key]
    return next((why for pattern, why in reasons.items() if fnmatch.fnmatchcase(key, pattern)), "unexplained")


def run_module(module: str, target: Target, max_mutants: int, seed: int, reasons: dict, tree: Path,
               previous: dict | None = None) -> dict:
    """Mutate one module and return its record entry (score, counts, survivors with reasons).

    With `previous` (this module's entry of an earlier record, same file), only its survivors
    run again; its detected mutants are carried over."""
    t0 = time.time()
    workdir = _workdir(target, tree)
    try:
        # Pass 1 generates every mutant and records which tests run which function; the
        # impossible name makes mutmut stop before testing any mutant.
        first = _mutmut(workdir, "__list_only__", timeout=3600)
        _check(first, target, "stats pass")
        if not (workdir / "mutants" / (target.path + ".meta")).exists():
            raise RuntimeError(f"mutmut generated nothing for {target.path}:\n{first.stdout[-3000:]}"
                               f"\n{first.stderr[-3000:]}")
        names = sorted(_meta(workdir, target)["exit_code_by_key"])
        if target.functions:
            names = [n for n in names if _function_of(n) in target.functions]
        total = len(names)
        max_mutants = min(max_mutants, target.max_mutants or max_mutants)
        sampled = total > max_mutants
        chosen = sorted(random.Random(seed).sample(names, max_mutants)) if sampled else names
        carried = Counter()
        if previous is not None:
            chosen = [s["mutant"] for s in previous["survivors"] if s["mutant"] in names]
            sampled = previous["sampled"]
            carried = Counter({k: v for k, v in previous["counts"].items() if k in DETECTED})
        if chosen:
            second = _mutmut(workdir, *chosen, timeout=4 * 3600)
            _check(second, target, "run")
        codes = _meta(workdir, target)["exit_code_by_key"]
        statuses = {n: STATUS.get(codes.get(n), "suspicious") for n in chosen}
        if chosen and all(s == "not checked" for s in statuses.values()):
            raise RuntimeError(f"mutmut tested none of the {len(chosen)} chosen mutants of {target.path}; "
                               f"its output ends:\n{second.stdout[-4000:]}\n{second.stderr[-2000:]}")
        counts = Counter(statuses.values()) + carried
        survivors = []
        for name, status in sorted(statuses.items()):
            if status in DETECTED:
                continue
            function = _function_of(name)
            diff = _diff(workdir, name)
            key = _reason_key(module, function, diff)
            survivors.append({"mutant": name, "status": status, "function": function, "diff": diff,
                              "reason_key": key, "reason": _reason(reasons, key)})
            print(f"  survived: {name} [{key}]\n    " + diff.replace("\n", "\n    "), flush=True)
        run = sum(v for k, v in counts.items() if k not in ("skipped", "not checked"))
        detected = sum(counts[k] for k in DETECTED)
        return _with_scores({
            "file": target.path, "file_sha256": hashlib.sha256((tree / target.path).read_bytes()).hexdigest(),
            "tests": list(target.tests), "functions": list(target.functions) or "all",
            "mutants_total": total, "mutants_run": run, "sampled": sampled, "sample_seed": seed if sampled else None,
            "sample_size": max_mutants if sampled else None,
            "rechecked_survivors_only": previous is not None,
            "counts": dict(counts), "killed": detected, "score": detected / run if run else None,
            "survivors": survivors, "seconds": round(time.time() - t0),
        })
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _with_scores(entry: dict, reasons: dict | None = None) -> dict:
    """Add the CPU-reachable score: GPU-only survivors (each naming its GPU test) and equivalent
    ones (no test can tell them apart) left out of the denominator. With `reasons`, the
    survivors' reasons are looked up again first."""
    if reasons is not None:
        for s in entry["survivors"]:
            s["reason"] = _reason(reasons, s["reason_key"])
    gpu_only = sum(s["reason"].startswith("GPU-only") for s in entry["survivors"])
    equivalent = sum(s["reason"].startswith("equivalent") for s in entry["survivors"])
    reachable = entry["mutants_run"] - gpu_only - equivalent
    return entry | {"score_cpu_reachable": entry["killed"] / reachable if reachable else None,
                    "survivors_gpu_only": gpu_only, "survivors_equivalent": equivalent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", default=",".join(MODULES), help="comma list of " + ", ".join(MODULES))
    parser.add_argument("--max-mutants", type=int, default=150, help="sample modules with more mutants")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default=None, help="default: benchmarks/results (or $OUT)")
    parser.add_argument("--recheck", default=None, help="an earlier mutation record: re-run its survivors only")
    parser.add_argument("--relabel", default=None,
                        help="an earlier mutation record: apply the current reasons file to its survivors "
                             "(no mutants run) and write the result as a new record")
    args = parser.parse_args()
    if args.relabel:
        relabel(Path(args.relabel), args.out_dir)
        return
    earlier = json.loads(Path(args.recheck).read_text())["notes"]["modules"] if args.recheck else {}
    chosen = [m.strip() for m in args.modules.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in MODULES]
    if unknown:
        parser.error(f"--modules: unknown {unknown}; choose from {', '.join(MODULES)}")
    reasons = json.loads(REASONS.read_text()) if REASONS.exists() else {}
    measured = commit()
    dirty = subprocess.run(["git", "status", "--porcelain", "mgpu_lab", "tests"], capture_output=True, text=True,
                           cwd=ROOT).stdout.strip()
    tree = snapshot_tree()
    results: dict[str, dict] = {}
    for module in chosen:
        print(f"mutating {module} ...", flush=True)
        previous = earlier.get(module)
        if previous and previous["file_sha256"] != hashlib.sha256((ROOT / MODULES[module].path).read_bytes()).hexdigest():
            print(f"  {module} changed since {args.recheck}: mutating it afresh", flush=True)
            previous = None
        results[module] = run_module(module, MODULES[module], args.max_mutants, args.seed, reasons, tree, previous)
        r = results[module]
        print(f"  {r['killed']}/{r['mutants_run']} killed ({r['mutants_total']} mutants"
              f"{', sampled' if r['sampled'] else ''}) in {r['seconds']} s", flush=True)
    shutil.rmtree(tree, ignore_errors=True)
    reasons = json.loads(REASONS.read_text()) if REASONS.exists() else {}  # reasons added during the run count
    results = {m: _with_scores(r, reasons) for m, r in results.items()}
    notes = {"tool": "mutmut " + _mutmut_version(), "commit_measured": measured,
             "uncommitted_changes_measured": dirty or None, "goal": ">= 0.80 per module",
             "max_mutants": args.max_mutants, "rechecked_from": Path(args.recheck).name if args.recheck else None}
    _write(results, notes, measured, args.out_dir)


def relabel(record_path: Path, out_dir: str | None) -> None:
    """A new record from an earlier one with the survivors' reasons looked up again."""
    record = json.loads(record_path.read_text())
    reasons = json.loads(REASONS.read_text()) if REASONS.exists() else {}
    notes = record["notes"] | {"relabelled_from": record_path.name}
    results = {m: _with_scores(r, reasons) for m, r in notes["modules"].items()}
    _write(results, notes, notes["commit_measured"], out_dir)


def _write(results: dict, notes: dict, measured: str, out_dir: str | None) -> None:
    notes = notes | {"modules": results}
    figures = {f"mutation_score_{m}": r["score"] for m, r in results.items()}
    figures.update({f"mutation_score_cpu_reachable_{m}": r["score_cpu_reachable"] for m, r in results.items()})
    os.environ["MGPU_LAB_COMMIT"] = measured  # the record's name carries the commit measured
    path = write_record("mutation", figures, notes, out_dir=out_dir)
    rows = [("module", "killed", "run", "total", "score", "CPU-reachable score", "GPU-only", "equivalent",
             "unexplained")]
    for m, r in results.items():
        unexplained = sum(s["reason"] == "unexplained" for s in r["survivors"])
        score = "-" if r["score"] is None else f"{r['score']:.2f}"
        reachable = "-" if r["score_cpu_reachable"] is None else f"{r['score_cpu_reachable']:.2f}"
        rows.append((m, r["killed"], r["mutants_run"], r["mutants_total"], score, reachable,
                     r["survivors_gpu_only"], r["survivors_equivalent"], unexplained))
    print(table(rows))
    print(f"record: {path}")


def _mutmut_version() -> str:
    from importlib.metadata import version

    return version("mutmut")


if __name__ == "__main__":
    main()
