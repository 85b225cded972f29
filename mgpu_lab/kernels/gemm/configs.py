"""Which tile sizes the GEMM uses for a shape: the tuned table, else a heuristic.

`configs.json` (beside this file) holds the configurations `mgpu_lab.tune` picked on a GPU,
per device name and shape (benchmarks/tune_gemm_configs.py writes it). Shapes it lacks, and
devices it does not know, get `heuristic_config`: the largest tile that still gives most SMs
a block (decode shapes with M <= 64 take 64-row tiles and narrower N tiles). Where the tiles
still fill fewer than half the SMs over a long K, K is split (`split_k`, split_k.py); tuned
entries from before split-K existed (no `split_k` key) get that rule too.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from .split_k import choose_split_k

CONFIG_FILE = Path(__file__).with_name("configs.json")
DEFAULT_DEVICE = "NVIDIA H200"  # whose table a machine without a GPU builds for (sm_90a)
SMS = 132
_FILL = 0.9  # a grid with at least this share of SMS blocks counts as filling the GPU


def shape_key(m: int, n: int, k: int, *, transpose_b: bool, dtype: str) -> str:
    """The table's key of a problem, e.g. 'bfloat16_nt_4096x14336x4096'."""
    return f"{dtype}_{'nt' if transpose_b else 'nn'}_{m}x{n}x{k}"


@functools.cache
def device_name() -> str:
    """The current CUDA device's name, or DEFAULT_DEVICE without a GPU."""
    from mgpu_lab.compiler.target import device_capability

    if device_capability() is None:
        return DEFAULT_DEVICE
    from cuda.bindings import driver

    err, dev = driver.cuCtxGetDevice()
    if err != driver.CUresult.CUDA_SUCCESS:
        _, dev = driver.cuDeviceGet(0)
    _, raw = driver.cuDeviceGetName(128, dev)
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


def gemm_config(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16",
                device: str | None = None) -> dict[str, Any]:
    """tile_m, tile_n, group_m, maybe stages, persistent, split_k, split_k_reduce, cluster_m and
    swap_ab (tile sizes then of C.T), and `source` ('tuned' or 'heuristic')."""
    entry = tuned_table().get(device or device_name(), {}).get(shape_key(m, n, k, transpose_b=transpose_b,
                                                                         dtype=dtype))
    if entry is not None:
        keys = ("tile_m", "tile_n", "stages", "group_m", "persistent", "split_k", "split_k_reduce", "cluster_m",
                "swap_ab")
        config = {**{key: entry[key] for key in keys if key in entry}, "source": "tuned"}
        return config if "split_k" in entry else config | _split(m, n, k, config, dtype)
    return heuristic_config(m, n, k, transpose_b=transpose_b, dtype=dtype)
