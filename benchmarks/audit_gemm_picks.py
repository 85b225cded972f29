"""What ptxas says about the kernels the GEMM model picks, on shapes drawn at run time. CPU only.

A pick that spills registers or whose wgmmas ptxas serializes loses speed on every call, and
ptxas reports both at build time: no GPU is needed to find them. For each drawn shape
(`gemm_random.random_problems`: the random-shape benchmark's distribution and seeds, the tuned
table off) this builds the model's pick, cold (`use_cache=False`), and reads each kernel's
resources and ptxas log: spilled bytes, wgmma serialization notes (C7510-C7520), and any other
ptxas note code. With `--fp8` it also builds the FP8 per-tensor and block-scaled picks
(`gemm_fp8_random`), the block-scaled ones with and without `overlap_promotion`.

On 2026-12-05 it found 3009x3296x472's 128 x 128 multicast pair spilling 76 bytes in its
producer (fixed: the producer's short k-loop stays a loop).

Run:  python benchmarks/audit_gemm_picks.py [--seeds 12,13,14] [--count 64] [--fp8]
Writes `gemm_pick_audit_<time>_<commit>.json` (per seed: kernels built, with spills, serialized,
the note codes counted; per finding its shape and configuration) and prints the findings last.
"""

from __future__ import annotations

import argparse
import os
import re
import time
import warnings
from collections import Counter
from typing import Any

from common import table, write_record
from gemm_random import random_problems

SERIALIZATION = re.compile(r"\((C75(?:1\d|20))\)")  # ptxas's "wgmma ... serialized" notes
NOTE = re.compile(r"\((C\d{4})\)")


def audit(kernel: Any) -> dict:
    """Spilled bytes (stores + loads), serialization note codes and every note code, over the kernel's launches."""
    spilled, serialized, notes = 0, [], Counter()
    for c in (launch.compiled for launch in kernel.program.launches):
        spilled += c.resources.spill_stores_bytes + c.resources.spill_loads_bytes
        serialized += SERIALIZATION.findall(c.ptxas_log)
        notes.update(NOTE.findall(c.ptxas_log))
    return {"spilled_bytes": spilled, "serialized": sorted(set(serialized)), "notes": dict(notes)}


def _build(make: Any, *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the audit reads ptxas's log itself
        return make(*args, use_cache=False, **kwargs)


def cases(seeds: list[int], count: int, fp8: bool):
    """(label, seed, builder) of every pick to audit."""
    from mgpu_lab.kernels.gemm import make_gemm

    for seed in seeds:
        for p in random_problems(count, seed):
            layout = "nt" if p.transpose_b else "nn"
            yield f"bf16 {p.key} {layout}", seed, lambda p=p: _build(make_gemm, p.m, p.n, p.k,
                                                                     transpose_b=p.transpose_b)
        if not fp8:
            continue
        from gemm_fp8_random import fp8_random_problems, make_fp8_kernel

        for mode in ("tensor", "block"):
            for p in fp8_random_problems(count // 2, seed, mode):
                yield f"fp8 {mode} {p.key}", seed, lambda p=p, mode=mode: _build(make_fp8_kernel, mode, p.m, p.n, p.k)
                if mode == "block":
                    yield (f"fp8 block {p.key} overlap", seed,
                           lambda p=p: _build(make_fp8_kernel, "block", p.m, p.n, p.k, overlap_promotion=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="12,13,14", help="comma-separated seeds (the random-shape benchmark's)")
    parser.add_argument("--count", type=int, default=64, help="bf16 shapes per seed (FP8: half as many per mode)")
    parser.add_argument("--fp8", action="store_true", help="also the FP8 per-tensor and block-scaled picks")
    args = parser.parse_args()
    os.environ.setdefault("MGPU_LAB_GEMM_TABLE", "0")  # the model's picks, not the tuned table's
    seeds = [int(s) for s in args.seeds.split(",")]
    start = time.perf_counter()
    figures: dict = {}
    findings = [("seed", "kernel", "configuration", "spilled B", "serialized", "notes")]
    per_seed: dict[int, Counter] = {s: Counter() for s in seeds}
    for label, seed, build in cases(seeds, args.count, args.fp8):
        kernel = build()
        found = audit(kernel)
        counts = per_seed[seed]
        counts["kernels"] += 1
        counts["spilling"] += found["spilled_bytes"] > 0
        counts["serialized"] += bool(found["serialized"])
        for code, n in found["notes"].items():
            counts[f"note_{code}"] += n
        if found["spilled_bytes"] or found["serialized"]:
            config = str(kernel.config.get("tiling", kernel.config))
            key = f"gemm_pick_audit_seed{seed}_{label.replace(' ', '_')}"
            figures[f"{key}_spilled_bytes"] = found["spilled_bytes"]
            figures[f"{key}_serialized"] = ",".join(found["serialized"])
            figures[f"{key}_config"] = config
            findings.append((seed, label, config[:90], found["spilled_bytes"], ",".join(found["serialized"]),
                             ",".join(found["notes"])))
    for seed, counts in per_seed.items():
        for name, n in counts.items():
            figures[f"gemm_pick_audit_seed{seed}_{name}"] = n
    notes = {"seeds": seeds, "count": args.count, "fp8": args.fp8, "cache": "off", "table": "off",
             "wall_s": round(time.perf_counter() - start, 1)}
    print(f"record: {write_record('gemm_pick_audit', figures, notes)}")
    for seed, counts in per_seed.items():
        print(f"seed {seed}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(table(findings) if len(findings) > 1 else "no spills, no serialized wgmmas")


if __name__ == "__main__":
    main()
