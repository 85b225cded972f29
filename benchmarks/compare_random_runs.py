"""Two drawn-shape GEMM runs of the same seed side by side: what a change of configuration did.

    python benchmarks/compare_random_runs.py BASE.json OTHER.json [--top 15]

BASE and OTHER are `gemm_random` records (bench_gemm.py --random N --seed S, with or without
--epilogue) of the same seed: e.g. main's run and a branch's run with model switches on
(MGPU_LAB_GEMM_OFFER), or two commits. Each run timed ours against cuBLAS in its own rounds, so
the per-shape figure compared is the change of that ratio (OTHER's kernel-only ratio over
BASE's): clocks that differ between the runs cancel. Prints every shape whose configuration
differs (slowest change first, then the `--top` best), and the geomean change over all shapes,
over the shapes whose configuration differs, and per kind of configuration OTHER took there
(`family`: multicast pairs sharing A or B, clusters of four, swapped tiles one per block or
persistent, ...). No GPU needed.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gemm_random import scheme  # noqa: E402

_SHAPE = re.compile(r"^gemm_random(?:_[a-z]+)?_seed(\d+)_(\d+x\d+x\d+_n[nt])_kernel_vs_cublas$")


def shapes(figures: dict) -> dict[str, dict]:
    """{'MxNxK_nn': {'ratio', 'ours_us', 'config'}} of a record's timed shapes (any prefix:
    plain or with an epilogue), and the seed."""
    out = {}
    for key, ratio in figures.items():
        match = _SHAPE.match(key)
        if not match:
            continue
        stem = key[: -len("_kernel_vs_cublas")]
        out[match[2]] = {"ratio": ratio, "ours_us": figures.get(f"{stem}_ours_us"),
                         "config": figures.get(f"{stem}_config") or {}, "seed": int(match[1])}
    return out


def family(config: dict) -> str:
    """The kind of configuration: what distinguishes the model's families (and its switches)."""
    cluster = (config.get("cluster_m", 1) or 1, config.get("cluster_n", 1) or 1)
    scheme = {True: "persistent", "pingpong": "pingpong", "stream_k": "stream-K"}.get(config.get("persistent"),
                                                                                    "one tile a block")
    if config.get("swap_ab"):
        return f"swapped, {scheme}"
    if cluster[0] * cluster[1] == 4:
        return f"clusters of four {cluster[0]}x{cluster[1]}, {scheme}"
    if cluster[1] == 2:
        return f"pairs sharing A, {scheme}"
    if cluster[0] == 2:
        width = "" if config.get("tile_n") in (128, 256) else f" (tile_n {config.get('tile_n')})"
        return f"pairs sharing B{width}, {scheme}"
    split = config.get("split_k", 1) or 1
    return f"{scheme}{f', split-K {split}' if split > 1 else ''}"


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


_DEFAULTS = {"persistent": False, "split_k": 1, "cluster_m": 1, "cluster_n": 1, "swap_ab": False, "group_m": 8}


def _reduce(config: dict) -> str:
    split = config.get("split_k", 1) or 1
    return config.get("split_k_reduce") or ("cluster" if split <= 8 else "workspace")


def _same(a: dict, b: dict) -> bool:
    """Whether two runs built the same configuration (the model's estimate aside)."""
    if scheme(a) != scheme(b) or a.get("group_m", 8) != b.get("group_m", 8):
        return False
    return (a.get("split_k", 1) or 1) == 1 or _reduce(a) == _reduce(b)


def compare(base: dict, other: dict) -> tuple[list[dict], dict]:
    """Per common shape {'shape', 'base', 'other', 'change', 'changed', 'family', configs}, and the
    summary: geomean change over all, over the changed ones, per family of OTHER's changed picks."""
    a, b = shapes(base), shapes(other)
    rows = []
    for shape in sorted(set(a) & set(b)):
        x, y = a[shape], b[shape]
        rows.append({"shape": shape, "base": x["ratio"], "other": y["ratio"], "change": y["ratio"] / x["ratio"],
                     "changed": not _same(x["config"], y["config"]), "family": family(y["config"]),
                     "base_config": x["config"], "other_config": y["config"]})
    changed = [r for r in rows if r["changed"]]
    by_family = defaultdict(list)
    for r in changed:
        by_family[r["family"]].append(r["change"])
    summary = {"shapes": len(rows), "changed": len(changed),
               "base_geomean": _geomean([r["base"] for r in rows]),
               "other_geomean": _geomean([r["other"] for r in rows]),
               "change_geomean": _geomean([r["change"] for r in rows]),
               "changed_geomean": _geomean([r["change"] for r in changed]),
               "unchanged_geomean": _geomean([r["change"] for r in rows if not r["changed"]]),
               "families": {name: (len(v), _geomean(v)) for name, v in sorted(by_family.items())}}
    return rows, summary


def _describe(config: dict) -> str:
    parts = [f"{config.get('tile_m')}x{config.get('tile_n')}"]
    parts += [f"{k}={config[k]}" for k in ("persistent", "split_k", "cluster_m", "cluster_n", "swap_ab")
              if config.get(k, _DEFAULTS[k]) != _DEFAULTS[k]]
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("other", type=Path)
    parser.add_argument("--top", type=int, default=15, help="best changed shapes listed after the worst")
    args = parser.parse_args(argv)
    records = [json.loads(path.read_text()) for path in (args.base, args.other)]
    seeds = [{s["seed"] for s in shapes(r["figures"]).values()} for r in records]
    if not all(seeds) or seeds[0] != seeds[1]:
        print(f"compare_random_runs: BASE and OTHER must be drawn-shape records of the same seed; got seeds "
              f"{sorted(seeds[0])} and {sorted(seeds[1])}", file=sys.stderr)
        return 2
    rows, summary = compare(records[0]["figures"], records[1]["figures"])
    changed = sorted((r for r in rows if r["changed"]), key=lambda r: r["change"])
    listed = changed if len(changed) <= 2 * args.top else changed[: args.top] + changed[-args.top:]
    for r in listed:
        print(f"{r['shape']:24s} {r['base']:.3f} -> {r['other']:.3f}  x{r['change']:.3f}  {r['family']:38s} "
              f"{_describe(r['base_config'])}  ->  {_describe(r['other_config'])}")
    print(f"\n{summary['shapes']} shapes of seed {sorted(seeds[0])[0]}: geomean vs cuBLAS "
          f"{summary['base_geomean']:.3f} -> {summary['other_geomean']:.3f} (change x{summary['change_geomean']:.3f}); "
          f"{summary['changed']} configurations changed, x{summary['changed_geomean']:.3f} there; the rest "
          f"x{summary['unchanged_geomean']:.3f} (run to run)")
    for name, (count, change) in summary["families"].items():
        print(f"  {name:44s} {count:3d} shapes  x{change:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
