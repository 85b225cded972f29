"""The kernel cache runs nothing it cannot trust: private folders only, digests checked, no
paths built from stored names."""

from __future__ import annotations

import json
import os
import shutil
import warnings

import pytest

from mgpu_lab.compiler import cache as cache_mod
from mgpu_lab.compiler.compiled_kernel import CompiledKernel
from mgpu_lab.errors import CacheSecurityWarning, KernelNameError
from mgpu_lab.examples.vector_add import make_vector_add

N = 1 << 12


def _entry(root):
    [entry] = [p for p in root.glob("*/*") if p.is_dir() and not p.name.startswith(".")]
    return entry


def _fresh_process_view(monkeypatch):
    monkeypatch.setattr(cache_mod, "_caches", {})


def _build(root, **kw):
    k = make_vector_add(N, cache_dir=str(root), **kw)
    k.compiled.sass  # noqa: B018 - waits for the background store
    return k


@pytest.fixture
def cached(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    first = _build(root)
    _fresh_process_view(monkeypatch)
    return root, first


def test_entries_are_private_and_carry_a_digest(cached):
    root, first = cached
    entry = _entry(root)
    assert sorted(p.name for p in entry.iterdir()) == ["digest", "kernel.cubin", "kernel.json"]
    for path in (root, entry.parent, entry, *entry.iterdir()):
        assert os.stat(path).st_mode & 0o077 == 0, f"{path} is readable or writable by others"
    assert (entry / "digest").read_text() == cache_mod.entry_digest((entry / "kernel.json").read_bytes(),
                                                                     first.compiled.cubin)


def test_an_edited_cubin_is_recompiled_not_run(cached, monkeypatch):
    root, first = cached
    entry = _entry(root)
    cubin = bytearray((entry / "kernel.cubin").read_bytes())
    cubin[len(cubin) // 2] ^= 0xFF  # same size, one flipped byte: only the digest can tell
    (entry / "kernel.cubin").write_bytes(bytes(cubin))
    with pytest.warns(UserWarning, match="digest does not match its contents"):
        k = _build(root)
    assert not k.compiled.from_cache and k.compiled.cubin == first.compiled.cubin
    _fresh_process_view(monkeypatch)
    assert _build(root).compiled.from_cache  # the rewritten entry is good again


def test_edited_metadata_is_recompiled(cached):
    root, _ = cached
    entry = _entry(root)
    data = json.loads((entry / "kernel.json").read_text())
    data["grid"] = [1, 1, 1]  # a valid-looking edit that would launch the kernel wrongly
    (entry / "kernel.json").write_text(json.dumps(data))
    with pytest.warns(UserWarning, match="digest does not match"):
        k = _build(root)
    assert not k.compiled.from_cache and k.compiled.grid != (1, 1, 1)


def test_entry_writable_by_others_is_not_loaded(cached):
    root, _ = cached
    entry = _entry(root)
    os.chmod(entry / "kernel.cubin", 0o666)
    with pytest.warns(UserWarning, match=r"kernel.cubin is writable by group or others \(mode 666\)"):
        assert not _build(root).compiled.from_cache


def test_symlinked_entry_file_is_not_followed(cached, tmp_path):
    root, _ = cached
    entry = _entry(root)
    elsewhere = tmp_path / "elsewhere.cubin"
    elsewhere.write_bytes((entry / "kernel.cubin").read_bytes())
    (entry / "kernel.cubin").unlink()
    (entry / "kernel.cubin").symlink_to(elsewhere)
    with pytest.warns(UserWarning, match="kernel.cubin cannot be opened"):
        assert not _build(root).compiled.from_cache


def test_cache_folder_writable_by_others_is_not_used(tmp_path, monkeypatch):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o777)
    with pytest.warns(CacheSecurityWarning, match=r"not using the kernel cache folder .*shared: it is writable by "
                                                  r"group or others \(mode 777\)"):
        k = _build(root)
    assert not k.compiled.from_cache
    assert list(root.iterdir()) == []  # nothing written into it
    # The kernel is still cached in memory for this process: the same artifacts, marked as a hit.
    again = make_vector_add(N, cache_dir=str(root)).compiled
    assert again.from_cache and again.cubin is k.compiled.cubin and again.cache_key == k.compiled.cache_key


def test_cache_folder_owned_by_someone_else_is_not_used(tmp_path, monkeypatch):
    root = tmp_path / "theirs"
    monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)
    with pytest.warns(CacheSecurityWarning, match=r"is owned by uid \d+, not by the current user"):
        assert not _build(root).compiled.from_cache


def test_entry_owned_by_someone_else_is_left_alone(cached, monkeypatch):
    root, _ = cached
    entry = _entry(root)
    real_lstat = os.lstat
    owner = os.stat(entry).st_uid

    def lstat(path, *a, **kw):  # the entry folder appears to belong to another user
        st = real_lstat(path, *a, **kw)
        if os.fspath(path) == os.fspath(entry):
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, owner + 1, *tuple(st)[5:]))
        return st

    monkeypatch.setattr(os, "lstat", lstat)
    with pytest.warns(CacheSecurityWarning, match="it is owned by uid"):
        assert not _build(root).compiled.from_cache
    assert entry.is_dir()  # not deleted: it is not ours


def test_stored_name_never_builds_a_path(cached, tmp_path):
    root, first = cached
    outside = tmp_path / "x.cubin"
    outside.write_bytes(b"outside the entry")
    folder = tmp_path / "dump"
    first.compiled.save(folder)
    data = json.loads((folder / "kernel.json").read_text())
    data["spec"]["name"] = "../../x"
    (folder / "kernel.json").write_text(json.dumps(data))
    with pytest.raises(KernelNameError, match=r"kernel.json: name: expected an ASCII identifier.*got '../../x'"):
        CompiledKernel.load(folder)
    # A cache entry whose stored name is hostile is a miss, even with a matching digest.
    entry = _entry(root)
    meta = json.loads((entry / "kernel.json").read_text())
    meta["spec"]["name"] = "../../x"
    blob = json.dumps(meta).encode()
    (entry / "kernel.json").write_bytes(blob)
    (entry / "digest").write_text(cache_mod.entry_digest(blob, (entry / "kernel.cubin").read_bytes()))
    with pytest.warns(UserWarning, match="its kernel name: expected an ASCII identifier"):
        assert not _build(root).compiled.from_cache


def test_load_reads_the_single_cubin_of_a_dump(cached, tmp_path):
    _, first = cached
    folder = first.compiled.save(tmp_path / "dump")
    assert CompiledKernel.load(folder).cubin == first.compiled.cubin
    (folder / "other.cubin").write_bytes(b"x")
    with pytest.raises(ValueError, match="expected exactly one .cubin file beside kernel.json, found 2"):
        CompiledKernel.load(folder)


def test_failed_write_leaves_no_temporary_folder(tmp_path, monkeypatch):
    root = tmp_path / "cache"

    def fail(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_mod, "_write_private", fail)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _build(root)
    assert any("could not write kernel cache entry" in str(w.message) for w in caught)
    assert [p for p in root.rglob("*") if p.is_file() or p.name.startswith(".")] == []


def test_a_digest_with_non_ascii_bytes_is_a_mismatch(cached):
    root, first = cached
    entry = _entry(root)
    good = (entry / "digest").read_bytes()
    (entry / "digest").write_bytes(b"\xff\xfe" + good[2:])
    with pytest.warns(UserWarning, match="digest does not match its contents"):
        assert cache_mod.KernelCache(root).get(first.compiled.cache_key) is None
    assert not entry.exists()  # ours and broken: removed


def test_a_whole_entry_under_another_key_is_not_loaded(cached):
    """A valid entry copied (or renamed) to another key's place: digest and name pass, the key does not."""
    root, first = cached
    cache = cache_mod.KernelCache(root)
    # a key in another shard folder than the entry's (its key hashes the package's sources: any prefix)
    other = ("f" if first.compiled.cache_key.startswith("0") else "0") * 64
    cache._entry(other).parent.mkdir(mode=0o700)
    shutil.copytree(_entry(root), cache._entry(other))
    with pytest.warns(UserWarning, match=r"\(it does not match its key\); recompiling"):
        assert cache.get(other) is None
    assert cache.get(first.compiled.cache_key).cubin == first.compiled.cubin


def test_a_loose_shard_folder_of_ours_is_made_private_on_store(cached, monkeypatch):
    root, first = cached
    entry = _entry(root)
    shutil.rmtree(entry.parent)
    entry.parent.mkdir()
    os.chmod(entry.parent, 0o775)  # made under a loose umask by an older version
    cache_mod.KernelCache(root).put(first.compiled.cache_key, first.compiled)
    assert os.stat(entry.parent).st_mode & 0o777 == 0o700
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache_mod.KernelCache(root).get(first.compiled.cache_key).from_cache


def test_a_broken_entry_removed_by_another_process_meanwhile_is_replaced(cached, monkeypatch):
    root, first = cached
    entry = _entry(root)
    (entry / "digest").unlink()  # an old, incomplete entry in the way
    real_rmtree = shutil.rmtree

    def rmtree(path, *args, **kwargs):
        if os.fspath(path) == os.fspath(entry) and entry.exists():
            real_rmtree(entry)  # another process cleaned it up first
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache_mod.KernelCache(root).put(first.compiled.cache_key, first.compiled)
        assert cache_mod.KernelCache(root).get(first.compiled.cache_key).cubin == first.compiled.cubin
