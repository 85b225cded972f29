"""Swizzled smem stores, checked by running the emitted index arithmetic on the host.

`FragmentedArray.store_tiled` emits, per thread, the address arithmetic and the element
selection (which half of a register goes first on odd swizzle rows). A tiny interpreter runs
that MLIR for all 128 threads of the warpgroup, with gmem loads returning the (row, col) of the
element they read. Every element must land where a TMA store with the same swizzle reads it,
each exactly once, and every store instruction of a warp must be bank-conflict free.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from host_arith import INT_OPS

import mgpu_lab
from mgpu_lab._mlir import ir
from mgpu_lab.builder.fragmented import FragmentedArray
from mgpu_lab.builder.layouts import WGMMAFragLayout
from mgpu_lab.compiler.compiled_kernel import dtype_itemsize
from mgpu_lab.widgets.bank_model import Access, bank_conflicts, swizzle_address

_CMPI = {0: lambda a, b: a == b, 1: lambda a, b: a != b}


def translate(func) -> list[tuple]:
    """The kernel body as [(op name, result name, operand names, static data)], read once."""
    program = []
    for position, op in enumerate(func.regions[0].blocks[0].operations):
        op = op.operation
        name = op.name
        operands = [v.get_name() for v in op.operands]
        result = op.results[0].get_name() if len(op.results) else None
        static = None
        if name in ("gpu.thread_id", "gpu.block_dim"):
            static = str(op.attributes["dimension"]).endswith("x>")
        elif name == "arith.constant":
            attr = op.attributes["value"]
            static = ir.IntegerAttr(attr).value if "index" in str(attr.type) or str(attr.type).startswith("i") \
                else None
        elif name == "arith.cmpi":
            static = ir.IntegerAttr(op.attributes["predicate"]).value
        elif name == "vector.load":
            static = ir.VectorType(op.results[0].type).shape[0]
        elif name == "vector.extract":
            static = ir.DenseI64ArrayAttr(op.attributes["static_position"])[0]
        elif name == "vector.store":
            static = position
        elif name not in INT_OPS and name not in ("arith.select", "vector.from_elements",
                                                   "gpu.dynamic_shared_memory", "memref.view", "gpu.return"):
            raise NotImplementedError(f"the host interpreter does not know {name}")
        program.append((name, result, operands, static))
    return program


def run_thread(program: list[tuple], tid: int, block: int = 128) -> list[tuple]:
    """Run the translated body as thread `tid`: [(store position, smem index, stored elements)]."""
    env: dict[str, object] = {}
    stores = []
    for name, result, operands, static in program:
        args = [env.get(o) for o in operands]
        if name == "gpu.thread_id":
            out = tid if static else 0
        elif name == "gpu.block_dim":
            out = block if static else 1
        elif name == "arith.constant":
            out = static
        elif name in INT_OPS:
            out = INT_OPS[name](*args)
        elif name == "arith.cmpi":
            out = _CMPI[static](*args)
        elif name == "arith.select":
            out = args[1] if args[0] else args[2]
        elif name == "vector.load":
            row, col = args[1:]
            out = [(row, col + k) for k in range(static)]  # gmem loads read the element's coordinates
        elif name == "vector.extract":
            out = args[0][static]
        elif name == "vector.from_elements":
            out = list(args)
        elif name == "vector.store":
            stores.append((static, tuple(args[2:]), args[0]))
            continue
        else:
            out = None
        if result is not None:
            env[result] = out
    return stores


def _program(kernel: mgpu_lab.Kernel) -> list[tuple]:
    """The translated body of the kernel's one gpu.func."""
    with ir.Context() as context, ir.Location.unknown():
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(kernel.compiled.mlir)
        gpu_module = module.body.operations[0].operation
        func = next(op.operation for op in gpu_module.regions[0].blocks[0].operations
                    if op.operation.name == "gpu.func")
        return translate(func)


def _smem_written(program: list[tuple], itemsize: int, element_offset) -> tuple[dict, dict]:
    """Run all 128 threads: ({physical byte: the (row, col) stored there}, {(store position, warp):
    its lanes' Accesses}); `element_offset(chunk, row, col)` is an smem index's element offset.
    A byte stored twice fails."""
    smem: dict[int, tuple[int, int]] = {}
    per_instruction: dict[tuple[int, int], list[Access]] = defaultdict(list)
    for tid in range(128):
        for position, index, elements in run_thread(program, tid):
            base = element_offset(*index) * itemsize  # the physical byte offset
            for k, element in enumerate(elements):
                assert base + k * itemsize not in smem, f"two stores to byte {base + k * itemsize}"
                smem[base + k * itemsize] = element
            per_instruction[(position, tid // 32)].append(Access(tid % 32, base, len(elements) * itemsize))
    return smem, per_instruction


def make_store_tiled(dtype: str, swizzle: int, m: int = 64, chunks: int = 2) -> mgpu_lab.Kernel:
    width = swizzle // dtype_itemsize(dtype)
    n = chunks * width
    sd = mgpu_lab.ShapeDtype((m, n), dtype)

    def store_tiled(ctx, x, out, smem):
        (tile,) = smem
        FragmentedArray.load(x, layout=WGMMAFragLayout(n, m)).store_tiled(tile, swizzle)

    return mgpu_lab.kernel(store_tiled, grid=1, block=128, in_shapes=sd, out_shapes=sd,
                           smem=(mgpu_lab.ShapeDtype((chunks, m, width), dtype),), name=f"st_{dtype}_{swizzle}")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8_e4m3fn"])
@pytest.mark.parametrize("swizzle", [32, 64, 128])
def test_store_tiled_puts_each_element_where_the_tma_store_reads_it(dtype, swizzle):
    m, chunks = 64, 2
    itemsize, width = dtype_itemsize(dtype), swizzle // dtype_itemsize(dtype)
    program = _program(make_store_tiled(dtype, swizzle, m, chunks))
    smem, per_instruction = _smem_written(program, itemsize,
                                          lambda chunk, row, col: chunk * m * width + row * width + col)
    assert len(smem) == m * chunks * width, "every element is stored exactly once"
    for (row, col) in ((r, c) for r in range(m) for c in range(chunks * width)):
        logical = (col // width) * m * swizzle + row * swizzle + (col % width) * itemsize
        assert smem[swizzle_address(logical, swizzle)] == (row, col), (row, col)
    for (position, warp), accesses in per_instruction.items():
        report = bank_conflicts(accesses)
        assert report.degree == 1.0, (position, warp, report.max_way)


def make_store_tiled_transposed(dtype: str, swizzle: int, m: int, n: int) -> mgpu_lab.Kernel:
    width = swizzle // dtype_itemsize(dtype)
    sd = mgpu_lab.ShapeDtype((m, n), dtype)

    def store_tiled_transposed(ctx, x, out, smem):
        (tile,) = smem
        FragmentedArray.load(x, layout=WGMMAFragLayout(n, m)).store_tiled_transposed(tile, swizzle)

    return mgpu_lab.kernel(store_tiled_transposed, grid=1, block=128, in_shapes=sd, out_shapes=sd,
                           smem=(mgpu_lab.ShapeDtype((m // width, n, width), dtype),),
                           name=f"stt_{dtype}_{swizzle}_{m}x{n}")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("swizzle", [32, 64, 128])
@pytest.mark.parametrize("m, n", [(64, 8), (128, 24)])
def test_store_tiled_transposed_puts_each_element_where_the_tma_store_of_the_transpose_reads_it(dtype, swizzle, m, n):
    """A swapped GEMM tile (C.T in the registers) goes to smem as C: element (i, j) where a TMA
    store of the (n, m) transpose with the same swizzle reads its (j, i), each exactly once; a
    warp's 2-byte stores are served in one wavefront (4 rows, one 16-byte unit each), its
    4-byte ones in at most two."""
    itemsize, width = dtype_itemsize(dtype), swizzle // dtype_itemsize(dtype)
    program = _program(make_store_tiled_transposed(dtype, swizzle, m, n))
    smem, per_instruction = _smem_written(program, itemsize,
                                          lambda chunk, row, col: chunk * n * width + row * width + col)
    assert len(smem) == m * n, "every element is stored exactly once"
    for i, j in ((i, j) for i in range(m) for j in range(n)):
        logical = (i // width) * n * swizzle + j * swizzle + (i % width) * itemsize  # the transpose's (j, i)
        assert smem[swizzle_address(logical, swizzle)] == (i, j), (i, j)
    worst = max(bank_conflicts(accesses).degree for accesses in per_instruction.values())
    assert worst <= (1.0 if itemsize == 2 else 2.0), worst
