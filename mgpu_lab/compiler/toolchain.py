"""Finds the CUDA tools (ptxas, nvdisasm) — from pip wheels first, so no CUDA toolkit is needed."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import ToolchainError


def _wheel_bin_dirs() -> list[Path]:
    # nvidia-cuda-nvcc / nvidia-cuda-nvdisasm wheels put their tools in site-packages/nvidia/<pkg>/bin.
    dirs = []
    for entry in sys.path:
        root = Path(entry) / "nvidia"
        if root.is_dir():
            dirs += sorted(p for p in root.glob("*/bin") if p.is_dir())
    return dirs


def _candidate_dirs() -> list[Path]:
    dirs = _wheel_bin_dirs()
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]) / "bin")
    dirs.append(Path("/usr/local/cuda/bin"))
    return dirs


@functools.cache
def find_tool(name: str) -> str:
    """Path of a CUDA tool: $MGPU_LAB_<NAME>, the pip wheels, $CUDA_HOME/bin, /usr/local/cuda/bin, PATH."""
    override = os.environ.get(f"MGPU_LAB_{name.upper()}")
    if override:
        if not os.access(override, os.X_OK):
            raise ToolchainError(f"MGPU_LAB_{name.upper()}={override!r} is not an executable file")
        return override
    for d in _candidate_dirs():
        path = d / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which(name)
    if found:
        return found
    raise ToolchainError(
        f"{name} not found: install the CUDA tool wheels (pip install nvidia-cuda-nvcc "
        f"nvidia-cuda-nvdisasm), set CUDA_HOME, or set MGPU_LAB_{name.upper()} to its path")


@functools.cache
def tool_version(name: str) -> str:
    """The last line of `<tool> --version`, e.g. 'Build cuda_13.0.r13.0/compiler.36424714_0'."""
    out = subprocess.run([find_tool(name), "--version"], capture_output=True, text=True, check=False)
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    return lines[-1] if lines else "unknown"


@functools.cache
def versions() -> dict[str, str]:
    """Versions that affect generated code: part of every cache key."""
    def dist(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    from ..version import __version__

    return {
        "mgpu_lab": __version__,
        "mgpu_lab_code": _code_fingerprint(),
        "mlir": dist("xtc-mlir-python-bindings"),
        "ptxas": tool_version("ptxas"),
        "nvdisasm": tool_version("nvdisasm"),
    }


def _code_fingerprint() -> str:
    """Hash of the compiler's and builder's sources, so editing a pass, a PTX fix-up or an
    emitted op sequence invalidates cached kernels."""
    import hashlib

    h = hashlib.sha256()
    package = Path(__file__).parent.parent
    for path in sorted([*package.glob("compiler/*.py"), *package.glob("builder/*.py"), *package.glob("profiler/format.py")]):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]
