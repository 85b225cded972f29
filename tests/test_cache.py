"""The on-disk kernel cache: hits, misses, corrupt entries, several processes at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

from mgpu_lab.compiler import cache as cache_mod
from mgpu_lab.examples.vector_add import make_vector_add


def _entries(root):
    return sorted(p for p in root.glob("*/*") if p.is_dir() and not p.name.startswith("."))


def _fresh_process_view(monkeypatch):
    # Forget the in-memory layer so the next compile reads the disk like a new process would.
    monkeypatch.setattr(cache_mod, "_caches", {})


def test_miss_then_hit_from_disk(tmp_path, monkeypatch):
    k1 = make_vector_add(1 << 12, cache_dir=str(tmp_path))
    assert not k1.compiled.from_cache
    k1.compiled.sass  # noqa: B018 - waits for the background store
    [entry] = _entries(tmp_path)
    assert (entry / "kernel.json").exists()
    _fresh_process_view(monkeypatch)
    k2 = make_vector_add(1 << 12, cache_dir=str(tmp_path))
    assert k2.compiled.from_cache
    assert k2.compiled.cubin == k1.compiled.cubin and k2.compiled.sass == k1.compiled.sass
    assert k2.compiled.line_map == k1.compiled.line_map


def test_different_kernels_and_targets_get_different_entries(tmp_path):
    for n, target in ((1 << 12, "sm_90a"), (1 << 13, "sm_90a"), (1 << 12, "sm_90")):
        make_vector_add(n, cache_dir=str(tmp_path), target=target).compiled.sass  # noqa: B018
    assert len(_entries(tmp_path)) == 3


def test_corrupt_entry_is_recompiled_with_a_warning(tmp_path, monkeypatch):
    make_vector_add(1 << 12, cache_dir=str(tmp_path)).compiled.sass  # noqa: B018
    [entry] = _entries(tmp_path)
    (entry / "kernel.json").write_text("{ this is not json")
    _fresh_process_view(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k = make_vector_add(1 << 12, cache_dir=str(tmp_path))
    assert not k.compiled.from_cache
    assert any("ignoring cache entry" in str(w.message) and "digest does not match" in str(w.message)
               for w in caught)
    k.compiled.sass  # noqa: B018
    _fresh_process_view(monkeypatch)
    assert make_vector_add(1 << 12, cache_dir=str(tmp_path)).compiled.from_cache


def test_truncated_cubin_is_a_miss(tmp_path, monkeypatch):
    make_vector_add(1 << 12, cache_dir=str(tmp_path)).compiled.sass  # noqa: B018
    [entry] = _entries(tmp_path)
    (entry / "kernel.cubin").write_bytes(b"")
    _fresh_process_view(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert not make_vector_add(1 << 12, cache_dir=str(tmp_path)).compiled.from_cache


def test_processes_compiling_the_same_kernel_at_once_agree(tmp_path):
    script = textwrap.dedent(f"""
        import hashlib
        from mgpu_lab.examples.vector_add import make_vector_add
        k = make_vector_add(1 << 15, cache_dir={str(tmp_path)!r})
        k.compiled.sass
        print(hashlib.sha256(k.compiled.cubin).hexdigest())
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert len({o.strip() for o, _ in outs}) == 1
    [entry] = _entries(tmp_path)
    assert not list(entry.parent.glob(".*")), "temporary folders were left behind"


def test_no_cache_option_writes_nothing(tmp_path):
    make_vector_add(1 << 12, cache_dir=str(tmp_path), use_cache=False).compiled.sass  # noqa: B018
    assert _entries(tmp_path) == []
