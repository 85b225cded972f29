"""The kernel cache key covers every compile option that changes generated code.

Parametrized over `CompileOptions`' fields: a new option must be listed here either with a
value that changes the code (and so the key) or as one that does not; otherwise the test fails.
"""

from __future__ import annotations

import dataclasses

import pytest

from mgpu_lab.compiler.options import CompileOptions
from mgpu_lab.examples.vector_add import make_vector_add

# Option -> a non-default value that changes the generated code, so it must change the key.
CHANGES_CODE = {
    "target": "sm_90",
    "ptx_version": "ptx81",
    "opt_level": 0,
    "line_info": False,
    "ptxas_args": ("--def-load-cache", "cg"),
    "mbarrier_timeout_s": 1.0,
    "max_registers": 64,
    "min_blocks_per_sm": 2,
}
# Option -> a non-default value that only changes where artifacts go; the key must not move.
DOES_NOT_CHANGE_CODE = {
    "keep_passes": True,
    "dump_dir": "DUMP",  # replaced by a tmp folder below
    "use_cache": False,
    "cache_dir": "CACHE",
}


def _key(tmp_path, **option) -> str:
    option = {k: str(tmp_path / v) if v in ("DUMP", "CACHE") else v for k, v in option.items()}
    option.setdefault("cache_dir", str(tmp_path / "cache"))
    k = make_vector_add(1 << 10, target=option.pop("target", "sm_90a"), **option)
    return k.compiled.cache_key


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(CompileOptions)])
def test_every_option_is_in_the_key_or_declared_irrelevant(field, tmp_path):
    assert field in CHANGES_CODE or field in DOES_NOT_CHANGE_CODE, (
        f"CompileOptions.{field} is new: add it to CHANGES_CODE (and to the cache key) or to "
        f"DOES_NOT_CHANGE_CODE in {__file__}")
    default = _key(tmp_path)
    if field in CHANGES_CODE:
        changed = _key(tmp_path, **{field: CHANGES_CODE[field]})
        assert changed != default, f"{field}={CHANGES_CODE[field]!r} reused the default build's cache entry"
    else:
        assert _key(tmp_path, **{field: DOES_NOT_CHANGE_CODE[field]}) == default


def test_an_opt_level_0_build_does_not_reuse_the_o3_cubin(tmp_path):
    o3 = make_vector_add(1 << 10, cache_dir=str(tmp_path), target="sm_90a")
    o3.compiled.sass  # noqa: B018 - waits for the cache entry to be stored
    o0 = make_vector_add(1 << 10, cache_dir=str(tmp_path), target="sm_90a", opt_level=0)
    assert not o0.compiled.from_cache
    assert o0.compiled.cubin != o3.compiled.cubin
