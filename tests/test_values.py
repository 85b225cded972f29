"""Typed values: operators on index/iN/fN values emit the right ops, at the user's line."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.builder.values import FloatValue, IndexValue, IntValue, UnsignedIntValue, VectorValue
from mgpu_lab.dsl import ir, memref

THIS_FILE = __file__


def trace(body, in_dtype="int32", out_dtype=None, n=128):
    """Trace `body(x, y)` (x a loaded scalar of in_dtype, y a second one) into a kernel, return
    the MLIR text (with locations) of the built module."""
    sd_in = mgpu_lab.ShapeDtype((n,), in_dtype)
    sd_out = mgpu_lab.ShapeDtype((n,), out_dtype or in_dtype)

    def kernel_body(ctx, a, out, smem):
        i = dsl.thread_idx()
        result = body(memref.load(a, [i]), memref.load(a, [i + 1]), i)
        memref.store(result, out, [i])

    k = mgpu_lab.kernel(kernel_body, grid=1, block=n - 1, in_shapes=sd_in, out_shapes=sd_out,
                        use_cache=False, target="sm_90a")
    return k


def ops(k) -> list[str]:
    """The arith/math ops the expression emitted (the harness's `i + 1` dropped)."""
    found = re.findall(r"= (arith\.\w+|math\.\w+)", k.compiled.mlir)
    assert found[:2] == ["arith.constant", "arith.addi"]
    return found[2:]


def test_results_and_block_arguments_come_back_typed():
    seen = {}

    def body(ctx, a, out, smem):
        i = dsl.thread_idx()
        x = memref.load(a, [i])
        seen.update(i=i, x=x, half=dsl.c(0.5, "float16"), i32=dsl.c(1, "int32"), vec=dsl.c(1.0, ir.VectorType.get(
            [4], ir.F32Type.get())), unsigned=dsl.c(1, "int32").unsigned)

        @dsl.for_range(0, 4, carry=x)
        def acc(k, acc):
            seen.update(k=k, acc=acc)
            return acc + 1.0
        memref.store(acc, out, [i])

    sd = mgpu_lab.ShapeDtype((128,), "float32")
    mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd, use_cache=False, target="sm_90a")
    assert isinstance(seen["i"], IndexValue) and isinstance(seen["k"], IndexValue)
    assert isinstance(seen["x"], FloatValue) and isinstance(seen["acc"], FloatValue)
    assert isinstance(seen["half"], FloatValue) and isinstance(seen["vec"], VectorValue)
    assert type(seen["i32"]) is IntValue and isinstance(seen["unsigned"], UnsignedIntValue)


@pytest.mark.parametrize("expr, expected", [
    (lambda x, y, i: x + y, ["arith.addi"]),
    (lambda x, y, i: x - 3, ["arith.constant", "arith.subi"]),
    (lambda x, y, i: 3 - x, ["arith.constant", "arith.subi"]),
    (lambda x, y, i: x * y, ["arith.muli"]),
    (lambda x, y, i: x // y, ["arith.divsi"]),
    (lambda x, y, i: x % y, ["arith.remsi"]),
    (lambda x, y, i: x >> y, ["arith.shrsi"]),
    (lambda x, y, i: x << 2, ["arith.constant", "arith.shli"]),
    (lambda x, y, i: (x & y) | (x ^ y), ["arith.andi", "arith.xori", "arith.ori"]),
    (lambda x, y, i: (x.unsigned // y).signed, ["arith.divui"]),
    (lambda x, y, i: (x.unsigned % y) >> 1, ["arith.remui", "arith.constant", "arith.shrui"]),
    (lambda x, y, i: -x, ["arith.constant", "arith.subi"]),
    (lambda x, y, i: ~x, ["arith.constant", "arith.xori"]),
    (lambda x, y, i: dsl.min(x, y, 7), ["arith.minsi", "arith.constant", "arith.minsi"]),
    (lambda x, y, i: dsl.max(x.unsigned, y), ["arith.maxui"]),
    (lambda x, y, i: dsl.select(x < y, x, 0), ["arith.cmpi", "arith.constant", "arith.select"]),
])
def test_int32_operators_emit_signed_ops_unless_unsigned(expr, expected):
    k = trace(expr)
    assert ops(k) == expected
    assert ops(k)  # and the kernel compiled to SASS
    assert k.compiled.sass


@pytest.mark.parametrize("expr, pred", [
    (lambda x, y: x < y, "slt"), (lambda x, y: x <= y, "sle"), (lambda x, y: x > y, "sgt"),
    (lambda x, y: x >= y, "sge"), (lambda x, y: x == y, "eq"), (lambda x, y: x != y, "ne"),
    (lambda x, y: x.unsigned < y, "ult"), (lambda x, y: 5 > x, "slt"),
])
def test_int_comparisons(expr, pred):
    k = trace(lambda x, y, i: dsl.select(expr(x, y), x, y))
    assert re.search(rf"arith\.cmpi {pred},", k.compiled.mlir)


def test_index_is_unsigned():
    k = trace(lambda x, y, i: dsl.cast((i // 3 + i % 5 + (i >> 1) + dsl.max(i, 2)) * 2, "int32")
              + dsl.select(i < 4, x, y))
    text = k.compiled.mlir
    for op in ("arith.divui", "arith.remui", "arith.shrui", "arith.maxui", "arith.cmpi ult", "arith.index_castui"):
        assert op in text, op
    for op in ("divsi", "remsi", "shrsi", "maxsi", "cmpi slt"):
        assert op not in text


@pytest.mark.parametrize("expr, expected", [
    (lambda x, y: x + 1, ["arith.constant", "arith.addf"]),
    (lambda x, y: 2 * x - y / 0.5, ["arith.constant", "arith.mulf", "arith.constant", "arith.divf", "arith.subf"]),
    (lambda x, y: -x, ["arith.negf"]),
    (lambda x, y: dsl.fma(x, y, 1.0), ["arith.constant", "math.fma"]),
    (lambda x, y: dsl.max(x, y), ["arith.maximumf"]),
    (lambda x, y: abs(x), ["math.absf"]),
])
def test_float_operators(expr, expected):
    k = trace(lambda x, y, i: expr(x, y), "float32")
    assert ops(k) == expected


@pytest.mark.parametrize("expr, pred", [
    (lambda x, y: x < y, "olt"), (lambda x, y: x >= 0.0, "oge"), (lambda x, y: x == y, "oeq"),
    (lambda x, y: x != y, "une"),
])
def test_float_comparisons(expr, pred):
    k = trace(lambda x, y, i: dsl.select(expr(x, y), x, y), "float32")
    assert re.search(rf"arith\.cmpf {pred},", k.compiled.mlir)


def test_vector_operators_are_elementwise_with_splatted_numbers():
    def body(x, y, i):
        v = dsl.vector.broadcast(ir.VectorType.get([4], ir.F32Type.get()), x)
        w = v * 2.0 + v
        return dsl.vector.reduction(ir.F32Type.get(), dsl.vector.CombiningKind.ADD, w)

    k = trace(body, "float32")
    assert "dense<2.000000e+00> : vector<4xf32>" in k.compiled.mlir
    assert "arith.mulf" in k.compiled.mlir and "arith.addf" in k.compiled.mlir


@pytest.mark.parametrize("expr, message", [
    (lambda x, y, i: x if x else y, "dsl.when"),
    (lambda x, y, i: x + i, r"operand types differ \(i32 and index\); convert one with dsl.cast"),
    (lambda x, y, i: x + 1.5, "the float 1.5 cannot be an operand of i32"),
    (lambda x, y, i: x / y, "use // for integer division"),
    (lambda x, y, i: dsl.cast(x, "float32") % 2.0, "operator % is not defined on f32"),
    (lambda x, y, i: x + "1", "expected a number or a value of type i32, got str"),
    (lambda x, y, i: range(x), "not a Python int"),
    (lambda x, y, i: dsl.select(True, 1, 2) + dsl.select(x < y, 1, 2), "at least one of if_true/if_false"),
    (lambda x, y, i: dsl.min(x), "at least two operands"),
])
def test_misuse_raises_a_clear_error_at_the_users_line(expr, message):
    with pytest.raises(mgpu_lab.errors.KernelBuildError) as e:
        trace(expr)
    assert isinstance(e.value.__cause__, TypeError)
    assert re.search(message, str(e.value.__cause__)), str(e.value.__cause__)
    assert f'File "{THIS_FILE}"' in str(e.value)


def test_bool_raises_and_points_to_when_and_if_else():
    with pytest.raises(mgpu_lab.errors.KernelBuildError) as e:
        trace(lambda x, y, i: x if x > y else y)
    cause = str(e.value.__cause__)
    assert "dsl.when" in cause and "dsl.if_else" in cause and "dsl.select" in cause


def test_python_numbers_fold_in_min_max_select():
    assert dsl.min(3, 1, 2) == 1 and dsl.max(3, 5) == 5 and dsl.select(False, 1, 2) == 2


def _op_locations(mlir: str, prefix: str) -> list[tuple[str, str, int]]:
    """(op, file, line) of every op starting with `prefix`, resolving `#locN` aliases."""
    aliases = dict(re.findall(r"^(#loc\d*) = loc\((.*)\)$", mlir, re.M))

    def resolve(text: str) -> tuple[str, int]:
        while (m := re.fullmatch(r'(?:"[^"]*"\()?(#loc\d*)\)?', text)):
            text = aliases[m.group(1)]
        m = re.match(r'"([^"]+)":(\d+)', text)
        return (m.group(1), int(m.group(2))) if m else ("?", 0)

    found = []
    for op, loc in re.findall(rf"= ({re.escape(prefix)}\w+).* loc\((#loc\d*)\)$", mlir, re.M):
        found.append((op, *resolve(loc)))
    return found


def test_operators_keep_the_users_line_down_to_the_sass():
    def body(ctx, a, out, smem):
        i = dsl.thread_idx()
        x = memref.load(a, [i])
        y = memref.load(a, [i + 64])
        total = x * y + x  # the operators' line: an IMAD in the SASS
        memref.store(total, out, [i])

    lines, first = inspect.getsourcelines(body)
    op_line = first + next(n for n, text in enumerate(lines) if "the operators' line" in text)
    sd = mgpu_lab.ShapeDtype((128,), "int32")
    k = mgpu_lab.kernel(body, grid=1, block=64, in_shapes=sd, out_shapes=sd, use_cache=False, target="sm_90a")
    # Every arith op is located in this file (none in the library), the mul/add at op_line.
    locs = _op_locations(k.compiled.mlir, "arith.")
    assert locs and all(path == THIS_FILE for _, path, _ in locs), locs
    assert {op for op, _, line in locs if int(line) == op_line} >= {"arith.muli", "arith.addi"}
    spans = [s for s in k.compiled.line_map if s.file == THIS_FILE and s.line + 1 == op_line]
    assert spans, [(s.file, s.line) for s in k.compiled.line_map]
    sass = k.compiled.sass.splitlines()
    mnemonics = {re.sub(r".*\*/\s+", "", sass[n]).split()[0] for s in spans for n in s.sass_lines}
    assert any(m.startswith("IMAD") for m in mnemonics), mnemonics


@pytest.mark.gpu
def test_operators_compute_what_numpy_computes(rng):
    import cupy

    n = 256

    def body(ctx, a, b, out, smem):
        i = dsl.thread_idx()
        x, y = memref.load(a, [i]), memref.load(b, [i])
        q = dsl.select(y != 0, x // dsl.select(y != 0, y, 1), 0)
        memref.store(dsl.max(q + x % 7 - (x >> 2), -x) * 3 ^ 5, out, [i])

    sd = mgpu_lab.ShapeDtype((n,), "int32")
    k = mgpu_lab.kernel(body, grid=1, block=n, in_shapes=(sd, sd), out_shapes=sd)
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    y = rng.integers(-9, 9, n, dtype=np.int32)
    out = k(cupy.asarray(x), cupy.asarray(y)).get()
    ysafe = np.where(y != 0, y, 1)
    q = np.where(y != 0, np.trunc(x / ysafe).astype(np.int32), 0)  # C-style division
    rem = np.fmod(x, 7)
    expected = (np.maximum(q + rem - (x >> 2), -x) * 3) ^ 5
    np.testing.assert_array_equal(out, expected)
