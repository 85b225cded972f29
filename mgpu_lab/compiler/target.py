"""Which GPU architectures mgpu_lab compiles for, what each needs and allows.

`SUPPORTED_TARGETS` is the list a target is checked against before it reaches LLVM: an
unknown chip or a PTX ISA too old for the chip makes LLVM abort the process
(`report_fatal_error`), so both are validated here and reported as Python errors.
Hopper (sm_90a) is the architecture the DSL is written for and tested on; the others
compile (kernels that use Hopper-only instructions fail with a pass error naming the op).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ..errors import CompileOptionError


@dataclass(frozen=True)
class TargetInfo:
    """What one architecture needs (PTX ISA) and allows (shared memory per block)."""

    min_ptx: int  # PTX ISA version x10: 80 means PTX 8.0
    max_smem_per_block: int  # bytes of shared memory one block may opt in to


_KIB = 1024
SUPPORTED_TARGETS: dict[str, TargetInfo] = {
    "sm_80": TargetInfo(70, 163 * _KIB),
    "sm_86": TargetInfo(71, 99 * _KIB),
    "sm_87": TargetInfo(74, 163 * _KIB),
    "sm_89": TargetInfo(78, 99 * _KIB),
    "sm_90": TargetInfo(78, 227 * _KIB),
    "sm_90a": TargetInfo(80, 227 * _KIB),
    "sm_100": TargetInfo(86, 227 * _KIB),
    "sm_100a": TargetInfo(86, 227 * _KIB),
    "sm_103": TargetInfo(88, 227 * _KIB),
    "sm_103a": TargetInfo(88, 227 * _KIB),
    "sm_120": TargetInfo(87, 99 * _KIB),
    "sm_120a": TargetInfo(87, 99 * _KIB),
    "sm_121": TargetInfo(88, 99 * _KIB),
    "sm_121a": TargetInfo(88, 99 * _KIB),
}
# PTX ISA versions the NVPTX backend of the bundled LLVM knows (it ignores unknown ones).
KNOWN_PTX_VERSIONS = (70, 71, 72, 73, 74, 75, 76, 77, 78, 80, 81, 82, 83, 84, 85, 86, 87, 88, 90)
DEFAULT_PTX = 80  # what kernels were always compiled with; raised when the target needs more


def target_info(target: str, what: str = "target") -> TargetInfo:
    """The TargetInfo of `target`; CompileOptionError listing the supported ones otherwise."""
    info = SUPPORTED_TARGETS.get(target) if isinstance(target, str) else None
    if info is None:
        raise CompileOptionError(
            f"{what}: expected one of {', '.join(SUPPORTED_TARGETS)} (sm_90a is the tested one), "
            f"got {target!r}")
    return info


def parse_ptx_version(value: str, what: str = "ptx_version") -> int:
    """'ptx85' -> 85, checked against the versions the bundled LLVM knows."""
    number = value[3:] if isinstance(value, str) and value.startswith("ptx") else ""
    if not number.isdigit() or int(number) not in KNOWN_PTX_VERSIONS:
        known = ", ".join(f"ptx{v}" for v in KNOWN_PTX_VERSIONS)
        raise CompileOptionError(f"{what}: expected one of {known}, got {value!r}")
    return int(number)


def ptx_version_for(target: str, requested: str | None) -> str:
    """The PTX ISA to emit for `target`: `requested` if the target accepts it, else an error."""
    info = target_info(target)
    if requested is None:
        return f"ptx{max(DEFAULT_PTX, info.min_ptx)}"
    version = parse_ptx_version(requested)
    if version < info.min_ptx:
        raise CompileOptionError(
            f"ptx_version: {target} needs PTX ISA {info.min_ptx / 10:.1f} or newer "
            f"(ptx{info.min_ptx}), got {requested!r}; leave ptx_version unset to get the right one")
    return requested


def arch_for_capability(major: int, minor: int) -> str:
    """sm_XY, with the 'a' suffix from Hopper on (wgmma and setmaxnreg need sm_90a)."""
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


@functools.cache
def device_capability() -> tuple[int, int] | None:
    """Compute capability of the current CUDA device, or None when there is no usable GPU."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    try:
        (err,) = driver.cuInit(0)
    except Exception:  # noqa: BLE001 - no libcuda.so on this machine: no GPU
        return None
    if err != driver.CUresult.CUDA_SUCCESS:
        return None
    dev = _context_device(driver)
    if dev is None:
        return None
    attr = driver.CUdevice_attribute
    _, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    return int(major), int(minor)


def current_device() -> int | None:
    """The current CUDA device's ordinal (its current context's, else device 0), or None when there
    is no usable GPU. Not cached: the current device may change between calls."""
    if device_capability() is None:
        return None
    from cuda.bindings import driver

    dev = _context_device(driver)
    return None if dev is None else int(dev)


def _context_device(driver: Any) -> Any:
    """The current context's CUdevice, else device 0's, or None where the driver has neither."""
    err, dev = driver.cuCtxGetDevice()
    if err != driver.CUresult.CUDA_SUCCESS:
        err, dev = driver.cuDeviceGet(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
    return dev


def default_target() -> str:
    """The current device's architecture, or sm_90a (Hopper) when there is no GPU.

    A GPU outside SUPPORTED_TARGETS raises CompileOptionError saying so (pass target= to
    compile for another architecture anyway)."""
    cap = device_capability()
    if not cap:
        return "sm_90a"
    target = arch_for_capability(*cap)
    target_info(target, what=f"target (the current GPU is {target}; pass target= explicitly)")
    return target


def check_smem_fits(target: str, dynamic_smem_bytes: int, layout: tuple = (), static_smem_bytes: int = 0) -> None:
    """ResourceLimitError when the kernel's shared memory exceeds what `target` allows a block.

    Checked at build time against the target (227 KiB on sm_90a), so a kernel that can never
    launch fails where it is written, with or without a GPU on this machine."""
    from ..errors import ResourceLimitError

    limit = target_info(target).max_smem_per_block
    total = dynamic_smem_bytes + static_smem_bytes
    if total <= limit:
        return
    profiler = sum(b.nbytes for b in layout if getattr(b, "kind", "") == "profiler")
    parts = f"{dynamic_smem_bytes - profiler} B of buffers"
    if profiler:
        parts += f" + {profiler} B of profiler buffer"
    if static_smem_bytes:
        parts += f" + {static_smem_bytes} B static"
    raise ResourceLimitError(
        f"smem: the kernel needs {total} bytes of shared memory ({parts}) but {target} allows at most "
        f"{limit} bytes ({limit // 1024} KiB) per block")
