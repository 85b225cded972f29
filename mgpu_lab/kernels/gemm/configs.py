"""Which configuration the GEMM uses for a shape: the tuned table, else the performance model.

`configs.json` (beside this file) holds the configurations `mgpu_lab.tune` picked on a GPU,
per device name and shape (benchmarks/tune_gemm_configs.py writes it): an exact-shape override.
Shapes it lacks, devices it does not know, and every shape when the table is switched off
(`gemm_config(..., table=False)`, or MGPU_LAB_GEMM_TABLE=0 in the environment: what
`bench_gemm.py --random` measures) get `model_config`: the fastest configuration by the
analytical model (model.py), validated with tiling.py's rules (the next one where a pick fails
the checks, `heuristic_config` last). `heuristic_config` is the older rule: the largest tile
that still gives most SMs a block (decode shapes with M <= 64 take 64-row tiles and narrower N
tiles), split_k where the tiles fill fewer than half the SMs over a long K; make_gemm falls back
to it where a swapped configuration meets an epilogue. Tuned entries from before split-K
existed (no `split_k` key) get its split rule.

`auto_tuned_config` (make_gemm(..., tune="auto")) times the model's top candidates once on the
current GPU and caches the winner per device model and toolchain (mgpu_lab.tune's cache).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mgpu_lab.compiler.target import current_device

from . import model
from .split_k import MAX_CLUSTER_SPLIT, choose_split_k, default_reduce

CONFIG_FILE = Path(__file__).with_name("configs.json")
DEFAULT_DEVICE = "NVIDIA H200"  # whose table a machine without a GPU builds for (sm_90a)
SMS = 132
_FILL = 0.9  # a grid with at least this share of SMS blocks counts as filling the GPU
TABLE_ENV = "MGPU_LAB_GEMM_TABLE"  # "0", "off", "false" or "no": the model alone, no tuned table
# The model's pick is the default for untuned shapes (checked on the H200 on 26 shapes drawn at
# run time, benchmarks/results/gemm_random_* and gpu_tests_one_kernel_*); MGPU_LAB_GEMM_MODEL=0
# (or gemm_config(..., model=False)) brings back the old heuristic.
MODEL_ENV = "MGPU_LAB_GEMM_MODEL"
CONFIG_KEYS = ("tile_m", "tile_n", "stages", "group_m", "persistent", "split_k", "split_k_reduce", "cluster_m",
               "swap_ab", "cluster_n", "team_m")
TUNE_CANDIDATES = 3  # tune="auto" times the model's top few
TUNE_SCAN = 3 * TUNE_CANDIDATES  # of the model's first so many (those differing only in group_m count once)


def kernel_options(config: dict[str, Any]) -> dict[str, Any]:
    """A picked configuration as make_gemm keyword arguments: its CONFIG_KEYS only, without what
    rides beside them (where it came from, 'source'; the model's estimate, 'model_us')."""
    return {key: config[key] for key in CONFIG_KEYS if key in config}


def shape_key(m: int, n: int, k: int, *, transpose_b: bool, dtype: str) -> str:
    """The table's key of a problem, e.g. 'bfloat16_nt_4096x14336x4096'."""
    return f"{dtype}_{'nt' if transpose_b else 'nn'}_{m}x{n}x{k}"


def device_name() -> str:
    """The current CUDA device's name, or DEFAULT_DEVICE without a GPU. Asked of the driver once
    per device: a process may use GPUs of unlike models, and the caches keyed by the name (the
    model's ranking, cluster residency) must see which one is current."""
    dev = current_device()
    return DEFAULT_DEVICE if dev is None else _device_name(dev)


@functools.cache
def _device_name(dev: int) -> str:
    from cuda.bindings import driver

    _, raw = driver.cuDeviceGetName(128, driver.CUdevice(dev))
    return raw.split(b"\0", 1)[0].decode()


@functools.cache
def tuned_table() -> dict[str, dict[str, dict[str, Any]]]:
    """{device: {shape key: config}} from configs.json ({} when the file is absent)."""
    if not CONFIG_FILE.exists():
        return {}
    return json.loads(CONFIG_FILE.read_text()).get("devices", {})


def heuristic_config(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16") -> dict[str, Any]:
    """The first tile (largest first) whose grid fills ~90% of the SMs, else the smallest;
    split_k where even those tiles fill fewer than half the SMs over a long K."""
    del transpose_b
    tiles = [(128, 256), (128, 128)] if m > 64 else []
    tiles += [(64, 256), (64, 128), (64, 64), (64, 32)]
    for tile_m, tile_n in tiles:
        if -(-m // tile_m) * -(-n // tile_n) >= _FILL * SMS:
            break
    config = {"tile_m": tile_m, "tile_n": tile_n, "group_m": 8, "source": "heuristic"}
    return config | _split(m, n, k, config, dtype)


def _split(m: int, n: int, k: int, config: dict[str, Any], dtype: str) -> dict[str, Any]:
    """{'split_k': s} where splitting K pays (bf16/f16 one-tile blocks only), else {}."""
    if dtype not in ("bfloat16", "float16") or config.get("persistent"):
        return {}
    split = choose_split_k(m, n, k, config["tile_m"], config["tile_n"], SMS)
    return {"split_k": split} if split > 1 else {}


def _takes_an_epilogue(config: dict[str, Any], epilogue: bool | str = True) -> bool:
    """Whether a configuration can apply an epilogue: C's own tiles (no swap; a SWAPPABLE one
    applies to C.T too) and K slices, if any, summed in a cluster (a workspace's second kernel
    applies none)."""
    split = config.get("split_k", 1) or 1
    reduce = config.get("split_k_reduce") or default_reduce(split)
    swapped_ok = epilogue == model.SWAPPABLE or not config.get("swap_ab")
    return swapped_ok and (split == 1 or reduce == "cluster")


def model_enabled(model: bool | None = None) -> bool:
    """Whether untuned shapes get the model's pick: `model` when given, else not switched off by
    MGPU_LAB_GEMM_MODEL=0 (see MODEL_ENV)."""
    if model is not None:
        return bool(model)
    return os.environ.get(MODEL_ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def table_enabled(table: bool | None = None) -> bool:
    """Whether the tuned table overrides the model: `table` when given, else not switched off
    by MGPU_LAB_GEMM_TABLE."""
    if table is not None:
        return bool(table)
    return os.environ.get(TABLE_ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def device_sms() -> int:
    """The current device's SM count (SMS without a GPU): the model's waves. Asked of the driver
    once per device."""
    dev = current_device()
    return SMS if dev is None else _device_sms(dev)


@functools.cache
def _device_sms(dev: int) -> int:
    try:
        from cuda.bindings import driver

        err, count = driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, driver.CUdevice(dev))
        return int(count) if err == driver.CUresult.CUDA_SUCCESS and count > 0 else SMS
    except Exception:  # noqa: BLE001 - a driver query failing only costs the model its exact SM count
        return SMS


CLUSTER_QUERY_SMEM = 200 * 1024  # a split-K block's smem: the deepest ring that fits, one block per SM


def device_clusters() -> tuple[int, ...]:
    """Clusters of 1..MAX_CLUSTER_SPLIT one-SM blocks the current device keeps resident at once
    (the model's split-K waves), or () without a GPU (the model then uses the H200's counts).
    Queried once per device model (a process may switch between unlike GPUs)."""
    dev = current_device()
    return () if dev is None else _resident_clusters(_device_name(dev))


@functools.cache
def _resident_clusters(device: str) -> tuple[int, ...]:
    """device_clusters of the current device, whose name is `device` (the cache's key)."""
    try:
        from mgpu_lab.runtime.device import resident_clusters

        return tuple(resident_clusters(size, CLUSTER_QUERY_SMEM) or 0 for size in range(1, MAX_CLUSTER_SPLIT + 1))
    except Exception:  # noqa: BLE001 - a failed query only costs the model the device's exact counts
        return ()


def _valid(m: int, n: int, k: int, config: dict[str, Any], *, transpose_b: bool, dtype: str, out_dtype: str,
           epilogue: bool | str) -> bool:
    """Whether make_gemm (or make_fp8_gemm) accepts the configuration: resolve_tiling's checks,
    on the padded sizes of the padded path. Cheap: nothing is compiled."""
    from .padding import aligned_shape
    from .pieces import round_up
    from .tiling import _INPUT_DTYPES, settle_tiling

    if dtype not in model.ITEMSIZE:
        return False
    if not aligned_shape(m, n, k, transpose_b, dtype, out_dtype):
        isz, osz = model.ITEMSIZE[dtype], model.ITEMSIZE.get(out_dtype, 4)
        k = round_up(k, 16 // isz)
        n = round_up(n, 16 // (osz if transpose_b else min(isz, osz)))
    settings = kernel_options(config)
    settings.setdefault("split_k", 1)
    if "tile_m" not in settings or "tile_n" not in settings or \
            epilogue and epilogue != model.SWAPPABLE and settings.get("swap_ab"):
        return False  # (an epilogue needs C's own tiles, unless it applies to C.T too)
    inputs = _INPUT_DTYPES if dtype in _INPUT_DTYPES else (dtype,)
    try:
        settle_tiling(m, n, k, {}, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype, input_dtypes=inputs,
                      **settings)
    except (ValueError, TypeError):
        return False
    return True


def _valid_ranked(m: int, n: int, k: int, *, transpose_b: bool, dtype: str, out_dtype: str, epilogue: bool | str,
                  sms: int | None = None, keep: Callable[[dict[str, Any]], bool] = lambda config: True,
                  device: str | None = None, constants: model.Constants | None = None) -> Iterator[dict[str, Any]]:
    """The model's configurations that `keep` takes and resolve_tiling's checks pass, fastest
    first, each with source 'model' and the model's estimate (`model_us`), with `constants`
    (default: the calibration of `device`, itself by default the current GPU's name)."""
    if dtype not in model.ITEMSIZE:
        return
    problem = model.Problem(m, n, k, transpose_b=transpose_b, dtype=dtype, epilogue=epilogue,
                            sms=sms or device_sms(), out_dtype=out_dtype,
                            clusters=device_clusters() if sms is None else ())
    for us, config in model.ranked_lazily(problem, constants or model.constants_for(device or device_name())):
        if keep(config) and _valid(m, n, k, config, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                                   epilogue=epilogue):
            yield {**config, "source": "model", "model_us": round(us, 2)}


def model_ranking(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16",
                  out_dtype: str = "bfloat16", epilogue: bool | str = False, sms: int | None = None,
                  count: int = 1, constants: model.Constants | None = None) -> tuple[dict[str, Any], ...]:
    """The model's `count` fastest configurations that pass resolve_tiling's checks, fastest
    first, each with source 'model' and the model's estimate (`model_us`); the heuristic's
    configuration (source 'heuristic') when none passes. Cached per device model (its
    calibration, SM count and cluster residency differ) and per set of the model's switches on:
    a few ms the first time.
    constants: rank with these instead of the device's calibration (a calibration under trial).
    `model_ranking.cache_clear()` empties the cache (after a calibration changes)."""
    return _ranking(m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype, epilogue=epilogue, sms=sms,
                    count=count, device=device_name(), constants=constants, switches=model.switches_on())


@functools.lru_cache(maxsize=4096)
def _ranking(m: int, n: int, k: int, *, transpose_b: bool, dtype: str, out_dtype: str, epilogue: bool | str,
             sms: int | None, count: int, device: str, constants: model.Constants | None = None,
             switches: tuple[str, ...] = ()) -> tuple[dict[str, Any], ...]:
    """model_ranking on the current GPU, whose name is `device` (the cache's key, with `constants`
    and the model's `switches` on, which the ranking reads from the model itself)."""
    del switches  # only the cache's key
    picked = tuple(itertools.islice(_valid_ranked(m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                                                  epilogue=epilogue, sms=sms, device=device, constants=constants),
                                    count))
    return picked or (heuristic_config(m, n, k, transpose_b=transpose_b, dtype=dtype),)


model_ranking.cache_clear = _ranking.cache_clear  # type: ignore[attr-defined]  # the tests' and tools' handle


def config_with_side(m: int, n: int, k: int, side: str, value: int, *, transpose_b: bool = False,
                     dtype: str = "bfloat16", out_dtype: str = "bfloat16",
                     epilogue: bool | str = False) -> dict[str, Any]:
    """A configuration for a user who gave one tile side (`side` = "tile_m" or "tile_n"): the
    model's fastest valid one with that side and C's own tiles (no swap), else the heuristic's
    tile with the first partner that passes the kernel's checks. The overall pick (tuned or
    modelled) may pair the side with one it cannot take: 256 x 256 keeps too many registers."""
    settings = dict(transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype, epilogue=epilogue)
    if model_enabled():
        with_side = next(_valid_ranked(m, n, k, **settings,
                                       keep=lambda config: config.get(side) == value and not config.get("swap_ab")),
                         None)
        if with_side is not None:
            return with_side
    base = heuristic_config(m, n, k, transpose_b=transpose_b, dtype=dtype)
    other = "tile_n" if side == "tile_m" else "tile_m"
    for partner in dict.fromkeys((base[other], 128, 64, 256, 32)):
        config = {**base, side: value, other: partner}
        config = {key: v for key, v in config.items() if key != "split_k"} | _split(m, n, k, config, dtype)
        if _valid(m, n, k, config, **settings):
            return config
    return {**base, side: value}  # nothing passes: make_gemm's checks say why


# What a configuration without the key means (the keys a user may give without tile sizes).
_SCHEME_DEFAULTS = {"persistent": False, "split_k": 1, "split_k_reduce": None, "cluster_m": 1, "swap_ab": False,
                    "cluster_n": 1, "team_m": 1}


def config_with_settings(m: int, n: int, k: int, picked: dict[str, Any], given: dict[str, Any], *,
                         transpose_b: bool = False, dtype: str = "bfloat16", out_dtype: str = "bfloat16",
                         epilogue: bool | str = False) -> dict[str, Any]:
    """The configuration for a user who gave some of the block scheme (`given`: persistent,
    split_k, split_k_reduce, cluster_m, swap_ab) and no tile sizes: the overall pick (`picked`)
    when it passes the checks with them laid on top; else (split_k_reduce='workspace' on a pick
    that swaps A and B) the model's fastest valid configuration that agrees with every given
    setting, else its fastest that passes with them on top, else the heuristic's (make_gemm's
    checks then say what conflicts)."""
    settings = dict(transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype, epilogue=epilogue)
    if not given or _valid(m, n, k, {**picked, **given}, **settings):
        return picked

    def agrees(config: dict[str, Any]) -> bool:
        return all(config.get(key, _SCHEME_DEFAULTS[key]) == value for key, value in given.items())

    if model_enabled():
        found = next(_valid_ranked(m, n, k, **settings, keep=agrees), None)
        if found is not None:
            return found
        for config in _valid_ranked(m, n, k, **settings):
            if _valid(m, n, k, {**config, **given}, **settings):
                return config
    return heuristic_config(m, n, k, transpose_b=transpose_b, dtype=dtype)


def model_config(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16",
                 out_dtype: str = "bfloat16", epilogue: bool | str = False, sms: int | None = None) -> dict[str, Any]:
    """The model's fastest valid configuration of the problem (a copy: callers may edit it)."""
    return dict(model_ranking(m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                              epilogue=epilogue, sms=sms)[0])


def gemm_config(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16",
                device: str | None = None, table: bool | None = None, epilogue: bool | str = False,
                out_dtype: str = "bfloat16", model: bool | None = None) -> dict[str, Any]:
    """tile_m, tile_n, group_m, maybe stages, persistent, split_k, split_k_reduce, cluster_m and
    swap_ab (tile sizes then of C.T), and `source` ('tuned', 'model' or 'heuristic').
    epilogue: True for a kernel with one, which needs C's own tiles and K slices summed in a
    cluster (model.SWAPPABLE: one that applies to C.T too, so tiles may swap): a tuned entry that
    cannot apply it gives way to the model's fastest configuration that can.
    table: False skips the tuned table (default: on unless MGPU_LAB_GEMM_TABLE=0). model: True
    gives untuned shapes the performance model's pick (default: on unless MGPU_LAB_GEMM_MODEL=0),
    False the old heuristic's."""
    if table_enabled(table):
        entry = tuned_table().get(device or device_name(), {}).get(
            shape_key(m, n, k, transpose_b=transpose_b, dtype=dtype))
        if entry is not None:
            config = {**kernel_options(entry), "source": "tuned"}
            config = config if "split_k" in entry else config | _split(m, n, k, config, dtype)
            if not (epilogue and not _takes_an_epilogue(config, epilogue)):  # else the model's pick that applies it
                return config
    if not model_enabled(model) or \
            not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in (m, n, k)):
        return heuristic_config(m, n, k, transpose_b=transpose_b, dtype=dtype)  # bad sizes: make_gemm's checks name it
    return model_config(m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype, epilogue=epilogue)


def _tune_inputs(m: int, n: int, k: int, transpose_b: bool, dtype: str) -> list[tuple[Any, Any]]:
    """Input sets for tune='auto' (in the timing worker): unit-normal A and B, rotated through
    enough sets to exceed L2."""
    import cupy
    import numpy as np

    from mgpu_lab.builder.dtypes import numpy_dtype

    np_dtype = numpy_dtype(dtype)
    per_set = (m * k + n * k) * model.ITEMSIZE[dtype]
    count = max(1, min(8, -(-(3 * model.L2_BYTES) // per_set)))
    rng = np.random.default_rng(0)
    b_shape = (n, k) if transpose_b else (k, n)
    return [(cupy.asarray(rng.standard_normal((m, k), dtype=np.float32).astype(np_dtype)),
             cupy.asarray(rng.standard_normal(b_shape, dtype=np.float32).astype(np_dtype))) for _ in range(count)]


def _tune_reference(transpose_b: bool, a: Any, b: Any) -> Any:
    """f32 product of the first input set: tune='auto' checks every candidate against it."""
    import cupy

    a32, b32 = a.astype(cupy.float32), b.astype(cupy.float32)
    return a32 @ (b32.T if transpose_b else b32)


def _tune_candidate(make: Callable[..., Any], m: int, n: int, k: int, transpose_b: bool, dtype: str,
                    out_dtype: str, configs: tuple[tuple[tuple[str, Any], ...], ...], choice: int) -> Any:
    """make_gemm (`make`) of the model's candidate `choice` (picklable for the tuner's build pool)."""
    return make(m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype, **dict(configs[choice]))


def cluster_twin(config: dict[str, Any]) -> dict[str, Any]:
    """The same tiles and schedule with the other cluster choice: a multicast cluster's blocks
    one to a cluster, or one-block clusters as pairs along m (sharing B). Whether pairs beat
    single blocks is the model's least certain call: over the timed groups where both ran, pairs
    of 128 x 256 tiles on large shapes ran 1.02-1.05x single blocks' time where the model said
    0.99x, and stream-K pairs on 129-639-row shapes 0.77-0.93x where it said 0.98-0.99x (H200).
    A stream-K team's twin is the same grid of single blocks (a team is a cluster without one)."""
    settings = {key: value for key, value in kernel_options(config).items()
                if key not in ("cluster_m", "cluster_n", "team_m")}
    clustered = (config.get("cluster_m") or 1) * (config.get("cluster_n") or 1) * (config.get("team_m") or 1) > 1
    return settings if clustered else {**settings, "cluster_m": 2}


def _same_but_order(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two configurations differ in nothing but the block order (group_m)."""
    return {key: value for key, value in a.items() if key != "group_m"} == \
        {key: value for key, value in b.items() if key != "group_m"}


def tune_candidates(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16",
                    out_dtype: str = "bfloat16", epilogue: bool | str = False) -> tuple[dict[str, Any], ...]:
    """What tune='auto' times: the model's TUNE_CANDIDATES fastest configurations that differ in
    more than the block order (of its first TUNE_SCAN: where estimates tie at a bandwidth bound
    the next few are often the pick with another group_m, 1289x7208x1728's top two), and the
    first one's `cluster_twin` (where make_gemm takes it and no candidate is it in another order), as
    make_gemm settings. The model's next few often differ from its pick only in the cluster
    shape; the twin puts its least certain call to the clock (2048x5632x2048, the Llama
    gate / up projection of a 4 x 512 prefill: single-block stream-K ran 0.94 of cuBLAS where the
    model's pairs ran 0.91-0.93, on H100 and H200 alike)."""
    ranked: list[dict[str, Any]] = []
    for config in model_ranking(m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                                epilogue=epilogue, count=TUNE_SCAN):
        options = kernel_options(config)
        if not any(_same_but_order(options, chosen) for chosen in ranked):
            ranked.append(options)
        if len(ranked) == TUNE_CANDIDATES:
            break
    twin = cluster_twin(ranked[0])
    persistent = twin.get("persistent") in (True, "stream_k")  # clusters are of persistent grids
    if persistent and not any(_same_but_order(twin, chosen) for chosen in ranked) \
            and _valid(m, n, k, twin, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype, epilogue=epilogue):
        ranked.append(twin)
    return tuple(ranked)


def auto_tuned_config(m: int, n: int, k: int, *, make: Callable[..., Any], transpose_b: bool = False,
                      dtype: str = "bfloat16", out_dtype: str = "bfloat16",
                     epilogue: bool | str = False) -> dict[str, Any]:
    """The fastest of `tune_candidates` (the model's top few and its pick's cluster twin), built by `make` (make_gemm,
    a module-level function: the tuner's build workers unpickle it) and timed once on the
    current GPU (mgpu_lab.tune: each candidate in a worker process per GPU, checked against an
    f32 product), cached per device model, shape and toolchain; later calls read the cache.
    RuntimeError without a GPU (tuning needs one)."""
    from mgpu_lab.runtime.device import has_gpu

    if not has_gpu():
        raise RuntimeError("gemm: tune='auto' times candidates on the GPU, and no CUDA GPU or driver was found: "
                           "compiling works, launching and tuning need a Hopper GPU; use tune=None (the model's "
                           "pick) on this machine")
    from mgpu_lab.tuning import tune

    ranked = tune_candidates(m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype, epilogue=epilogue)
    configs = tuple(tuple(c.items()) for c in ranked)
    untimed = functools.partial(model_config, m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                                epilogue=epilogue)  # the model's pick, where nothing is timed
    if len(configs) == 1:
        return untimed()
    build = functools.partial(_tune_candidate, make, m, n, k, transpose_b, dtype, out_dtype, configs)
    inputs = functools.partial(_tune_inputs, m, n, k, transpose_b, dtype)
    result = tune(build, {"choice": list(range(len(configs)))}, inputs,
                  functools.partial(_tune_reference, transpose_b), progress=False)
    if result.best is None:
        return untimed()
    return {**dict(configs[result.best.config["choice"]]), "source": "auto-tuned"}


def auto_settings(tune: Any, m: int, n: int, k: int, *, make: Callable[..., Any], transpose_b: bool, dtype: str,
                  out_dtype: str, epilogue: bool | str, given: dict[str, Any]) -> tuple[Any, ...]:
    """make_gemm's (tile_m, tile_n, stages, group_m, persistent, split_k, split_k_reduce,
    cluster_m, swap_ab, cluster_n, team_m) for tune='auto': the configuration auto-tuned with `make`
    (make_gemm itself), what the caller gave (`given`, None where not) on top."""
    from mgpu_lab.arguments import choice

    choice("tune", tune, ("auto",), expected="'auto' or None", where="gemm")
    picked = auto_tuned_config(m, n, k, make=make, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                               epilogue=epilogue)
    merged = {**{key: picked.get(key) for key in CONFIG_KEYS}, **{key: v for key, v in given.items() if v is not None}}
    if merged["split_k"] is None:
        merged["split_k"] = 1
    return (picked["tile_m"], picked["tile_n"], *(merged[key] for key in CONFIG_KEYS[2:]))
