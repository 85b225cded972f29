"""`CompileOptions`: every knob of the compiler as data, with an environment-variable convenience.

The seed's MOSAIC_GPU_DUMP_* variables become fields here; `CompileOptions.from_env()` still
reads MGPU_LAB_DUMP_DIR (write all artifacts there), MGPU_LAB_DUMP_PASSES=1 (keep IR after every
pass), MGPU_LAB_TARGET (e.g. sm_90a), MGPU_LAB_CACHE_DIR and MGPU_LAB_NO_CACHE=1.

Every field is validated when the options are made: the target, PTX ISA and optimization
level are pasted into an MLIR pass pipeline, and a bad value there aborts the process inside
LLVM instead of raising. `CompileOptionError` names the field, what it accepts and what it got.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CompileOptionError
from .target import parse_ptx_version, target_info


MAX_BLOCKS_PER_SM = 32  # resident blocks per SM on sm_80..sm_120


@dataclass(frozen=True)
class CompileOptions:
    """How a kernel is compiled: target, PTX version, ptxas options, caching, pass dumps, mbarrier timeout."""

    target: str | None = None  # None: the current device's, or sm_90a without a GPU
    ptx_version: str | None = None  # None: ptx80, or the target's minimum when that is newer
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

    def __post_init__(self) -> None:
        if self.target is not None:
            target_info(self.target)
        if self.ptx_version is not None:
            parse_ptx_version(self.ptx_version)
        if type(self.opt_level) is not int or not 0 <= self.opt_level <= 3:
            raise CompileOptionError(f"opt_level: expected an int 0-3 (ptxas -O0..-O3), got {self.opt_level!r}")
        for flag in ("line_info", "keep_passes", "use_cache"):
            if not isinstance(getattr(self, flag), bool):
                raise CompileOptionError(f"{flag}: expected True or False, got {getattr(self, flag)!r}")
        for folder in ("dump_dir", "cache_dir"):
            if getattr(self, folder) is not None and not isinstance(getattr(self, folder), (str, os.PathLike)):
                raise CompileOptionError(f"{folder}: expected a folder path, got {getattr(self, folder)!r}")
        args = self.ptxas_args
        if isinstance(args, str) or not isinstance(args, (tuple, list)) or not all(isinstance(a, str) for a in args):
            raise CompileOptionError(f"ptxas_args: expected a tuple of str, got {args!r}")
        object.__setattr__(self, "ptxas_args", tuple(args))
        self._check_launch_bounds()

    def _check_launch_bounds(self) -> None:
        regs, blocks, timeout = self.max_registers, self.min_blocks_per_sm, self.mbarrier_timeout_s
        if regs is not None and (type(regs) is not int or not 24 <= regs <= 255):
            raise CompileOptionError(f"max_registers: expected an int in [24, 255] (registers per thread), got {regs!r}")
        if blocks is not None and (type(blocks) is not int or blocks < 1):
            raise CompileOptionError(f"min_blocks_per_sm: expected an int >= 1, got {blocks!r}")
        if blocks is not None and blocks > MAX_BLOCKS_PER_SM:
            raise CompileOptionError(
                f"min_blocks_per_sm: at most {MAX_BLOCKS_PER_SM} blocks are resident on an SM, got {blocks}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not 0 < timeout < math.inf):
            raise CompileOptionError(f"mbarrier_timeout_s: expected a positive number of seconds or None, got {timeout!r}")

    @classmethod
    def check_names(cls, names: Any) -> None:
        """Raise CompileOptionError naming every entry of `names` that is not a compile option."""
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(names) - fields)
        if unknown:
            raise CompileOptionError(f"{', '.join(unknown)}: not a compile option; the options are "
                                     f"{', '.join(sorted(fields))}")

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
            try:
                values["mbarrier_timeout_s"] = float(env["MGPU_LAB_MBARRIER_TIMEOUT_S"])
            except ValueError:
                raise CompileOptionError(f"MGPU_LAB_MBARRIER_TIMEOUT_S: expected a number of seconds, "
                                         f"got {env['MGPU_LAB_MBARRIER_TIMEOUT_S']!r}") from None
        cls.check_names(overrides)
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
