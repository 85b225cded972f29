"""Which performance model picks GEMM configurations better: ours (mgpu_lab/kernels/gemm/model.py)
or NVIDIA's nvMatmulHeuristics (`pip install nvidia-matmul-heuristics`, its H200_SXM model, the
CUTLASS3 target). CPU only: both are scored on the timed records in benchmarks/results/.

- Ranking: for every group of 3+ alternatives timed against each other on one lease
  (`gemm_options_*.json`, read as `fit_gemm_model.option_samples` reads them), each model's
  fastest estimate is its pick; the score is how often the pick is within 3% of the measured
  best, and the measured time of the pick over the best (geomean, worst).
- Accuracy: log(measured / estimated) over every sample (the options, the random-shape picks of
  `gemm_random_*.json`, the tuned table's winners), after one fitted scale per model (a constant
  factor does not change a ranking), as an rms.

How our configurations map onto nvMatmulHeuristics' kernel description: CTA tile (tile_m,
tile_n, one 128-byte k-step), the ring's stages, split_k, the cluster (cluster_m x 1 for a
multicast pair, 1 x split_k for a split summed in the cluster), warp tile 64 x 64 x 32 and
instruction 64 x 8 x 16 (what it returns for Hopper itself); swap-AB as the transposed problem
(n, m, k). It has no notion of persistent, pingpong or stream-K blocks: those alternatives get the
estimate of the same tiles run one per block, so it cannot rank them against each other (ties
go to the first alternative of the group). A configuration it does not model (an estimate of 0:
tile widths such as 136 or 8, clusters of 1 x 6) counts as never picked, and is left out of the
accuracy.

Run:  python benchmarks/compare_gemm_models.py [--rows] [--target CUTLASS3|GENERIC]
Prints both scores and writes them as `gemm_model_comparison_<time>_<commit>.json` (under $OUT when
set): keys `<model>_options_within_3pct`, `<model>_options_pick_over_best_geomean`, `<model>_<set>_rms_log_error`
for model in (ours, nvmmh), and `drawn_rms_log_error_ours_vs_nvmmh` on the samples both model.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from common import write_record  # noqa: E402
from fit_gemm_model import Sample, option_samples, random_samples, rank_picks, table_samples  # noqa: E402

from mgpu_lab.kernels.gemm import model  # noqa: E402

PRECISION = {"bfloat16": "TST", "float8_e4m3fn": "QQTST"}  # inputs, compute f32, bf16 out


class Heuristics:
    """nvMatmulHeuristics' runtime estimate of one of our configurations (seconds -> us)."""

    def __init__(self, target: str = "CUTLASS3") -> None:
        import nvMatmulHeuristics as nvmmh

        self.nvmmh = nvmmh
        self.h = nvmmh.NvMatmulHeuristicsInterfaceEx(backend=nvmmh.NvMatmulHeuristicsTarget[target],
                                                     load_discovery_implicitly=True,
                                                     gpu=nvmmh.NvMatmulHeuristicsNvidiaGpu.H200_SXM)

    def estimate_us(self, p: model.Problem, config: dict) -> float:
        nvmmh, h = self.nvmmh, self.h
        swap = bool(config.get("swap_ab"))
        m, n = (p.n, p.m) if swap else (p.m, p.n)
        layout = nvmmh.NvMatmulHeuristicsMatmulLayout
        row = layout.NT_ROW_MAJOR if (p.transpose_b or swap) else layout.NN_ROW_MAJOR
        problem = h.makeNvMatmulHeuristicsProblem(m, n, p.k, row)
        precision = PRECISION[p.dtype]
        h._ensure_discovery_loaded(h.target, precision, row)
        tm, tn = config["tile_m"], config["tile_n"]
        split = config.get("split_k") or 1
        persistent = config.get("persistent", False)
        stages = config.get("stages") or model.ring_stages(tm, tn, p.dtype, persistent,
                                                           split > 1 and config.get("split_k_reduce") != "workspace")
        cfg = h.nvmmhKernelConfiguration()
        cfg.cta[:] = (tm, tn, model.SWIZZLE // model.ITEMSIZE[p.dtype])
        cfg.warp[:] = (64, 64, 32)
        cfg.instr[:] = (64, 8, 16)
        cfg.splitK = split
        cfg.loadStages = stages
        cfg.gridSwizzle = 1
        cfg.ctaOrder = 0
        cluster_m = config.get("cluster_m") or 1
        in_cluster = split > 1 and config.get("split_k_reduce", "cluster") == "cluster"
        cfg.cluster[:] = (cluster_m, split if in_cluster else 1)
        seconds = h.nvMatmulHeuristicsEstimateRuntime(h.handle, precision.encode("ascii"), int(h.target),
                                                      ctypes.byref(problem), ctypes.byref(cfg),
                                                      h.hardware_descriptor)
        return seconds * 1e6 if seconds > 0 else math.inf  # 0: a configuration it does not model


def accuracy(samples: list[Sample], estimate) -> dict:
    estimates = [estimate(s.problem, s.config) for s in samples]
    r = np.array([math.log(s.us / e) for s, e in zip(samples, estimates) if math.isfinite(e)])
    r -= r.mean()  # one scale per model
    return {"samples": len(r), "unmodelled": len(samples) - len(r), "rms_log_error": float(np.sqrt(np.mean(r * r))),
            "median_abs_error": float(np.exp(np.median(np.abs(r))) - 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", action="store_true", help="print every options group's pick/best")
    parser.add_argument("--target", default="CUTLASS3", choices=("GENERIC", "CUTLASS3"),
                        help="nvMatmulHeuristics' target library (its kernel family model)")
    args = parser.parse_args()
    results = HERE / "results"
    options = option_samples(results)
    drawn = random_samples(results)
    table = table_samples()
    heuristics = Heuristics(args.target)
    models = {"ours (model.py)": lambda p, c: model.estimate_us(p, c),
              f"nvMatmulHeuristics (H200_SXM, {args.target})": heuristics.estimate_us}
    print(f"{len(options)} timed alternatives in options groups; {len(drawn)} drawn-shape picks; {len(table)} table winners")
    figures: dict = {}
    for (name, estimate), key in zip(models.items(), ("ours", "nvmmh")):
        rank = rank_picks(options, estimate)
        if not rank["groups"]:
            raise SystemExit(f"{name} estimates none of the timed alternatives")
        figures.update({f"{key}_options_within_3pct": rank["within_3pct"], f"{key}_options_groups": rank["groups"],
                        f"{key}_options_pick_over_best_geomean": rank["pick_over_best_geomean"]})
        print(f"{name}:")
        print(f"  ranking: pick within 3% of the best in {rank['within_3pct']} of {rank['groups']} groups; "
              f"pick / best {rank['pick_over_best_geomean']:.3f} geomean, {rank['pick_over_best_max']:.3f} worst")
        for label, samples in (("options", options), ("drawn shapes", drawn), ("table", table)):
            acc = accuracy(samples, estimate)
            figures[f"{key}_{label.split()[0]}_rms_log_error"] = acc["rms_log_error"]
            figures[f"{key}_{label.split()[0]}_unmodelled"] = acc["unmodelled"]
            print(f"  accuracy on {label}: rms log error {acc['rms_log_error']:.3f} "
                  f"(median |error| {100 * acc['median_abs_error']:.1f}%, {acc['samples']} samples, one scale fitted"
                  f"{'; ' + str(acc['unmodelled']) + ' configurations it does not model' if acc['unmodelled'] else ''})")
        if name.startswith("ours"):  # the same samples as the other model's, for a like-for-like figure
            for label, samples in (("options", options), ("drawn shapes", drawn)):
                both = [x for x in samples if math.isfinite(heuristics.estimate_us(x.problem, x.config))]
                acc = accuracy(both, estimate)
                figures[f"ours_{label.split()[0]}_rms_log_error_where_nvmmh_models"] = acc["rms_log_error"]
                print(f"  accuracy on {label}, only what nvMatmulHeuristics models: rms log error "
                      f"{acc['rms_log_error']:.3f} ({acc['samples']} samples)")
        if args.rows:
            for row in rank["rows"]:
                print(f"    {row[0]:90s} {row[1]:3d} alternatives, pick/best {row[2]:.3f}")
    figures["drawn_rms_log_error_ours_vs_nvmmh"] = (figures["ours_drawn_rms_log_error_where_nvmmh_models"]
                                                    / figures["nvmmh_drawn_rms_log_error"])
    notes = {"nvmmh_target": args.target, "nvmmh_gpu": "H200_SXM", "inputs": "gemm_options_*, gemm_random_*, configs.json",
             "caveat": "ours was fitted on the options groups and the table (in-sample there); the drawn shapes are "
                       "held out for both; nvMatmulHeuristics ran without a discovery calibration to this kernel family "
                       "(that needs timed runs on the GPU)"}
    print(f"record: {write_record('gemm_model_comparison', figures, notes)}")


if __name__ == "__main__":
    main()
