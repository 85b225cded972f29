"""Module + KernelSpec -> CompiledKernel: passes, PTX, cubin, SASS, resources, line map; cached."""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor

from .._mlir import ir
from ..errors import PerformanceWarning
from ..user_errors import warn_at_user
from .assemble import assemble, parse_resources, serialization_warnings
from .cache import KernelCache, cache_key, kernel_cache
from .compiled_kernel import CompiledKernel
from .disassemble import build_line_map, disassemble
from .kernel_spec import KernelSpec
from .options import CompileOptions
from .pipeline import extract_ptx, pass_list, run_pipeline, verify
from .target import check_smem_fits, default_target, ptx_version_for
from .toolchain import versions

PIPELINE_VERSION = "1"


def compile_module(module: ir.Module, spec: KernelSpec, options: CompileOptions | None = None
                   ) -> CompiledKernel:
    """Compile a built module. Consumes `module` (the passes rewrite it in place)."""
    options = options or CompileOptions.from_env()
    t_start = time.perf_counter()
    target = options.target or default_target()
    ptx_version = ptx_version_for(target, options.ptx_version)
    check_smem_fits(target, spec.dynamic_smem_bytes, spec.smem_layout)
    verify(module)
    module_text = module.operation.get_asm(enable_debug_info=True)
    key = cache_key(PIPELINE_VERSION, module_text, spec.fingerprint(), target, ptx_version,
                    repr(sorted(options.key_fields().items())), repr(sorted(versions().items())))
    cache = kernel_cache(options.resolved_cache_dir()) if options.use_cache else None
    if cache is not None:
        hit = cache.get(key)
        if hit is not None and (hit.passes or not options.keep_passes):
            if options.dump_dir:
                hit.save(options.dump_dir)
            _surface_ptxas_warnings(hit)
            # A copy that says it came from the cache (memory or disk), so that build times shown
            # beside it (the demo's, a notebook's) are read as loads, not compiles.
            return hit if hit.from_cache else dataclasses.replace(hit, from_cache=True)

    passes = pass_list(target, ptx_version, options.opt_level, options.line_info)
    recorded, pass_timings = run_pipeline(module, passes, options.keep_passes)
    ptx = extract_ptx(module)
    t_ptx = time.perf_counter()
    cubin, ptxas_log = assemble(ptx, target, options.opt_level, options.line_info, options.ptxas_args)
    t_cubin = time.perf_counter()
    resources = parse_resources(ptxas_log, spec.dynamic_smem_bytes)
    check_smem_fits(target, spec.dynamic_smem_bytes, spec.smem_layout, resources.static_smem_bytes)
    kernel = CompiledKernel(
        spec=spec, target=target, mlir=module_text, ptx=ptx, cubin=cubin,
        resources=resources, passes=tuple(recorded), pass_seconds=tuple(pass_timings),
        ptxas_log=ptxas_log,
        toolchain=dict(versions()), cache_key=key,
        compile_seconds={"mlir_to_ptx": t_ptx - t_start, "ptxas": t_cubin - t_ptx,
                         "total": time.perf_counter() - t_start},
    )
    # The kernel can launch now; SASS, the line map and the cache entry follow in the background.
    kernel.disassembly = _background.submit(_disassemble_and_store, kernel, cubin, ptx, cache, key)
    if options.dump_dir:
        kernel.save(options.dump_dir)
    _surface_ptxas_warnings(kernel)
    return kernel


def _surface_ptxas_warnings(kernel: CompiledKernel) -> None:
    """ptxas notes that cost speed become PerformanceWarnings at the user's line."""
    for message in serialization_warnings(kernel.ptxas_log, kernel.ptx):
        warn_at_user(message, PerformanceWarning)


_background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mgpu_lab_nvdisasm")


def _disassemble_and_store(kernel: CompiledKernel, cubin: bytes, ptx: str, cache: KernelCache | None,
                           key: str) -> tuple[str, tuple, dict]:
    t0 = time.perf_counter()
    sass = disassemble(cubin)
    line_map, sources = build_line_map(ptx, sass)
    kernel.compile_seconds["nvdisasm"] = time.perf_counter() - t0
    if cache is not None:
        # Publish the finished kernel to the cache only once it is whole.
        kernel.set_disassembly(sass, line_map, sources)
        cache.put(key, kernel)
    return sass, line_map, sources
