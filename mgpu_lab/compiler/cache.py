"""On-disk cache of compiled kernels, keyed by module hash + spec + target + toolchain versions.

Safe for several processes compiling at once: an entry is written into a private temporary
folder and renamed into place in one step, so readers see a whole entry or none.

A cache entry is code this process will run on the GPU, so the cache trusts no one but the
current user:
- the cache folder must be owned by the current user and not writable by group or others;
  otherwise a `CacheSecurityWarning` says why, and kernels are cached in memory only (they
  still compile and run, nothing is read from or written to that folder); a cache folder that
  is a symbolic link is resolved once and its target is the folder checked and used;
- every entry (its folder and files) must be the user's and private in the same way, and is
  read through file descriptors opened without following symlinks;
- each entry stores a SHA-256 digest of its metadata and cubin, written last; an entry
  whose digest does not match (edited, truncated, half-copied) is a miss: it is removed with
  a warning and the kernel is recompiled. So is an entry whose digest matches but whose
  contents fail to load in any way (hostile JSON nesting, wrong field types).
File names inside an entry are fixed (`kernel.json`, `kernel.cubin`, `digest`); nothing
read from an entry ever becomes part of a path.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import warnings
from pathlib import Path

from ..errors import CacheSecurityWarning
from .compiled_kernel import CompiledKernel
from .kernel_names import check_kernel_name

_METADATA, _CUBIN, _DIGEST = "kernel.json", "kernel.cubin", "digest"


def cache_key(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def entry_digest(metadata: bytes, cubin: bytes) -> str:
    """The digest stored with an entry: SHA-256 over its metadata and cubin, each length-prefixed."""
    h = hashlib.sha256()
    for part in (metadata, cubin):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def privacy_problem(st: os.stat_result, what: str) -> str | None:
    """Why a file or folder with this lstat result is not private to the current user, or None."""
    if not hasattr(os, "getuid"):
        return None  # no POSIX owners here (Windows): nothing to check
    if stat.S_ISLNK(st.st_mode):
        return f"{what} is a symbolic link"
    if st.st_uid != os.getuid():
        return f"{what} is owned by uid {st.st_uid}, not by the current user (uid {os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{what} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _folder_advice(problem: str, folder: Path) -> str:
    """What to do about a cache folder refused for `problem` (`privacy_problem`'s words)."""
    if "writable by group or others" in problem:
        return f"Make it private (chmod go-w {folder}) or set MGPU_LAB_CACHE_DIR to a folder only you can write."
    return "Set MGPU_LAB_CACHE_DIR to a folder you own that only you can write."


class UntrustedEntry(Exception):
    """An entry that must not be loaded; the message says why."""


def _read_private(path: Path) -> bytes:
    """Read a file that must be a regular file owned by the user and not writable by others."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        raise UntrustedEntry(f"{path.name} cannot be opened ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        problem = privacy_problem(st, path.name) or (None if stat.S_ISREG(st.st_mode) else f"{path.name} is not a file")
        if problem:
            raise UntrustedEntry(problem)
        return f.read()


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


class KernelCache:
    """A folder of entries `<key[:2]>/<key>/`, each holding kernel.json, kernel.cubin and digest."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.memory: dict[str, CompiledKernel] = {}
        self._disk_ok: bool | None = None  # decided on first use

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def disk_usable(self) -> bool:
        """True when the cache folder is private to this user (created so if missing).

        A cache folder that is a symbolic link is resolved here, once: its target is the folder
        checked and used from then on (re-pointing the link later changes nothing)."""
        if self._disk_ok is None:
            problem, shown, what = None, str(self.root), "it"
            try:
                self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
                if self.root.is_symlink():
                    target = self.root.resolve(strict=True)
                    shown, what = f"{self.root} (a symbolic link to {target})", "its target"
                    self.root = target
                problem = privacy_problem(os.lstat(self.root), what)
            except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop (before Python 3.13)
                problem = f"it cannot be created or resolved ({getattr(e, 'strerror', None) or e})"
            if problem:
                warnings.warn(
                    f"mgpu_lab: not using the kernel cache folder {shown}: {problem}. Kernels are cached in "
                    f"memory only. {_folder_advice(problem, self.root)}", CacheSecurityWarning, stacklevel=4)
            self._disk_ok = problem is None
        return self._disk_ok

    def get(self, key: str) -> CompiledKernel | None:
        if key in self.memory:
            return self.memory[key]
        if not self.disk_usable():
            return None
        entry = self._entry(key)
        try:
            st = os.lstat(entry)
        except OSError:
            return None
        try:
            kernel = self._load(entry, st, key)
        except Exception as e:  # noqa: BLE001 - whatever the stored bytes make the parser do (a
            # RecursionError for deeply nested JSON, an AttributeError for a list where a dict
            # belongs...), the entry is a miss, never a crash
            self._discard(entry, e)
            return None
        kernel.from_cache = True
        self.memory[key] = kernel
        return kernel

    def _load(self, entry: Path, st: os.stat_result, key: str) -> CompiledKernel:
        for path, path_st, what in ((entry.parent, os.lstat(entry.parent), "its shard folder"), (entry, st, "it")):
            problem = privacy_problem(path_st, what)
            if problem:
                raise UntrustedEntry(problem)
        metadata, cubin = _read_private(entry / _METADATA), _read_private(entry / _CUBIN)
        digest = _read_private(entry / _DIGEST).decode("ascii", "replace").strip()
        if digest != entry_digest(metadata, cubin):
            raise UntrustedEntry("its digest does not match its contents (edited or incomplete)")
        kernel = CompiledKernel.from_json(json.loads(metadata), cubin)
        check_kernel_name(kernel.name, "its kernel name")
        if kernel.cache_key != key or not kernel.cubin:
            raise UntrustedEntry("it does not match its key")
        return kernel

    def _discard(self, entry: Path, reason: Exception) -> None:
        """Warn; remove the entry when it is ours (someone else's cannot be trusted or deleted)."""
        untrusted = isinstance(reason, UntrustedEntry) and "owned by uid" in str(reason)
        warnings.warn(f"mgpu_lab: ignoring cache entry {entry} ({reason}); recompiling",
                      CacheSecurityWarning if untrusted else UserWarning, stacklevel=4)
        if not untrusted and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.is_symlink():
            entry.unlink(missing_ok=True)

    def put(self, key: str, kernel: CompiledKernel) -> None:
        self.memory[key] = kernel
        if not self.disk_usable():
            return
        entry = self._entry(key)
        tmp = None
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)  # removed since first use: made again
            entry.parent.mkdir(exist_ok=True, mode=0o700)
            shard = os.lstat(entry.parent)
            if hasattr(os, "getuid") and not stat.S_ISLNK(shard.st_mode) and shard.st_uid == os.getuid():
                os.chmod(entry.parent, 0o700)  # ours: made private even if an older umask was loose
            tmp = Path(tempfile.mkdtemp(prefix=f".{key[:8]}-", dir=entry.parent))
            metadata = json.dumps(kernel.to_json(), indent=1).encode()
            _write_private(tmp / _METADATA, metadata)
            _write_private(tmp / _CUBIN, kernel.cubin)
            _write_private(tmp / _DIGEST, entry_digest(metadata, kernel.cubin).encode())  # last: marks it whole
            try:
                os.rename(tmp, entry)
                tmp = None
            except OSError:
                # Another process stored the same key first (keep it), or an old broken entry is
                # in the way (replace it).
                if entry.is_dir() and not entry.is_symlink() and not (entry / _DIGEST).is_file():
                    shutil.rmtree(entry, ignore_errors=True)
                    os.rename(tmp, entry)
                    tmp = None
        except OSError as e:
            warnings.warn(f"mgpu_lab: could not write kernel cache entry {entry}: {e}", stacklevel=3)
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)


_caches: dict[Path, KernelCache] = {}


def kernel_cache(root: Path) -> KernelCache:
    """One KernelCache per folder per process (its in-memory layer is shared)."""
    root = Path(root)
    if root not in _caches:
        _caches[root] = KernelCache(root)
    return _caches[root]
