"""Fit the GEMM performance model's constants (mgpu_lab/kernels/gemm/model.py) to the timed records
in benchmarks/results/, and report how well it ranks the recorded alternatives. CPU only.

Samples (each: a shape, a configuration, its measured time):
- `gemm_options_*.json`: every timed alternative of a shape (the names encode the configuration:
  `128x256_streamk_cluster_m2`, `256x136_swapab_split4`, ...), timed against each other on one lease
  (`bench_gemm_options.py --random N --seed S`: the model's alternatives on drawn shapes);
- `gemm_*.json` sweeps from --since on: each shape's configuration and our time;
- `mgpu_lab/kernels/gemm/configs.json`: the tuned winners' median times;
- `gemm_random_*.json` (with --random): each drawn shape's configuration and our time.

Fit: least squares on log time (model / measured), Nelder-Mead over the log of the constants.
Ranking: for every (options record, shape) with 3+ alternatives, whether the model's fastest
alternative is within 3% of the measured fastest, and the measured time of the model's pick over
the best (geomean).

TMA L2 promotion: rows off the 128-byte line run 8-17% faster at 128 bytes than at 256 (aligned
ones the same: gemm_options_2026-12-05T0558*), so a sample off the line counts only at the
promotion asked for (`--promotion`, default the library's); aligned ones count whatever their
record's. A record names its promotion (`tma_l2_promotion`, or a probe's `l2_promotion` note);
one that names none ran at 256 bytes, the default until 0136675.

Device (`--device`, default H200): only that GPU's records count (on_model_device), and the
tuned table's entries for it.

Run:  python benchmarks/fit_gemm_model.py [--device H100] [--since 2026-12-01T14] [--fit] [--iters 4000] [--promotion any] [--keep eff_one]
      python benchmarks/fit_gemm_model.py --device H100 --random --fold ac0951d --fold 444a85d   # cross-validate
Without --fit it scores the device's constants (model.constants_for: the built-in ones unless
model.DEVICE_CONSTANTS names a file for the GPU); with it, fits from them, prints the fitted Constants
too, and `--write PATH` writes them as JSON: `MGPU_LAB_GEMM_CONSTANTS=PATH` makes the library pick
with such a file (records name it), and naming it in DEVICE_CONSTANTS makes it a GPU's default --
only once its picks have been timed against the built-in constants' on fresh seeds (an H100 fit
that predicted times twice as well picked slower: gemm_constants/h100_fit2_0a55cfa.json). Scoring
reads that variable as the library does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from common import recorded_on, write_record  # noqa: E402
from gemm_sweep import bf16_problems, fp8_problems  # noqa: E402

from mgpu_lab.kernels.gemm import local_calibration, model  # noqa: E402
from mgpu_lab.kernels.gemm.configs import CONFIG_FILE, CONFIG_KEYS, kernel_options  # noqa: E402
from mgpu_lab.runtime.tma_descriptor import L2_PROMOTIONS, l2_promotion  # noqa: E402

DTYPES = {"bf16": "bfloat16", "fp8": "float8_e4m3fn"}
FLAGS = {"persistent": ("persistent", True), "pingpong": ("persistent", "pingpong"),
         "streamk": ("persistent", "stream_k"), "swapab": ("swap_ab", True),
         "workspace": ("split_k_reduce", "workspace"), "cluster": ("split_k_reduce", "cluster")}


LEGACY_PROMOTION = "L2_256B"  # records that name none: the default before 0136675 (2026-12-05)


@dataclasses.dataclass(frozen=True)
class Sample:
    problem: model.Problem
    config: dict
    us: float
    group: str  # samples of one group were timed against each other in one run
    drawn: bool = False  # a shape drawn at run time (bench_gemm_options --random), not the sweep's
    promotion: str = LEGACY_PROMOTION  # the TMA L2 promotion its kernels ran with (record_promotion)


def record_promotion(record: dict) -> str:
    """The TMA L2 promotion a record's kernels ran with: its `tma_l2_promotion`, else a probe's
    `l2_promotion` note, else 256 bytes."""
    return record.get("tma_l2_promotion") or (record.get("notes") or {}).get("l2_promotion") or LEGACY_PROMOTION


MODEL_DEVICE = "H200"  # model.CONSTANTS are an H200's (model.H200_CLUSTERS, DRAM bandwidth)


def on_model_device(record: dict, device: str = MODEL_DEVICE) -> bool:
    """Whether a record's times are the fitted device's (`--device`, the H200 by default) and of
    the kernels this library builds: records that name another GPU are left out (those that name
    none ran on the H200 before the field was written), and so are probes that built other
    kernels (main_kernels)."""
    return recorded_on(record, device) and main_kernels(record)


def main_kernels(record: dict) -> bool:
    """Whether a record timed the kernels this process builds: a probe that switched how they
    write C (MGPU_LAB_GEMM_SWAP_STORE, MGPU_LAB_GEMM_EPILOGUE_SLOTS) or how deep their default
    ring is (MGPU_LAB_GEMM_RING_SMEM, MGPU_LAB_GEMM_WIDE_STAGES) or how much smem they take
    (MGPU_LAB_GEMM_SMEM_PAD), named in the record, timed others, whatever it picked.
    Switched picks (model switches, constants) time the same kernels.
    A run from before the epilogue slots' default changed names no policy (it ran "even") and
    counts as main's: the change moves only tiles with an odd number of store boxes, by 1-2%
    (pieces.EPILOGUE_SLOTS), and the fit keeps its samples."""
    from mgpu_lab.kernels.gemm import pieces  # (loads MLIR: only when records are read)

    slots = record.get("gemm_epilogue_slots") or record.get("gemm_epilogue_slots_ran") or pieces.EPILOGUE_SLOTS
    return record.get("gemm_swap_store", pieces.SWAP_STORE) == pieces.SWAP_STORE and slots == pieces.EPILOGUE_SLOTS \
        and int(record.get("gemm_ring_smem") or pieces.SMEM_LIMIT) == pieces.RING_SMEM \
        and int(record.get("gemm_smem_pad") or 0) == pieces.SMEM_PAD \
        and int(record.get("gemm_wide_stages") or 0) == (pieces.WIDE_STAGES or 0)


def at_promotion(samples: list[Sample], wanted: str | None) -> tuple[list[Sample], list[Sample]]:
    """(samples that count at promotion `wanted`, the others): those timed at it, and those whose
    rows are all on the 128-byte line (the promotion did not change their times). None: all count."""
    def counts(s: Sample) -> bool:
        return wanted is None or s.promotion == wanted or model._misaligned_rows(s.problem) == (False, False)

    return [s for s in samples if counts(s)], [s for s in samples if not counts(s)]


def parse_option(name: str) -> dict | None:
    """bench_gemm_options.name_of inverted: '128x256_streamk_cluster_m2' (or '_cluster_n2') -> make_gemm kwargs."""
    head = re.match(r"(\d+)x(\d+)((?:_\w+)?)$", name)
    if not head:
        return None
    config: dict = {"tile_m": int(head[1]), "tile_n": int(head[2])}
    parts = head[3].split("_")[1:]
    i = 0
    while i < len(parts):
        part = parts[i]
        if part in FLAGS:
            if part == "cluster" and i + 1 < len(parts) and re.fullmatch(r"[mn]\d+", parts[i + 1]):
                config[f"cluster_{parts[i + 1][0]}"] = int(parts[i + 1][1:])
                i += 1
            else:
                key, value = FLAGS[part]
                config[key] = value
        elif (m := re.fullmatch(r"(split|stages|group|team)(\d+)", part)):
            config[{"split": "split_k", "stages": "stages", "group": "group_m", "team": "team_m"}[m[1]]] = int(m[2])
        else:
            return None
        i += 1
    return config


def _problems(kind: str) -> dict[str, bool]:
    """{shape key: transpose_b} of the sweep's problems (squares in both layouts: B (k, n) first)."""
    out: dict[str, bool] = {}
    for p in (bf16_problems() if kind == "bf16" else fp8_problems()):
        out.setdefault(p.key, p.transpose_b)
    return out


def option_samples(results: Path, device: str = MODEL_DEVICE) -> list[Sample]:
    samples = []
    for path in sorted(results.glob("gemm_options_*.json")):
        record = json.loads(path.read_text())
        if not on_model_device(record, device):
            continue
        figures, drawn = record["figures"], bool((record.get("notes") or {}).get("random"))
        promotion = record_promotion(record)
        for key, tflops in figures.items():
            m = re.match(r"gemm_options_(bf16|fp8)_(\d+)x(\d+)x(\d+)_(.*)_tflops$", key)
            if not m or m[5] in ("cublas", "scaled_mm") or not tflops:
                continue
            # The default (the model's pick on drawn shapes) records its configuration beside it.
            config = figures.get(f"gemm_options_{m[1]}_{m[2]}x{m[3]}x{m[4]}_default_config") \
                if m[5] == "default" else parse_option(m[5])
            if not config:
                continue
            size = (int(m[2]), int(m[3]), int(m[4]))
            # Drawn shapes (--random) record B's layout; the sweep's are looked up.
            transpose = figures.get(f"gemm_options_{m[1]}_{m[2]}x{m[3]}x{m[4]}_transpose_b")
            if transpose is None:
                transpose = _problems(m[1]).get(f"{size[0]}x{size[1]}x{size[2]}", True)
            p = model.Problem(*size, transpose_b=transpose, dtype=DTYPES[m[1]])
            us = 2.0 * size[0] * size[1] * size[2] / (tflops * 1e6)
            samples.append(Sample(p, config, us, f"{path.name}:{m[1]}_{m[2]}x{m[3]}x{m[4]}", drawn, promotion))
    return samples


def sweep_samples(results: Path, since: str, device: str = MODEL_DEVICE) -> list[Sample]:
    samples = []
    for path in sorted(results.glob("gemm_2026-*.json")):
        record = json.loads(path.read_text())
        if record.get("time_utc", "") < since or not on_model_device(record, device):
            continue
        figures = record["figures"]
        for key, config in figures.items():
            m = re.match(r"gemm_(bf16|fp8)_(\d+)x(\d+)x(\d+)(_nt)?_config$", key)
            if not m or not isinstance(config, dict):
                continue
            tflops = figures.get(key.replace("_config", "_ours_tflops"))
            if not tflops:
                continue
            size = (int(m[2]), int(m[3]), int(m[4]))
            transpose = bool(m[5]) or _problems(m[1]).get(f"{size[0]}x{size[1]}x{size[2]}", True) \
                if size[0] != size[1] or size[1] != size[2] else bool(m[5]) or m[1] == "fp8"
            settings = kernel_options(config)
            p = model.Problem(*size, transpose_b=transpose, dtype=DTYPES[m[1]])
            samples.append(Sample(p, settings, 2.0 * size[0] * size[1] * size[2] / (tflops * 1e6),
                                  f"{path.name}:{m[0]}", promotion=record_promotion(record)))
    return samples


def random_samples(results: Path, fp8: bool = False, device: str = MODEL_DEVICE) -> list[Sample]:
    """The random-shape benchmark's shapes: bf16 (`gemm_random_*.json`, both layouts), or with
    `fp8` FP8 with per-tensor scales (`gemm_fp8_random_*.json`, B (n, k); the block-scaled kernel
    has no configuration to choose): each shape's configuration (the model's pick) and our
    kernel-only time. Fitting on the bf16 ones makes the constants answer for the shapes users
    bring, not the tuned sweep's; the FP8 ones are left out of the fit and scored as a held-out
    check, and a new seed is the other."""
    samples = []
    patterns = (("gemm_random_2026-*.json", r"gemm_random_seed(\d+)_(\d+)x(\d+)x(\d+)_(n[nt])_config$", "bfloat16"),
                ("gemm_fp8_random_2026-*.json", r"gemm_fp8_tensor_random_seed(\d+)_(\d+)x(\d+)x(\d+)()_config$",
                 "float8_e4m3fn"))
    for pattern, key_re, dtype in patterns[1:] if fp8 else patterns[:1]:
        for path in sorted(results.glob(pattern)):
            record = json.loads(path.read_text())
            if not on_model_device(record, device):
                continue
            figures, promotion = record["figures"], record_promotion(record)
            for key, config in figures.items():
                m = re.match(key_re, key)
                us = figures.get(key.replace("_config", "_ours_us"))
                if not m or not isinstance(config, dict) or not us:
                    continue
                settings = kernel_options(config)
                p = model.Problem(int(m[2]), int(m[3]), int(m[4]), transpose_b=m[5] != "nn", dtype=dtype)
                samples.append(Sample(p, settings, float(us), f"{path.name}:{m[0]}", promotion=promotion))
    return samples


def table_samples(device: str = MODEL_DEVICE) -> list[Sample]:
    samples = []
    devices = json.loads(CONFIG_FILE.read_text())["devices"]
    tables = [entry for name, entry in devices.items() if device in name]
    for key, entry in (tables[0] if tables else {}).items():
        dtype, layout, size = key.split("_", 2) if not key.startswith("float8") else \
            ("float8_e4m3fn", *key[len("float8_e4m3fn_"):].split("_", 1))
        m, n, k = (int(x) for x in size.split("x"))
        keys = ("tile_m", "tile_n", "stages", "group_m", "persistent", "split_k", "split_k_reduce", "cluster_m",
                "swap_ab")
        config = {x: entry[x] for x in keys if x in entry}
        samples.append(Sample(model.Problem(m, n, k, transpose_b=layout == "nt", dtype=dtype), config,
                              entry["median_ms"] * 1e3, f"table:{key}"))
    return samples


def split_held_out(samples: list[Sample], texts: list[str]) -> tuple[list[Sample], list[Sample]]:
    """(samples to fit on, samples held out): held out are those whose record file name (the
    group's part before ':') contains any of `texts`."""
    def held(s: Sample) -> bool:
        return any(text in s.group.split(":", 1)[0] for text in texts)

    return [s for s in samples if not held(s)], [s for s in samples if held(s)]


def residuals(samples: list[Sample], c: model.Constants) -> np.ndarray:
    return np.array([math.log(model.estimate_us(s.problem, s.config, c) / s.us) for s in samples])


def _scheme(config: dict) -> dict:
    """A configuration as model.candidates writes it: make_gemm's keys, persistent=False left out."""
    return {k: config[k] for k in CONFIG_KEYS if k in config and not (k == "persistent" and config[k] is False)}


def candidate_order(p: model.Problem, config: dict) -> float:
    """Where `config` stands among model.candidates(p): the model's own tie-break (model.ranked
    keeps the earlier of two equal estimates, e.g. 64 x 128 over 128 x 64); inf if absent."""
    want = _scheme(config)
    for i, candidate in enumerate(model.candidates(p)):
        if _scheme(candidate) == want:
            return i
    return math.inf


def ranking(samples: list[Sample], c: model.Constants, tolerance: float = 0.03) -> dict:
    """Per group of 3+ alternatives timed together: is the model's pick within `tolerance` of
    the best, and its measured time over the best (ties broken as model.ranked breaks them)."""
    return rank_picks(samples, lambda p, config: model.estimate_us(p, config, c), tolerance, order=candidate_order)


def rank_picks(samples: list[Sample], estimate, tolerance: float = 0.03, order=None) -> dict:
    """`ranking` for any `estimate(problem, config) -> us`: its fastest alternative of each group
    is its pick (ties: the lowest `order(problem, config)`, else the group's first); an infinite
    estimate (a configuration the estimator cannot describe) is never picked, and a group it
    describes none of is left out."""
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        groups.setdefault(s.group, []).append(s)
    hits, losses, rows = 0, [], []
    for name, group in groups.items():
        if len(group) < 3:
            continue
        best = min(s.us for s in group)
        times = [estimate(s.problem, s.config) for s in group]
        if not any(math.isfinite(t) for t in times):
            continue
        fastest = min(times)
        tied = [i for i, t in enumerate(times) if t <= fastest * (1 + 1e-9)]
        if order is not None and len(tied) > 1:
            tied.sort(key=lambda i: order(group[i].problem, group[i].config))
        pick = group[tied[0]]
        hits += pick.us <= best * (1 + tolerance)
        losses.append(pick.us / best)
        rows.append((name, len(group), pick.us / best))
    n = len(losses)
    return {"groups": n, "top_pick_within_3pct": hits / n if n else float("nan"), "within_3pct": hits,
            "pick_over_best_geomean": math.exp(sum(map(math.log, losses)) / n) if n else float("nan"),
            "pick_over_best_max": max(losses) if losses else float("nan"), "rows": rows}


def nelder_mead(f, x0: np.ndarray, iters: int, step: float = 0.15) -> np.ndarray:
    """Minimize f from x0 (a plain Nelder-Mead: no scipy in the project's environment)."""
    n = len(x0)
    simplex = [x0] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0]] + [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    return simplex[int(np.argmin(values))]


BOUNDS = {"eff_two": (0.5, 1.0), "eff_one": (0.3, 1.0), "eff_pingpong": (0.5, 1.0), "multicast": (0.95, 1.1),
          "cluster_fill": (0.3, 1.0), "misaligned": (1.0, 4.0), "l2_bw": (4e6, 40e6), "l2_bw_misaligned": (2e6, 40e6),
          "dram_bw": (2.4e6, 4.2e6), "sm_bw": (20e3, 200e3), "smem_eff": (0.3, 1.0),
          "split_stream_k": (1.0, 2.0)}  # physical limits the fit must keep
MEASURED = ("copy_bw",)  # constants a device measures (the copy rate): the fit keeps the start's


def fit(samples: list[Sample], options: list[Sample], c0: model.Constants, iters: int,
        rank_weight: float = 4.0, keep: tuple[str, ...] = ()) -> model.Constants:
    """Least squares on log time, plus (weight `rank_weight`) the log times of each options group
    relative to the group's mean (what ranking alternatives needs), within BOUNDS; MEASURED
    constants and those named in `keep` stay c0's."""
    names = [f.name for f in dataclasses.fields(model.Constants)]
    x0 = np.log(np.array(c0.as_vector()))

    def constants(x: np.ndarray) -> model.Constants:
        fitted = model.Constants.from_vector([float(v) for v in np.exp(x)])
        return dataclasses.replace(fitted, **{name: getattr(c0, name) for name in (*MEASURED, *keep)})
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(options):
        groups.setdefault(s.group, []).append(i)
    members = [np.array(g) for g in groups.values() if len(g) >= 3]

    def loss(x: np.ndarray) -> float:
        values = np.exp(x)
        penalty = 0.0
        for name, (lo, hi) in BOUNDS.items():
            v = values[names.index(name)]
            penalty += 10.0 * (max(0.0, math.log(lo / v)) + max(0.0, math.log(v / hi))) ** 2
        c = constants(x)
        r = residuals(samples, c)
        ro = residuals(options, c)
        relative = [ro[g] - ro[g].mean() for g in members]
        rel = float(np.mean(np.concatenate(relative) ** 2)) if relative else 0.0
        return float(np.mean(r * r)) + rank_weight * rel + penalty

    return constants(nelder_mead(loss, x0, iters))


def score(samples: list[Sample], options: list[Sample], c: model.Constants) -> tuple[dict, dict]:
    """(the constants' errors on `samples` and ranking of `options`' groups, the ranking with its rows)."""
    r = residuals(samples, c) if samples else np.zeros(0)
    rank = ranking(options, c) if options else {}
    out = {"samples": len(samples), "rms_log_error": float(np.sqrt(np.mean(r * r))) if len(r) else float("nan"),
           "median_abs_error": float(np.exp(np.median(np.abs(r))) - 1) if len(r) else float("nan"),
           **{k: v for k, v in rank.items() if k != "rows"}}
    return out, rank


def report(label: str, samples: list[Sample], options: list[Sample], c: model.Constants) -> dict:
    out, rank = score(samples, options, c)
    print(f"{label}: {json.dumps(out)}")
    return rank


family = local_calibration.config_family  # --by-family's kinds: the ones the local calibration pools by


def family_bias(samples: list[Sample], c: model.Constants, least: int = 4) -> list[tuple[str, int, float, float]]:
    """(family, samples, geomean and 10th percentile of estimate / measured time) per family of
    at least `least` samples, most optimistic first: a family the model rates faster than the
    rest (a lower ratio than theirs) wins picks it then loses on the GPU."""
    ratios: dict[str, list[float]] = {}
    for s in samples:
        try:
            estimate = model.estimate_us(s.problem, s.config, c)
        except (ValueError, KeyError, ZeroDivisionError):
            continue
        ratios.setdefault(family(s.config), []).append(estimate / s.us)
    rows = []
    for name, values in ratios.items():
        if len(values) >= least:
            values.sort()
            rows.append((name, len(values), math.exp(sum(map(math.log, values)) / len(values)),
                         values[len(values) // 10]))
    return sorted(rows, key=lambda row: row[2])


def groups_to_rank(options: list[Sample], rank_drawn: bool) -> list[Sample]:
    """The options groups a fit ranks: only the drawn shapes' with `rank_drawn` (all where none is drawn)."""
    drawn = [s for s in options if s.drawn] if rank_drawn else options
    return drawn or options


def cross_validate(samples: list[Sample], options: list[Sample], folds: list[list[str]], c0: model.Constants,
                   iters: int, rank_drawn: bool = True, keep: tuple[str, ...] = ()) -> list[dict]:
    """Per fold (texts of record file names): fit from c0 without the fold's samples, then score
    the fold's timed groups and samples with c0 and with the fit. What a change of constants or
    of the model's terms does to picks it was not fitted on, without a GPU."""
    rows = []
    for texts in folds:
        train, test = split_held_out(samples, texts)
        train_options, test_options = split_held_out(options, texts)
        fitted = fit(train, groups_to_rank(train_options, rank_drawn), c0, iters, keep=keep)
        row = {"fold": ",".join(texts), "samples": len(test)}
        for label, c in (("start", c0), ("fitted", fitted)):
            out, _ = score(test, test_options, c)
            row.update({"groups": out.get("groups", 0), f"within_3pct_{label}": out.get("within_3pct", 0),
                        f"pick_over_best_{label}": out.get("pick_over_best_geomean", float("nan")),
                        f"rms_{label}": out["rms_log_error"]})
        print(json.dumps(row))
        rows.append(row)
    return rows


def local_errors(samples: list[Sample], c: model.Constants) -> list[tuple[Sample, float]]:
    """(sample, log(measured / estimated)) of the 16-bit samples `c` can estimate: what a local
    calibration learns from."""
    out = []
    for s in samples:
        if s.problem.dtype not in local_calibration.SIXTEEN_BIT:
            continue
        try:
            out.append((s, math.log(s.us / model.estimate_us(s.problem, s.config, c))))
        except (ValueError, KeyError, ZeroDivisionError):
            continue
    return out


def local_fit(errors: list[tuple[Sample, float]], c: model.Constants, bandwidth: float, shrink: float,
              source: str = "") -> local_calibration.LocalCalibration:
    return local_calibration.from_samples(
        c, [(s.config, s.problem.m, s.problem.n, s.problem.k, s.problem.transpose_b, e) for s, e in errors],
        bandwidth, shrink, source)


def record_commit(s: Sample) -> str:
    """The commit a sample's record names (its file name's last part)."""
    return s.group.split(":", 1)[0].removesuffix(".json").rsplit("_", 1)[-1]


def local_cross_validation(errors: list[tuple[Sample, float]], options: list[Sample], c: model.Constants,
                           bandwidth: float, shrink: float) -> dict:
    """Per commit of the 16-bit timed groups: a local calibration from every other commit's samples
    but none of that commit's shapes, then that commit's groups ranked by the model alone and
    scaled by it. Pick over best and within 3% over all groups, both ways."""
    rows: dict[str, list[float]] = {"model": [], "local": []}
    options = [s for s in options if s.problem.dtype in local_calibration.SIXTEEN_BIT]
    for commit in sorted({record_commit(s) for s in options}):
        test = [s for s in options if record_commit(s) == commit]
        shapes = {(s.problem.m, s.problem.n, s.problem.k) for s in test}
        local = local_fit([(s, e) for s, e in errors if record_commit(s) != commit
                           and (s.problem.m, s.problem.n, s.problem.k) not in shapes], c, bandwidth, shrink)

        def scaled(p: model.Problem, config: dict) -> float:
            return model.estimate_us(p, config, c) * local.factor(p.m, p.n, p.k, p.transpose_b, config)

        rows["model"] += [r[2] for r in ranking(test, c)["rows"]]
        rows["local"] += [r[2] for r in rank_picks(test, scaled, order=candidate_order)["rows"]]
    out = {"groups": len(rows["model"]), "bandwidth": bandwidth, "shrink": shrink}
    for label, losses in rows.items():
        losses.sort()
        out.update({f"pick_over_best_{label}": math.exp(sum(map(math.log, losses)) / len(losses)) if losses else None,
                    f"within_3pct_{label}": sum(x <= 1.03 for x in losses),
                    f"pick_over_best_p90_{label}": losses[int(0.9 * len(losses))] if losses else None,
                    f"pick_over_best_max_{label}": losses[-1] if losses else None})
    return out


def cv_figures(rows: list[dict], device: str) -> dict:
    """The record's figures of a cross-validation: per fold and over every held-out group (the
    geomean of pick over best, weighted by groups)."""
    figures: dict = {}
    for row in rows:
        slug = re.sub(r"\W+", "_", row["fold"])[:40]
        for key in ("groups", "samples", "within_3pct_start", "within_3pct_fitted", "pick_over_best_start",
                    "pick_over_best_fitted", "rms_start", "rms_fitted"):
            figures[f"gemm_model_cv_{device}_{slug}_{key}"] = row[key]
    counted = [row for row in rows if row["groups"]]
    groups = sum(row["groups"] for row in counted)
    if groups:
        def pooled(label: str) -> float:
            return math.exp(sum(row["groups"] * math.log(row[f"pick_over_best_{label}"]) for row in counted) / groups)

        figures[f"gemm_model_cv_{device}_groups"] = groups
        figures[f"gemm_model_cv_{device}_within_3pct_fitted_vs_start"] = \
            [sum(row["within_3pct_fitted"] for row in counted), sum(row["within_3pct_start"] for row in counted)]
        figures[f"gemm_model_cv_{device}_pick_over_best_fitted"] = pooled("fitted")
        figures[f"gemm_model_cv_{device}_pick_over_best_start"] = pooled("start")
        figures[f"gemm_model_cv_{device}_pick_over_best_fitted_vs_start"] = pooled("fitted") / pooled("start")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--since", default="2026-12-01T14", help="sweep records from this UTC time on")
    parser.add_argument("--fit", action="store_true", help="fit the constants (else score model.CONSTANTS)")
    parser.add_argument("--iters", type=int, default=3000)
    parser.add_argument("--rows", action="store_true", help="print every ranking group")
    parser.add_argument("--by-family", action="store_true",
                        help="print the model's estimate / measured time per kind of configuration over the "
                             "options samples (which kinds it rates too fast), then stop")
    parser.add_argument("--rank-drawn", action=argparse.BooleanOptionalAction, default=True,
                        help="rank only the drawn shapes' groups in the fit (all groups still count in the "
                             "least squares); on the 2026-12-04 records a fit so ranked picked 1.033x / 1.042x "
                             "the best on the other seed's held-out groups, against 1.039x / 1.048x ranking all")
    parser.add_argument("--random", action=argparse.BooleanOptionalAction, default=False,
                        help="also fit on the random-shape benchmark's records (gemm_random_*.json): they hold "
                             "only the model's picks, no alternatives to rank, but 265 of their 592 shapes have "
                             "rows off the 128-byte line; model.CONSTANTS are fitted with it (on the 2026-12-04 records: "
                             "57 of 78 picks within 3%% of the best, against 56 without)")
    parser.add_argument("--promotion", default=l2_promotion(), choices=[*L2_PROMOTIONS, "any"],
                        help="count samples off the 128-byte line only if timed at this TMA L2 promotion "
                             "(default: the library's, %(default)s); any: all of them")
    parser.add_argument("--write", metavar="PATH", help="with --fit: write the fitted constants as JSON, the file "
                                                      "MGPU_LAB_GEMM_CONSTANTS=PATH makes the library pick with")
    parser.add_argument("--hold-out", action="append", default=[], metavar="TEXT",
                        help="leave out of the fit every sample whose record file name contains TEXT (e.g. "
                             "2026-12-05T0227: one seed's run) and score the constants on them apart; repeatable")
    parser.add_argument("--device", default=MODEL_DEVICE, choices=sorted(model.DEVICE_CONSTANTS),
                        help="fit and score on this GPU's records only (default: %(default)s, whose "
                             "constants model.py holds)")
    parser.add_argument("--fold", action="append", default=[], metavar="TEXTS",
                        help="cross-validate instead of one fit: per fold (comma-separated texts of record "
                             "file names, e.g. 444a85d or 1349aa3,8ea5c74), fit from the device's constants "
                             "without its records (and every --hold-out's), score its timed groups with both; "
                             "repeatable; writes gemm_model_cv_<time>_<commit>.json")
    parser.add_argument("--keep", action="append", default=[], metavar="NAME",
                        help="hold this constant at the start's value (e.g. eff_one, set by an A / B rather than "
                             "the records); repeatable")
    parser.add_argument("--local-cv", action="store_true",
                        help="cross-validate a local calibration (mgpu_lab/kernels/gemm/local_calibration.py) on "
                             "the device's constants: per commit, learnt without its records' samples and shapes, "
                             "then its timed groups ranked with and without it; writes "
                             "gemm_local_cv_<time>_<commit>.json")
    parser.add_argument("--write-local", metavar="PATH",
                        help="write a local calibration learnt from every timed 16-bit sample (options and drawn "
                             "picks at --promotion) against the device's constants, e.g. "
                             "mgpu_lab/kernels/gemm/h200_local.json")
    parser.add_argument("--bandwidth", type=float, default=0.5,
                        help="the local calibration's kernel width in log-shape units")
    parser.add_argument("--shrink", type=float, default=1.0, help="the local calibration's pull toward no correction")
    args = parser.parse_args()
    fields = [f.name for f in dataclasses.fields(model.Constants)]
    unknown = [name for name in args.keep if name not in fields]
    if unknown:
        parser.error(f"--keep: expected names of model.Constants ({', '.join(fields)}), got {', '.join(unknown)}")
    keep = tuple(args.keep)
    results = HERE / "results"
    options = option_samples(results, args.device)
    samples = options + sweep_samples(results, args.since, args.device) + table_samples(args.device)
    if args.random:
        samples += random_samples(results, device=args.device)
    wanted = None if args.promotion == "any" else args.promotion
    samples, other = at_promotion(samples, wanted)
    options, _ = at_promotion(options, wanted)
    samples, kept_out = split_held_out(samples, args.hold_out)
    options, options_out = split_held_out(options, args.hold_out)
    print(f"{len(options)} option samples, {len(samples)} in all" + (f", {len(kept_out)} held out" if kept_out else "")
          + (f"; {len(other)} off the 128-byte line left out: timed at another TMA L2 promotion than "
             f"{wanted} (--promotion any counts them)" if other else ""))
    c = model.constants_for(args.device)  # the device's calibration (the variable's file, where set)
    label = f"{args.device} constants ({model.calibration_of(args.device)})"
    if args.by_family:
        print(f"{label}: estimate / measured per family, most optimistic first")
        for name, count, geomean, p10 in family_bias(options, c):
            print(f"  {name:40s} {count:4d} samples  geomean {geomean:.3f}  p10 {p10:.3f}")
        return
    if args.local_cv or args.write_local:
        pool, _ = at_promotion(options + random_samples(results, device=args.device), wanted)
        errors = local_errors(pool, c)
        if args.local_cv:
            figures = {f"gemm_local_cv_{key}": value for key, value in
                       local_cross_validation(errors, options, c, args.bandwidth, args.shrink).items()}
            print(json.dumps(figures, indent=1))
            notes = {"device": args.device, "constants": label, "promotion": args.promotion,
                     "what": "per commit: a local calibration learnt without its samples and shapes; its 16-bit "
                             "timed groups ranked by the model alone (model) and scaled by it (local)"}
            print(f"wrote {write_record('gemm_local_cv', figures, notes)}")
        if args.write_local:
            local = local_fit(errors, c, args.bandwidth, args.shrink,
                              f"fit_gemm_model.py --write-local: {len(errors)} samples of {args.device} records, {label}")
            Path(args.write_local).write_text(json.dumps(local.to_json()) + "\n")
            print(f"wrote {args.write_local}: {len(errors)} samples in {len(local.points)} kinds")
        return
    if args.fold:
        folds = [[text for text in fold.split(",") if text] for fold in args.fold]
        rows = cross_validate(samples, options, folds, c, args.iters, args.rank_drawn, keep)
        figures = cv_figures(rows, args.device.lower())
        path = write_record("gemm_model_cv", figures, {
            "fitted_device": args.device, "start": model.calibration_of(args.device), "folds": args.fold,
            "held_out_of_every_fit": args.hold_out, "kept": list(keep), "iters": args.iters, "random": args.random,
            "promotion": args.promotion, "what": "per fold: fitted from `start` without the fold's records, "
            "its timed groups ranked with `start` and with the fit (within 3% of the best; pick over best)"})
        print(f"wrote {path}")
        return
    rank = report(label, samples, options, c)
    held_out, _ = at_promotion(random_samples(results, fp8=True, device=args.device), wanted)
    report(f"{label} on FP8 drawn picks (not fitted on)", held_out, [], c)
    if kept_out:
        report(f"{label} on the held-out records", kept_out, options_out, c)
    if args.fit:
        c = fit(samples, groups_to_rank(options, args.rank_drawn), c, args.iters, keep=keep)
        rank = report("fitted", samples, options, c)
        report("fitted on FP8 drawn picks (not fitted on)", held_out, [], c)
        if kept_out:
            report("fitted on the held-out records", kept_out, options_out, c)
        print(c)
        if args.write:
            Path(args.write).write_text(json.dumps(dataclasses.asdict(c), indent=1) + "\n")
            print(f"wrote {args.write}")
    if args.rows:
        for row in rank["rows"]:
            print(f"  {row[0]:90s} {row[1]:3d} alternatives, pick/best {row[2]:.3f}")


if __name__ == "__main__":
    main()
