"""Python numbers never change meaning on their way into a kernel (issue 30): a constant the
type cannot hold, a shift past the width, a division by 0 raise at the user's line."""

from __future__ import annotations

import re

import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.dsl import memref

THIS_FILE = __file__


def build(expression, dtype="int32"):
    """Trace a kernel whose body evaluates `expression(x, i)` (x: a loaded `dtype`, i: index)."""
    sd = mgpu_lab.ShapeDtype((128,), dtype)

    def body(ctx, a, out, smem):
        i = dsl.thread_idx()
        x = memref.load(a, [i])
        expression(x, i)
        memref.store(x, out, [i])

    return mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd, use_cache=False, target="sm_90a")


@pytest.mark.parametrize("expression, message", [
    (lambda x, i: x + 2**40, r"operator \+: expected an int in \[-2147483648, 4294967295\] for i32 .*got 1099511627776 "
                             r"\(2\*\*40\)"),
    (lambda x, i: 2**40 * x, r"operator \*: .*got 1099511627776"),
    (lambda x, i: dsl.c(300, "int8"), r"c: value: expected an int in \[-128, 127\] for a signed i8, got 300"),
    (lambda x, i: dsl.c(-129, "int8"), r"c: value: expected an int in \[-128, 127\] for a signed i8, got -129"),
    (lambda x, i: dsl.c(256, "uint8"), r"c: value: expected an int in \[0, 255\] for an unsigned i8, got 256"),
    (lambda x, i: x < 2**31, r"operator <: expected an int in \[-2147483648, 2147483647\] for a signed i32"),
    (lambda x, i: x.unsigned // -1, r"operator //: expected an int in \[0, 4294967295\] for an unsigned i32, got -1"),
    (lambda x, i: i < -1, r"operator <: expected an int in \[0, 18446744073709551615\] for an unsigned index"),
    (lambda x, i: dsl.min(x, 2**31), r"operator min: .*for a signed i32"),
    (lambda x, i: x << 32, r"operator <<: expected a shift amount in \[0, 31\] for i32, got 32"),
    (lambda x, i: x >> -1, r"operator >>: expected a shift amount in \[0, 31\] for i32, got -1"),
    (lambda x, i: i >> 64, r"operator >>: expected a shift amount in \[0, 63\] for index, got 64"),
    (lambda x, i: x // 0, r"operator //: expected a nonzero divisor for i32, got the constant 0"),
    (lambda x, i: x % 0, r"operator %: expected a nonzero divisor for i32, got the constant 0"),
    (lambda x, i: dsl.c(1e39, "float32"), r"c: value: expected a value in \[-3.40282e\+38, 3.40282e\+38\] \(or "
                                          r"inf/nan\) for f32, got 1e\+39, which would become inf"),
    (lambda x, i: dsl.c(65536.0, "float16"), r"for f16, got 65536.0, which would become inf"),
    (lambda x, i: dsl.c(-65520.0, "float16"), r"for f16, got -65520.0, which would become -inf"),
    (lambda x, i: dsl.c(3.4e38, "bfloat16"), r"\[-3.38953e\+38, 3.38953e\+38\] \(or inf/nan\) for bf16"),
    (lambda x, i: dsl.c(500.0, "float8_e4m3fn"), r"\[-448, 448\] .*for f8E4M3FN"),
    (lambda x, i: dsl.cast(x, "float16") * 1e5, r"operator \*: expected a value in \[-65504, 65504\]"),
    (lambda x, i: dsl.c(10**400, "float64"), r"got 100000000000\.\.\. \(401 digits\), which would become inf"),
])
def test_a_constant_that_would_change_meaning_raises_at_the_users_line(expression, message):
    with pytest.raises(mgpu_lab.errors.KernelBuildError) as e:
        build(expression)
    cause = e.value.__cause__
    assert isinstance(cause, ValueError) and re.search(message, str(cause)), str(cause)
    assert f'File "{THIS_FILE}"' in str(e.value)


@pytest.mark.parametrize("expression, message", [
    (lambda x, i: x + True, "operator +: expected an int for the i32 operand, got the bool True"),
    (lambda x, i: x << True, "operator <<: expected a shift amount in [0, 31] for i32, got True"),
    (lambda x, i: dsl.c(True), "c: value: expected an int for the index operand, got the bool True"),
    (lambda x, i: dsl.c("3", "int32"), "c: value: expected an int for i32, got str"),
])
def test_a_bool_or_a_string_is_not_an_int(expression, message):
    with pytest.raises(mgpu_lab.errors.KernelBuildError) as e:
        build(expression)
    assert message in str(e.value.__cause__)


def test_numbers_that_fit_keep_working():
    """Masks in either reading, the type's edges, inf and nan, values that round to the max."""
    k = build(lambda x, i: (
        x & 0xFFFF0000, x + (2**32 - 1), x < 2**31 - 1, x >= -2**31, x.unsigned < 2**32 - 1, x << 31, x >> 0,
        i + (2**64 - 1), i - 1, ~i, -x, ~x, 1 // x, 0 % x,
        dsl.c(-128, "int8"), dsl.c(255, "uint8"), dsl.c(True, "bool"), dsl.c(2**63),
        dsl.c(65519.0, "float16"), dsl.c(float("inf"), "float16"), dsl.c(float("-inf"), "float32"),
        dsl.c(float("nan"), "bfloat16"), dsl.c(448.0, "float8_e4m3fn"), dsl.c(1e308, "float64"),
    ))
    mlir = k.compiled.mlir
    assert "arith.constant -65536 : i32" in mlir  # 0xFFFF0000: the same bits, printed signed
    assert "0x7C00 : f16" in mlir or "0x7c00 : f16" in mlir.lower()  # inf stays inf
