"""On-disk cache of compiled kernels, keyed by module hash + spec + target + toolchain versions.

Safe for several processes compiling at once: an entry is written into a private temporary
folder and renamed into place in one step, so readers see a whole entry or none. A corrupt or
partial entry is treated as a miss (and replaced), never as an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from .compiled_kernel import CompiledKernel


def cache_key(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


class KernelCache:
    """A folder of entries `<key[:2]>/<key>/` each holding kernel.json and the cubin."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.memory: dict[str, CompiledKernel] = {}

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> CompiledKernel | None:
        if key in self.memory:
            return self.memory[key]
        entry = self._entry(key)
        if not entry.is_dir():
            return None
        try:
            kernel = CompiledKernel.load(entry)
            if kernel.cache_key != key or not kernel.cubin:
                raise ValueError("entry does not match its key")
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
            warnings.warn(f"mgpu_lab: ignoring corrupt cache entry {entry} ({e}); recompiling", stacklevel=3)
            shutil.rmtree(entry, ignore_errors=True)
            return None
        kernel.from_cache = True
        self.memory[key] = kernel
        return kernel

    def put(self, key: str, kernel: CompiledKernel) -> None:
        self.memory[key] = kernel
        entry = self._entry(key)
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{key[:8]}-", dir=entry.parent))
            kernel.save(tmp)
            try:
                os.rename(tmp, entry)
            except OSError:
                # Another process stored the same key first, or an old corrupt entry is in the
                # way: replace the latter, keep the former.
                if entry.is_dir() and not (entry / "kernel.json").is_file():
                    shutil.rmtree(entry, ignore_errors=True)
                    os.rename(tmp, entry)
                else:
                    shutil.rmtree(tmp, ignore_errors=True)
        except OSError as e:
            warnings.warn(f"mgpu_lab: could not write kernel cache entry {entry}: {e}", stacklevel=3)


_caches: dict[Path, KernelCache] = {}


def kernel_cache(root: Path) -> KernelCache:
    """One KernelCache per folder per process (its in-memory layer is shared)."""
    root = Path(root)
    if root not in _caches:
        _caches[root] = KernelCache(root)
    return _caches[root]
