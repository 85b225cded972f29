"""A kernel cache entry that fails to load in any way is a miss, and a symlinked cache folder
is judged by its target (issue 30)."""

from __future__ import annotations

import json
import os
import warnings

import pytest

from mgpu_lab.compiler import cache as cache_mod
from mgpu_lab.errors import CacheSecurityWarning
from test_cache_security import _build


@pytest.fixture
def cached(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    first = _build(root)
    monkeypatch.setattr(cache_mod, "_caches", {})  # the next build reads the disk like a new process
    [entry] = [p for p in root.glob("*/*") if p.is_dir() and not p.name.startswith(".")]
    return root, entry, first.compiled


def _rewrite_metadata(entry, metadata: bytes) -> None:
    """Replace kernel.json and sign it: the digest matches, only loading can object."""
    (entry / "kernel.json").write_bytes(metadata)
    (entry / "digest").write_text(cache_mod.entry_digest(metadata, (entry / "kernel.cubin").read_bytes()))


def _field_of_wrong_type(meta: dict) -> bytes:
    meta["spec"] = ["not", "a", "dict"]
    return json.dumps(meta).encode()


@pytest.mark.parametrize("hostile", [
    lambda meta: b"[" * 200_000 + b"]" * 200_000,  # RecursionError in json.loads
    _field_of_wrong_type,
    lambda meta: json.dumps({**meta, "grid": "x"}).encode(),
    lambda meta: json.dumps(meta).encode()[:-7],  # truncated
    lambda meta: b"\x80\x04\x95 truncated pickle",
    lambda meta: json.dumps(42).encode(),
], ids=["deep-json", "spec-a-list", "grid-a-string", "truncated", "pickle", "a-number"])
def test_a_signed_entry_that_fails_to_load_is_a_removed_miss(cached, hostile):
    root, entry, first = cached
    _rewrite_metadata(entry, hostile(json.loads((entry / "kernel.json").read_text())))
    with pytest.warns(UserWarning, match="ignoring cache entry"):
        assert cache_mod.KernelCache(root).get(first.cache_key) is None
    assert not entry.exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not _build(root).compiled.from_cache  # recompiled and stored again, silently


def test_a_symlinked_cache_folder_uses_its_private_target(tmp_path, monkeypatch):
    target = tmp_path / "real-cache"
    target.mkdir(mode=0o700)
    link = tmp_path / "cache-link"
    link.symlink_to(target)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no CacheSecurityWarning: the target is private
        _build(link)
    assert [p for p in target.glob("*/*") if not p.name.startswith(".")]
    monkeypatch.setattr(cache_mod, "_caches", {})
    assert _build(link).compiled.from_cache


def test_a_symlink_to_a_shared_folder_names_the_target(tmp_path):
    target = tmp_path / "shared"
    target.mkdir()
    os.chmod(target, 0o777)
    link = tmp_path / "cache-link"
    link.symlink_to(target)
    message = (rf"not using the kernel cache folder {link} \(a symbolic link to {target}\): its target is writable "
               rf"by group or others \(mode 777\).*chmod go-w {target}\)")
    with pytest.warns(CacheSecurityWarning, match=message):
        assert not _build(link).compiled.from_cache
    assert list(target.iterdir()) == []


def test_the_link_is_resolved_once(tmp_path):
    target, other = tmp_path / "first", tmp_path / "second"
    target.mkdir(mode=0o700)
    other.mkdir(mode=0o777)
    os.chmod(other, 0o777)
    link = tmp_path / "cache-link"
    link.symlink_to(target)
    cache = cache_mod.KernelCache(link)
    assert cache.disk_usable()
    link.unlink()
    link.symlink_to(other)  # re-pointed after the check: not followed
    assert cache.root == target.resolve()
