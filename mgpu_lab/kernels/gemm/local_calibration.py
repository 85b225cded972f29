"""The model's own error near a shape, per kind of configuration, learned from timed samples.

The analytical model (model.estimate_us) is off by different amounts in different corners of the
shape space: a kind of kernel it rates 10% too fast on tall long-K shapes may be right on square
ones. Where its alternatives are close, that error decides the pick. A LocalCalibration keeps, per
kind of configuration (`error_kind`: block scheme, swap, clusters, split-K, tile height, wide or
narrow), the log error log(measured / estimated) of every timed sample of that kind, and scales
an estimate by a kernel-weighted mean of the errors of samples of the same kind on nearby shapes
(distance in log m, log n, log k and B's layout), shrunk toward none where few samples are near:

    factor = exp(sum(w_i * e_i) / (sum(w_i) + shrink)),  w_i = exp(-d_i^2 / (2 * bandwidth^2))

A calibration belongs to one set of model constants (the estimates its errors were taken against)
and to bf16 / fp16 problems (the samples are bf16); for any other it scales nothing.
`benchmarks/fit_gemm_model.py --write-local PATH` writes one from benchmarks/results/.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from typing import Any

import numpy as np

LAYOUT_WEIGHT = 0.7  # B (n, k) against (k, n) counts as this far apart in log-shape units
SIXTEEN_BIT = ("bfloat16", "float16")


def config_family(config: dict[str, Any]) -> str:
    """A configuration's kind of kernel: block scheme, swap, clusters, split-K; stream-K also by
    tile (its partial tiles' hand-over grows as tiles shrink)."""
    persistent = config.get("persistent") or False
    name = {False: "one tile", True: "persistent", "pingpong": "pingpong", "stream_k": "stream-K"}[persistent]
    if config.get("swap_ab"):
        name += ", swapped"
    if (config.get("cluster_m", 1) or 1) * (config.get("cluster_n", 1) or 1) > 1:
        name += ", cluster"
    if (config.get("split_k", 1) or 1) > 1:
        name += ", split-K"
    if persistent == "stream_k":
        name += f" {config['tile_m']}x{config['tile_n']}"
    return name


def error_kind(config: dict[str, Any]) -> str:
    """What errors are pooled by: config_family, the tile's height and whether it is 192+ wide
    (pooling by family alone ranked held-out groups less well: 1.033 against 1.029 of the best)."""
    return f"{config_family(config)} | {config['tile_m']} rows | {'wide' if config['tile_n'] >= 192 else 'narrow'}"


def shape_point(m: int, n: int, k: int, transpose_b: bool) -> np.ndarray:
    """Where a shape sits in the space distances are taken in."""
    return np.array([math.log(m), math.log(n), math.log(k), LAYOUT_WEIGHT * float(bool(transpose_b))])


@dataclasses.dataclass(frozen=True)
class LocalCalibration:
    """Per error_kind, the shape points (rows of `points[kind]`) and log errors of timed samples."""

    constants: dict[str, float]  # the model constants the errors were taken against
    points: dict[str, np.ndarray]
    errors: dict[str, np.ndarray]
    bandwidth: float = 0.5
    shrink: float = 1.0
    source: str = ""

    def log_factor(self, m: int, n: int, k: int, transpose_b: bool, kind: str) -> float:
        """The log of what an estimate of `kind` on this shape is scaled by (0: nothing known)."""
        points = self.points.get(kind)
        if points is None or not len(points):
            return 0.0
        d2 = ((points - shape_point(m, n, k, transpose_b)) ** 2).sum(axis=1)
        w = np.exp(-d2 / (2 * self.bandwidth ** 2))
        return float((w * self.errors[kind]).sum() / (w.sum() + self.shrink))

    def factor(self, m: int, n: int, k: int, transpose_b: bool, config: dict[str, Any]) -> float:
        """What an estimate of `config` on this shape is scaled by."""
        return math.exp(self.log_factor(m, n, k, transpose_b, error_kind(config)))

    def matches(self, constants: Any) -> bool:
        """Whether these errors were taken against `constants` (a model.Constants)."""
        values = dataclasses.asdict(constants)
        return values.keys() == self.constants.keys() and all(
            math.isclose(values[name], self.constants[name], rel_tol=1e-9) for name in values)

    def to_json(self) -> dict[str, Any]:
        return {"constants": self.constants, "bandwidth": self.bandwidth, "shrink": self.shrink,
                "layout_weight": LAYOUT_WEIGHT, "source": self.source,
                "samples": {kind: [[round(float(x), 5) for x in point] + [round(float(e), 5)]
                                   for point, e in zip(self.points[kind], self.errors[kind])]
                            for kind in sorted(self.points)}}


def from_samples(constants: Any, samples: list[tuple[dict[str, Any], int, int, int, bool, float]],
                 bandwidth: float = 0.5, shrink: float = 1.0, source: str = "") -> LocalCalibration:
    """A calibration from (config, m, n, k, transpose_b, log(measured / estimated)) samples."""
    points: dict[str, list[np.ndarray]] = {}
    errors: dict[str, list[float]] = {}
    for config, m, n, k, transpose_b, error in samples:
        kind = error_kind(config)
        points.setdefault(kind, []).append(shape_point(m, n, k, transpose_b))
        errors.setdefault(kind, []).append(error)
    return LocalCalibration(dataclasses.asdict(constants), {kind: np.array(v) for kind, v in points.items()},
                            {kind: np.array(v) for kind, v in errors.items()}, bandwidth, shrink, source)


def read(path: str) -> LocalCalibration:
    """A calibration file (`to_json`'s form). ValueError naming the file for anything else."""
    try:
        with open(path) as f:
            data = json.load(f)
        if abs(data.get("layout_weight", LAYOUT_WEIGHT) - LAYOUT_WEIGHT) > 1e-9:
            raise ValueError(f"layout_weight {data['layout_weight']} (this version measures with {LAYOUT_WEIGHT})")
        points = {kind: np.array([row[:4] for row in rows], dtype=float) for kind, rows in data["samples"].items()}
        errors = {kind: np.array([row[4] for row in rows], dtype=float) for kind, rows in data["samples"].items()}
        return LocalCalibration({k: float(v) for k, v in data["constants"].items()}, points, errors,
                                float(data["bandwidth"]), float(data["shrink"]), str(data.get("source", "")))
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        raise ValueError(f"GEMM local calibration {path!r}: expected a file written by fit_gemm_model.py "
                         f"--write-local, got {type(e).__name__}: {e}") from None


# Each GPU's local calibration, by a part of its name (files beside this module). The H100's
# (fit_gemm_model.py --device H100 --write-local, fcaa213) is not shipped: its picks lost there.
DEVICE_FILES: dict[str, str] = {"H200": "h200_local.json"}


@functools.lru_cache(maxsize=None)
def _device_calibrations() -> tuple[LocalCalibration, ...]:
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [os.path.join(here, name) for name in DEVICE_FILES.values()]
    return tuple(read(path) for path in paths if os.path.exists(path))


def for_constants(constants: Any) -> LocalCalibration | None:
    """The shipped calibration taken against `constants`, if any."""
    return next((c for c in _device_calibrations() if c.matches(constants)), None)
