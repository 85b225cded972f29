"""GEMM configurations against each other and the vendor library: the measurements behind the
tuned table's choices (block scheme, tile shape), rerunnable for any sweep problem.

For each problem, every candidate configuration (make_gemm / make_fp8_gemm keyword arguments; {}
is what the tuned table or heuristic picks) and the peer (torch.matmul for bf16, torch._scaled_mm
for FP8) run in the same rounds, the order reversed every other round (A B C, C B A, ...), each
block a run of launches queued behind a blocking kernel with CUDA events around each launch
(gemm_sweep.blocking_timer), inputs rotating through sets larger than L2. Every candidate's
output is poisoned (NaN), then checked against a float32 matmul before it is timed.

Keys: `gemm_options_bf16_4096x14336x4096_128x256_persistent_vs_cublas` (peer ms / candidate ms;
FP8: `_vs_scaled_mm`) and `..._vs_default` (the table's pick, ms / candidate ms). SM clock and
power in the record's `gpu`.

Run on a GPU machine:  python benchmarks/bench_gemm_options.py [--only bf16_4096x14336x4096,...] [--rounds N]

`--random N --seed S [--top K]` times the model's alternatives on bf16 shapes drawn at run time
instead (`gemm_random.random_problems`: the same distribution and seed as `bench_gemm.py
--random`, the tuned table's shapes dropped and the table off): the default is the model's pick,
the candidates its next K-1 and the fastest of every family it ranks (one tile per block,
persistent, pingpong, stream-K, multicast, cluster and workspace split-K, swap-AB). These are the
samples `fit_gemm_model.py` calibrates and validates the model with on shapes nobody tuned for;
each problem also records `..._transpose_b`, B's layout.

`--shapes 2048x5632x2048,129x28672x4096:nn` times the model's alternatives on shapes named on
the command line instead (a model's layers, e.g. the HF benchmark's prefill shapes; B (n, k)
unless `:nn`).

`--versus FILE` (with `--random N --seed 86-93` or `--shapes`) is an A / B of a calibration under
trial against the library's: per shape it times only the library's pick ("default") and the pick
of the model with FILE's constants (and `--offer`'s switches), and only on the shapes where the two
differ, so a change that moves a few picks in hundreds is timed on those few. Keys add
`..._versus_pick` (the trial's configuration) and `gemm_options_versus_moved` / `_drawn` /
`_geomean_vs_default` (trial over library, above 1 where the trial is faster).

Writes `gemm_options_<time>_<commit>.json` (under $OUT when set) and prints a table last.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import numpy as np
from common import GpuSampler, interleaved_runs, parse_shapes, table, write_record
from gemm_sweep import Problem, bf16_problems, blocking_timer, cupy_view, fp8_problems, iterations, operand_sets

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.kernels.gemm import make_gemm
from mgpu_lab.kernels.gemm.fp8 import make_fp8_gemm
from mgpu_lab.kernels.gemm.model import OFFERS as OFFER_NAMES

TOLERANCE = {"bf16": 1e-2, "fp8": 2e-2}
FP8_SCALES = (0.05, 0.02)


def _tiles(tile_m: int, tile_n: int, persistent: bool | str = False, **more) -> dict:
    return {"tile_m": tile_m, "tile_n": tile_n, "persistent": persistent, **more}


def _split(tile_m: int, tile_n: int, split_k: int, **more) -> dict:
    return {"tile_m": tile_m, "tile_n": tile_n, "split_k": split_k, **more}


def _swap(tile_m: int, tile_n: int, split_k: int = 1, **more) -> dict:
    """C.T = B @ A.T: tile_m over B's rows (n), tile_n over A's (m)."""
    return {"tile_m": tile_m, "tile_n": tile_n, "split_k": split_k, "swap_ab": True, **more}


WORKSPACE = {"split_k_reduce": "workspace"}  # the table's split, summed by a second kernel
PERSISTENT = [_tiles(128, 256, True), _tiles(256, 128, True), _tiles(128, 128, "pingpong")]
MULTICAST = [_tiles(128, 256, True, cluster_m=2), _tiles(256, 128, True, cluster_m=2)]
GROUPS = [_tiles(128, 256, True, group_m=g) for g in (2, 4, 16)]
ONE_TILE = [_tiles(128, 256), _tiles(256, 128)]
STREAM_K = [_tiles(128, 256, "stream_k"), _tiles(128, 256, "stream_k", cluster_m=2), _tiles(256, 128, "stream_k")]
# (dtype, problem key, candidates besides the default)
BIG = [_tiles(128, 256), _tiles(128, 256, True)] + MULTICAST + GROUPS + STREAM_K
CASES = [
    ("bf16", "4096x14336x4096", BIG + [_tiles(256, 128, True), _tiles(128, 128, "pingpong")]),
    ("bf16", "8192x8192x2048", BIG + [_tiles(256, 128, True), _tiles(128, 128, "pingpong")]),
    ("bf16", "16384x6144x4096", BIG + [_tiles(256, 128, True)]),
    ("bf16", "4096x28672x4096", BIG),
    ("bf16", "8192x8192x8192", BIG),
    ("bf16", "4096x4096x4096", BIG + [_tiles(256, 128)]),
    ("bf16", "4000x4000x4000", BIG),
    ("bf16", "16384x16384x16384", [_tiles(128, 256, True), _tiles(128, 256, True, cluster_m=2),
                                   _tiles(128, 256, "stream_k", cluster_m=2), _tiles(256, 128, True, cluster_m=2),
                                   _tiles(128, 256, True, group_m=16)]),
    ("bf16", "1024x6144x4096", [_tiles(128, 256), _tiles(128, 128, "pingpong"), _tiles(128, 128, True),
                                _tiles(128, 256, "stream_k"), _tiles(128, 128, "stream_k"),
                                _tiles(128, 256, "stream_k", cluster_m=2), _tiles(256, 128, "stream_k"),
                                _tiles(128, 192), _tiles(128, 192, True), _tiles(64, 192, "pingpong"),
                                _tiles(128, 192, "stream_k")]),
    ("bf16", "2048x2048x8192", [_tiles(256, 128), _tiles(256, 128, "stream_k"), _tiles(128, 256, "stream_k"),
                                _tiles(128, 128, "stream_k"), _tiles(256, 128, True, cluster_m=2),
                                _tiles(128, 256, True, cluster_m=2)]),
    ("bf16", "1024x8192x8192", [_tiles(128, 256, True)] + STREAM_K),
    ("bf16", "1024x4096x14336", [_tiles(128, 256), _tiles(128, 256, "stream_k"), _tiles(256, 128, "stream_k"),
                                 _tiles(128, 256, "stream_k", cluster_m=2), _tiles(256, 128, True, cluster_m=2),
                                 _tiles(128, 256, True, cluster_m=2)]),
    ("bf16", "2048x2048x2048", [_tiles(64, 256, "pingpong"), _tiles(128, 256, "stream_k"),
                                _tiles(128, 128, "stream_k")]),
    ("bf16", "129x4096x4104", [_split(256, 128, 3), _swap(128, 144, 3), _swap(128, 136, 3), _swap(128, 136, 2),
                               _swap(64, 136, 2), _swap(128, 144, 2), _swap(256, 136, 3), _swap(256, 136, 4),
                               _swap(256, 136, 5), _swap(256, 136, 6), _swap(256, 144, 4), _swap(64, 72),
                               _swap(64, 72, stages=12), _swap(128, 72), _swap(64, 72, 2), _swap(64, 80)]),
    ("bf16", "16x6144x4096", [_split(64, 128, 2), _split(64, 96, 2), _swap(64, 16), _swap(64, 16, 2),
                              _swap(128, 16, 2), _swap(128, 16, 3), _swap(64, 16, 1, stages=16)]),
    ("bf16", "16x4096x14336", [_split(64, 128, 4, **WORKSPACE), _split(64, 64, 2), _swap(64, 16, 2),
                               _swap(128, 16, 4), _swap(64, 16, 2, stages=16)]),
    ("bf16", "16x10240x8192", [_split(64, 256, 3, **WORKSPACE), _split(64, 160, 2), _swap(128, 16, 2),
                               _swap(64, 16), _swap(64, 16, 1, stages=16)]),
    ("bf16", "16x28672x4096", [_split(64, 256, 1), _split(64, 224, 1), _swap(64, 16), _swap(128, 16),
                               _swap(256, 16), _tiles(64, 224, "stream_k"), _tiles(64, 256, "stream_k"),
                               _tiles(64, 128, "stream_k"), _swap(128, 16, stages=11), _swap(256, 16, stages=6)]),
    ("bf16", "16x8192x28672", [_split(64, 128, 2), _split(64, 64, 1), _swap(64, 16), _swap(128, 16, 2)]),
    ("bf16", "64x4096x4096", [_split(64, 64, 2), _split(64, 32, 1), _swap(64, 64, 2), _swap(128, 64, 4),
                              _tiles(64, 64, "stream_k"), _tiles(64, 128, "stream_k")]),
    ("bf16", "128x4096x4096", [_split(64, 64, 1), _swap(64, 128, 2), _swap(128, 128, 2), _split(64, 128, 2)]),
    ("fp8", "4096x4096x4096", PERSISTENT + MULTICAST + STREAM_K),
    ("fp8", "4096x28672x4096", PERSISTENT + MULTICAST + STREAM_K),
    ("fp8", "16384x6144x4096", PERSISTENT + MULTICAST + STREAM_K),
    ("fp8", "8192x8192x8192", PERSISTENT + MULTICAST + STREAM_K),
    ("fp8", "4096x10240x8192", PERSISTENT + MULTICAST + STREAM_K),
    ("fp8", "1024x6144x4096", [_tiles(128, 128), _tiles(128, 256, True), _tiles(128, 192), _tiles(128, 192, True)]),
    ("fp8", "16x6144x4096", [_tiles(64, 128), _split(64, 128, 2), _split(64, 96, 2), _swap(64, 16),
                             _swap(64, 16, 2), _swap(128, 16, 2)]),
]


def name_of(options: dict) -> str:
    if not options:
        return "default"
    if "tile_m" not in options:
        return "default_" + "_".join(str(v) for v in options.values())
    scheme = {True: "_persistent", "pingpong": "_pingpong", "stream_k": "_streamk"}.get(options.get("persistent"), "")
    short = {"split_k": "split", "split_k_reduce": "", "stages": "stages", "cluster_m": "cluster_m",
             "cluster_n": "cluster_n", "group_m": "group", "team_m": "team"}
    skip = ("tile_m", "tile_n", "persistent", "swap_ab")
    rest = "".join(f"_{short.get(k, k)}{v}" for k, v in options.items() if k not in skip)
    swap = "_swapab" if options.get("swap_ab") else ""
    return f"{options['tile_m']}x{options['tile_n']}{scheme}{swap}{rest}"


def _problem(dtype: str, key: str) -> Problem:
    for p in (bf16_problems() if dtype == "bf16" else fp8_problems()):
        if p.key == key:
            return p
    raise SystemExit(f"--only: {dtype} {key} is not a sweep problem (gemm_sweep.py)")


def measure(dtype: str, p: Problem, candidates: list[dict], rounds: int, figures: dict,
            default_config: dict | None = None) -> list[tuple]:
    import cupy
    import torch

    fp8 = dtype == "fp8"
    tag = f"gemm_options_{dtype}_{p.key}"
    peer_name = "scaled_mm" if fp8 else "cublas"
    sets = operand_sets(p, torch, torch.float8_e4m3fn if fp8 else torch.bfloat16, seed=p.m + p.n + p.k)
    view_dtype = np.uint8 if fp8 else numpy_dtype("bfloat16")
    views = [(cupy_view(a, view_dtype), cupy_view(b, view_dtype)) for a, b in sets]
    scales = tuple(cupy.asarray([s], np.float32) for s in FP8_SCALES) if fp8 else ()
    torch_scales = tuple(torch.tensor(s, device="cuda") for s in FP8_SCALES)
    out = torch.empty((p.m, p.n), dtype=torch.bfloat16, device="cuda")
    out_view = cupy_view(out, numpy_dtype("bfloat16"))
    peer_out = torch.empty_like(out)
    a0, b0 = sets[0]
    want = a0.float() @ (b0.float().T if p.transpose_b else b0.float())
    if fp8:
        want *= FP8_SCALES[0] * FP8_SCALES[1]
    n = len(sets)

    def peer(i: int) -> None:
        a, b = sets[i % n]
        if fp8:
            torch._scaled_mm(a, b.t(), scale_a=torch_scales[0], scale_b=torch_scales[1], out_dtype=torch.bfloat16,
                             use_fast_accum=True)
        else:
            torch.matmul(a, b.T if p.transpose_b else b, out=peer_out)

    runs = {peer_name: peer}
    for options in [{}] + candidates:
        name = name_of(options)
        try:
            kern = (make_fp8_gemm(p.m, p.n, p.k, **options) if fp8 else
                    make_gemm(p.m, p.n, p.k, transpose_b=p.transpose_b, **options))
        except ValueError as e:  # a tiling this problem cannot take (e.g. 256-row tiles, M = 16)
            figures[f"{tag}_{name}_error"] = str(e)
            print(f"{tag} {name}: {e}", flush=True)
            continue
        out.fill_(float("nan"))
        kern(*views[0], *scales, out=out_view)
        err = float((out.float() - want).norm() / want.norm())
        figures[f"{tag}_{name}_rel_error"] = err
        if not err <= TOLERANCE[dtype]:
            figures[f"{tag}_{name}_error"] = f"relative error {err:.3g}: not timed"
            print(f"WRONG {tag} {name}: relative error {err:.3g}", flush=True)
            continue
        if not options and default_config is not None:
            figures[f"{tag}_default_config"] = default_config  # the model's pick: fit_gemm_model ranks it too
        launch = getattr(kern, "launch_unchecked", None)
        runs[name] = (lambda kern, launch: lambda i: launch(*views[i % n], *scales, out_view) if launch
                      else kern(*views[i % n], *scales, out=out_view))(kern, launch)
    del want
    times, _ = interleaved_runs(runs, rounds, timer=blocking_timer(iterations(p, 1 if fp8 else 2)))
    median = {name: statistics.median(t) for name, t in times.items()}
    rows = []
    for name in list(runs)[1:]:
        ratio = median[peer_name] / median[name]
        figures[f"{tag}_{name}_vs_{peer_name}"] = ratio
        figures[f"{tag}_{name}_tflops"] = p.flops / median[name] / 1e9
        vs_default = median["default"] / median[name] if "default" in median else float("nan")
        figures[f"{tag}_{name}_vs_default"] = vs_default
        rows.append((f"{dtype} {p.key}", name, f"{p.flops / median[name] / 1e9:.0f}", f"{ratio:.3f}",
                     f"{vs_default:.3f}"))
    figures[f"{tag}_{peer_name}_tflops"] = p.flops / median[peer_name] / 1e9
    return rows


def family(config: dict) -> tuple:
    """What kind of kernel a model configuration runs (the tile size left out)."""
    split = (config.get("split_k") or 1) > 1
    return (config.get("persistent", False), bool(config.get("swap_ab")),
            config.get("split_k_reduce", "cluster") if split else None, (config.get("cluster_m") or 1) > 1,
            (config.get("cluster_n") or 1) > 1, (config.get("team_m") or 1) > 1)


OFFERS = {name: f"OFFER_{name.upper()}" for name in OFFER_NAMES}  # --offer: the model's switches


@contextlib.contextmanager
def offering(names: tuple[str, ...]):
    """The model with the switches `names` (OFFERS' keys) on, for candidates not offered by default."""
    from mgpu_lab.kernels.gemm import model

    saved = {OFFERS[name]: getattr(model, OFFERS[name]) for name in names}
    try:
        for attribute in saved:
            setattr(model, attribute, True)
        yield
    finally:
        for attribute, value in saved.items():
            setattr(model, attribute, value)


def model_alternatives(p: Problem, top: int, offer: tuple[str, ...] = ()) -> list[dict]:
    """The model's ranked configurations of `p` after its pick: the next `top - 1`, then the
    fastest of every family not among them (so a family the model misjudges gets timed). With
    `offer` (switches of configurations the default does not offer yet), ranked with them on, and
    the switched model's own pick timed too (the default, the library's pick with its default
    switches, always runs). top=0: none but that switched pick (with `--extra`, only the
    configurations named there run beside the default)."""
    from mgpu_lab.kernels.gemm import model
    from mgpu_lab.kernels.gemm.configs import device_name

    with offering(offer):  # ranked as the library ranks on this GPU: with its calibration
        ranked = [config for _, config in model.ranked(model.Problem(p.m, p.n, p.k, transpose_b=p.transpose_b),
                                                        model.constants_for(device_name()))]
    picks = [ranked[0]] + ranked[1:top] if offer else ranked[1:top]  # switched: its own pick first
    seen = {family(ranked[0])} | {family(c) for c in picks}
    for config in ranked[top:] if top > 0 else []:
        if family(config) not in seen:
            seen.add(family(config))
            picks.append(config)
    if offer:  # the default's configuration (the default switches) runs as "default", not twice
        default = name_of(model_pick(p))
        picks = [config for config in picks if name_of(config) != default]
    return picks


def kernel_settings(config: dict) -> dict:
    """A configuration as make_gemm keyword arguments: without where it came from ('source') and
    the model's estimate ('model_us'), which the library's picks carry beside them."""
    return {key: value for key, value in config.items() if key not in ("source", "model_us")}


def model_pick(p: Problem) -> dict:
    """The configuration make_gemm's default takes for `p` with the table off (the model's first valid pick)."""
    from mgpu_lab.kernels.gemm.configs import gemm_config

    return kernel_settings(gemm_config(p.m, p.n, p.k, transpose_b=p.transpose_b, table=False))


def random_cases(count: int, seeds: list[int], top: int, offer: tuple[str, ...] = ()):
    """(dtype, Problem, candidates) of `count` bf16 shapes drawn from each of `seeds`, one per (m, n, k)."""
    for p in drawn_problems(count, seeds):
        yield "bf16", p, model_alternatives(p, top, offer)


def drawn_problems(count: int, seeds: list[int]) -> list[Problem]:
    """`count` shapes drawn from each seed, one per (m, n, k): the record's keys name the shape,
    not B's layout."""
    from gemm_random import random_problems

    keys: set[str] = set()
    problems = []
    for seed in seeds:
        for p in random_problems(count, seed):
            if p.key not in keys:
                keys.add(p.key)
                problems.append(p)
    return problems


def parse_seeds(text: str) -> list[int]:
    """--seed: one seed, a list ("86,88") or a range ("86-93")."""
    seeds: list[int] = []
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise SystemExit(f"--seed: expected a seed, a list 86,88 or a range 86-93, got {text!r}")
        seeds += list(range(int(low), int(high) + 1)) if dash else [int(low)]
    if not seeds:
        raise SystemExit(f"--seed: expected a seed, a list 86,88 or a range 86-93, got {text!r}")
    return seeds


def versus_pick(p: Problem, constants, offer: tuple[str, ...] = ()) -> dict:
    """The configuration make_gemm's default would take for `p` (table off) with `constants` and
    `offer`'s switches on: the trial arm of --versus."""
    from mgpu_lab.kernels.gemm.configs import model_ranking

    with offering(offer):  # the switches on are part of the ranking cache's key
        config = model_ranking(p.m, p.n, p.k, transpose_b=p.transpose_b, constants=constants)[0]
    return kernel_settings(config)


def versus_cases(problems: list[Problem], constants, offer: tuple[str, ...] = ()):
    """(dtype, Problem, [the trial's pick]) of the problems whose pick the trial moves."""
    for p in problems:
        trial = versus_pick(p, constants, offer)
        if name_of(trial) != name_of(model_pick(p)):
            yield "bf16", p, [trial]


def versus_summary(figures: dict, cases: list, drawn: int, moved: int | None = None) -> None:
    """The trial's figures over the moved shapes it timed (`cases`: those a --budget-s reached):
    how many the trial moved (`moved`, default len(cases)), how many were timed, and its geomean
    over the library's pick."""
    ratios = []
    for _, p, (trial,) in cases:
        tag = f"gemm_options_bf16_{p.key}"
        figures[f"{tag}_versus_pick"] = name_of(trial)
        ratio = figures.get(f"{tag}_{name_of(trial)}_vs_default")
        if ratio is not None and ratio == ratio:
            ratios.append(ratio)
    figures["gemm_options_versus_drawn"] = drawn
    moved = len(cases) if moved is None else moved
    figures["gemm_options_versus_moved"] = moved
    figures["gemm_options_versus_timed"] = len(ratios)
    if ratios:
        figures["gemm_options_versus_geomean_vs_default"] = statistics.geometric_mean(ratios)
    print(f"--versus: {moved} of {drawn} picks moved, {len(ratios)} timed; trial over library, geomean "
          f"{figures.get('gemm_options_versus_geomean_vs_default', float('nan')):.3f}", flush=True)


def given_cases(shapes: str, top: int, offer: tuple[str, ...] = ()):
    """(dtype, Problem, candidates) of `--shapes` ("2048x5632x2048,129x28672x4096:nn"; B (n, k)
    unless ":nn"): the model's alternatives on shapes a user names, e.g. a model's layers."""
    for m, n, k, transpose_b in parse_shapes(shapes):
        p = Problem(m, n, k, transpose_b, "given")
        yield "bf16", p, model_alternatives(p, top, offer)


def main() -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="rounds per problem (default 4)")
    parser.add_argument("--only", help="comma-separated cases, e.g. bf16_4096x14336x4096,fp8_4096x4096x4096")
    parser.add_argument("--configs", help="comma-separated candidate names to keep (the default always runs), "
                                          "e.g. 128x256_persistent_group4")
    parser.add_argument("--random", type=int, metavar="N", help="N bf16 shapes drawn from --seed instead of CASES")
    parser.add_argument("--shapes", help="comma-separated MxNxK[:nt|:nn] bf16 shapes (B (n, k) unless :nn): the "
                                         "model's alternatives on them, as --random does on drawn ones")
    parser.add_argument("--extra", help="with --shapes or --random: configurations timed on every shape besides the "
                                         "model's, ';'-separated, each key=value,... e.g. "
                                         "tile_m=256,tile_n=128,persistent=True,cluster_n=2")
    parser.add_argument("--offer", default="", help=f"with --shapes or --random: comma-separated model switches "
                                                     f"({', '.join(OFFERS)}) on for the alternatives (and the switched "
                                                     f"model's pick); the default, the library's pick with its own switches "
                                                     f"(model.DEFAULT_OFFERS), is timed beside them")
    parser.add_argument("--seed", default="7", help="with --random: a seed, a list 86,88 or a range 86-93")
    parser.add_argument("--versus", metavar="FILE", help="with --random or --shapes: time the library's pick against "
                                                          "the pick with FILE's constants (and --offer's switches) "
                                                          "where the two differ, and nothing else")
    parser.add_argument("--top", type=int, default=4, help="with --random or --shapes: the model's K best, then one per family "
                        "(0: the default alone, with --extra's configurations)")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="start no new problem after this many seconds (the record keeps those done)")
    args = parser.parse_args()
    start = time.perf_counter()
    modelled = args.random is not None or args.shapes is not None
    if modelled:
        os.environ["MGPU_LAB_GEMM_TABLE"] = "0"  # the default is the model's pick
    offer = tuple(name for name in args.offer.split(",") if name)
    if args.top < 0:
        raise SystemExit(f"--top: expected 0 or more (0: the default and --extra's configurations alone), got {args.top}")
    unknown = [name for name in offer if name not in OFFERS]
    if unknown:
        raise SystemExit(f"--offer: expected names among {', '.join(OFFERS)}, got {', '.join(unknown)}")
    seeds = parse_seeds(args.seed)
    if args.versus is not None and not modelled:
        raise SystemExit("--versus: needs --random or --shapes (the shapes whose picks it compares)")
    if args.versus is not None:
        from mgpu_lab.kernels.gemm.model import constants_from_file

        if not os.path.exists(args.versus):
            raise SystemExit(f"--versus: expected a calibration file (JSON of model constants), got {args.versus!r}")
        problems = ([Problem(m, n, k, t, "given") for m, n, k, t in parse_shapes(args.shapes)] if args.shapes
                    else drawn_problems(args.random, seeds))
        cases = list(versus_cases(problems, constants_from_file(args.versus), offer))
    elif args.shapes is not None:
        cases = list(given_cases(args.shapes, args.top, offer))
    elif args.random is not None:
        cases = list(random_cases(args.random, seeds, args.top, offer))
    else:
        cases = list(selected_cases(args.only, args.configs))
    if args.extra and modelled:
        extra = parse_configs(args.extra)
        cases = [(dtype, problem, candidates + [c for c in extra if name_of(c) not in {name_of(d) for d in candidates}])
                 for dtype, problem, candidates in cases]
    import torch  # after the arguments are checked: a bad command line fails without a GPU stack

    figures: dict = {}
    rows = [("problem", "config", "TF/s", "vs peer", "vs default")]
    with GpuSampler() as gpu:
        for dtype, problem, candidates in cases:
            if args.budget_s is not None and time.perf_counter() - start > args.budget_s:
                print(f"--budget-s {args.budget_s:g}: {problem.key} and later problems not run", flush=True)
                break
            figures[f"gemm_options_{dtype}_{problem.key}_transpose_b"] = problem.transpose_b
            default = model_pick(problem) if modelled else None
            rows += measure(dtype, problem, candidates, args.rounds, figures, default)
            print(table(rows[-len(candidates) - 1:]), flush=True)
            torch.cuda.empty_cache()
    if args.versus is not None:
        timed = [case for case in cases if f"gemm_options_bf16_{case[1].key}_transpose_b" in figures]
        versus_summary(figures, timed, len(problems), moved=len(cases))  # a budget may stop before the last
    notes = {"rounds": args.rounds, "only": args.only, "extra": args.extra, "offer": list(offer),
             "configs": args.configs,
             "random": args.random, "versus": args.versus,
             "seed": (seeds[0] if len(seeds) == 1 else seeds) if args.random is not None else None,
             "shapes": args.shapes, "top": args.top,
             "wall_s": round(time.perf_counter() - start, 1)}
    print(f"record: {write_record('gemm_options', figures, notes, sampler=gpu)}")
    print(table(rows))


def parse_configs(text: str) -> list[dict]:
    """`--extra`'s configurations: 'tile_m=256,tile_n=128,persistent=True,cluster_n=2;...' as
    make_gemm keyword arguments (ints, True / False, else the text)."""
    def value(v: str):
        return {"True": True, "False": False}.get(v, int(v) if v.lstrip("-").isdigit() else v)

    configs = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        pairs = [item.split("=", 1) for item in part.split(",")]
        if any(len(pair) != 2 for pair in pairs):
            raise SystemExit(f"--extra: expected key=value,... per configuration, got {part!r}")
        configs.append({key.strip(): value(v.strip()) for key, v in pairs})
    return configs


def selected_cases(only: str | None, configs: str | None):
    """(dtype, Problem, candidates) of CASES, filtered by --only and --configs."""
    wanted = set(only.split(",")) if only else None
    keep = set(configs.split(",")) if configs else None
    for dtype, key, candidates in CASES:
        if wanted is None or f"{dtype}_{key}" in wanted:
            yield dtype, _problem(dtype, key), [c for c in candidates if keep is None or name_of(c) in keep]

if __name__ == "__main__":
    main()
