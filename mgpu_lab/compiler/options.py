"""`CompileOptions`: every knob of the compiler as data, with an environment-variable convenience.

The seed's MOSAIC_GPU_DUMP_* variables become fields here; `CompileOptions.from_env()` still
reads MGPU_LAB_DUMP_DIR (write all artifacts there), MGPU_LAB_DUMP_PASSES=1 (keep IR after every
pass), MGPU_LAB_TARGET (e.g. sm_90a), MGPU_LAB_CACHE_DIR and MGPU_LAB_NO_CACHE=1.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CompileOptions:
    target: str | None = None  # None: the current device's, or sm_90a without a GPU
    ptx_version: str = "ptx80"
    opt_level: int = 3
    line_info: bool = True
    keep_passes: bool = False  # record the IR after every pass in CompiledKernel.passes
    dump_dir: str | None = None  # write every artifact of each compiled kernel here
    use_cache: bool = True
    cache_dir: str | None = None
    ptxas_args: tuple[str, ...] = ()
    # A wait on an mbarrier longer than this many seconds traps (the launch fails) instead of
    # hanging: a debugging aid for barrier protocols. None: wait forever.
    mbarrier_timeout_s: float | None = None
    # Occupancy: at most this many registers per thread (`.maxnreg`, which ptxas honours,
    # unlike -maxrregcount next to launch bounds) and at least this many resident blocks per
    # SM (`.minnctapersm`, with `.maxntid` = the block). None: ptxas decides.
    max_registers: int | None = None
    min_blocks_per_sm: int | None = None

    @classmethod
    def from_env(cls, **overrides) -> CompileOptions:
        """Defaults, then MGPU_LAB_* environment variables, then `overrides`."""
        env = os.environ
        values = {}
        if env.get("MGPU_LAB_DUMP_DIR"):
            values["dump_dir"] = env["MGPU_LAB_DUMP_DIR"]
        if env.get("MGPU_LAB_DUMP_PASSES", "") not in ("", "0"):
            values["keep_passes"] = True
        if env.get("MGPU_LAB_TARGET"):
            values["target"] = env["MGPU_LAB_TARGET"]
        if env.get("MGPU_LAB_CACHE_DIR"):
            values["cache_dir"] = env["MGPU_LAB_CACHE_DIR"]
        if env.get("MGPU_LAB_NO_CACHE", "") not in ("", "0"):
            values["use_cache"] = False
        if env.get("MGPU_LAB_MBARRIER_TIMEOUT_S"):
            values["mbarrier_timeout_s"] = float(env["MGPU_LAB_MBARRIER_TIMEOUT_S"])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def resolved_cache_dir(self) -> Path:
        if self.cache_dir:
            return Path(self.cache_dir)
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "mgpu_lab" / "kernels"

    def key_fields(self) -> dict:
        """Fields that change generated code (dumping and caching choices do not)."""
        d = dataclasses.asdict(self)
        for k in ("dump_dir", "use_cache", "cache_dir", "keep_passes"):
            d.pop(k)
        return d
