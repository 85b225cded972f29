"""Typed values: every index, integer and float value a kernel body touches has Python operators.

The MLIR bindings hand every op result and block argument through a *value caster* chosen by
its type; `register_value_casters` (called once, from `mgpu_lab._mlir`) makes index values come
back as `IndexValue`, `iN` as `IntValue`, floats as `FloatValue` and vectors of those as
`VectorValue`. They are still `ir.Value`s, so every builder call keeps working, and they add:

    + - * / // % & | ^ << >> ~ -x abs()  < <= > >= == !=

Rules (stated once, here):
- Python numbers are coerced to the other operand's type (an int to an integer or float type,
  a float only to a float type). Two values must have the same type: convert with `cast`.
- Signedness: `index` is unsigned (`//`, `%`, `>>`, comparisons and `min`/`max` use the
  unsigned ops, as array indices are never negative). `iN` is signed (`divsi`, `remsi`:
  C-style, truncating toward zero; `shrsi`; signed comparisons) unless viewed through
  `.unsigned` (which keeps results unsigned until `.signed`). Floats: `/` is `divf`,
  comparisons are ordered except `!=` (unordered, as in C), `min`/`max` propagate NaN.
- `/` on integers raises (use `//`); `//` and bit operators on floats raise.
- `bool(value)` raises: a traced value has no truth value in Python. Branch on the device
  with `dsl.when(cond)` / `dsl.if_else(cond, then, otherwise)`, pick with `dsl.select`.

Every op an operator emits is located at the user's line: this file lives inside the package,
whose frames `locations.py` excludes from the traceback locations.
"""

from __future__ import annotations

import builtins
import numbers
import types
from collections.abc import Callable
from typing import Any

from .._mlir import arith, ir, math
from .constants import check_int_constant, check_float_constant, int_width

_BOOL_HINT = ("a traced value has no Python truth value (the kernel body runs once, on the host); "
              "branch on the device with `with dsl.when(cond):` or `dsl.if_else(cond, then, otherwise)`, "
              "or pick a value with `dsl.select(cond, a, b)`")

_INT_PREDICATES = {
    "signed": {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"},
    "unsigned": {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"},
}
_FLOAT_PREDICATES = {"lt": "OLT", "le": "OLE", "gt": "OGT", "ge": "OGE", "eq": "OEQ", "ne": "UNE"}


# -- constants and conversions ------------------------------------------------------------

def index_type() -> ir.Type:
    return ir.IndexType.get()


def _scalar_type(t: ir.Type) -> ir.Type:
    return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t


def _is_int(t: ir.Type) -> bool:
    return isinstance(t, (ir.IndexType, ir.IntegerType))


def c(value: int | float | bool, type: Any = None) -> ir.Value:
    """An `arith.constant`. `type`: an MLIR type or a dtype name; default: index for ints.

    A vector type makes a splat constant. A number the type cannot hold raises (see
    `constants.py`): an `intN` dtype takes the signed range, a `uintN` dtype and `index` the
    unsigned one, a signless MLIR type either; a float past the type's largest finite value
    raises unless it is inf or nan."""
    reading = "either"
    if type is None:
        if isinstance(value, float):
            raise TypeError("c: a float constant needs an explicit type, e.g. c(1.0, 'float32')")
        type = index_type()
    elif not isinstance(type, ir.Type):
        from .dtypes import dtype_name, mlir_type

        name = dtype_name(type)
        reading = "unsigned" if name.startswith("uint") else "signed" if name.startswith("int") else "either"
        type = mlir_type(name)
    return _constant(value, type, reading, "c: value")


def _constant(value: Any, type: ir.Type, reading: str, what: str) -> ir.Value:
    """The constant `value` of `type` (scalar or vector), checked to fit (see `constants.py`)."""
    scalar = _scalar_type(type)
    if _is_int(scalar):
        if isinstance(value, float):
            raise TypeError(f"{what}: the float {value!r} is not a value of the integer type {scalar}")
        if not isinstance(value, numbers.Integral):
            raise TypeError(f"{what}: expected an int for {scalar}, got {builtins.type(value).__name__}")
        number, width = check_int_constant(value, scalar, reading, what), int_width(scalar)
        if width > 1 and number >= 1 << (width - 1):
            number -= 1 << width  # the same bits as a signed number: the bindings take int64 at most
        attr = ir.IntegerAttr.get(scalar, number)
    else:
        if not isinstance(value, numbers.Real):
            raise TypeError(f"{what}: expected a number for {scalar}, got {builtins.type(value).__name__}")
        attr = ir.FloatAttr.get(scalar, check_float_constant(value, scalar, what))
    if isinstance(type, ir.VectorType):
        attr = ir.DenseElementsAttr.get_splat(type, attr)
    return arith.constant(type, attr)


def as_index(x: int | ir.Value) -> ir.Value:
    """Python ints become index constants; integer values are cast to index."""
    if isinstance(x, int) and not isinstance(x, bool):
        return c(x)
    if isinstance(x, ir.Value):
        if isinstance(x.type, ir.IndexType):
            return x
        if isinstance(x.type, ir.IntegerType):
            return arith.index_cast(index_type(), x)
        raise TypeError(f"index: expected an int or an integer/index value, got a value of type {x.type}")
    raise TypeError(f"index: expected an int or an integer/index value, got {type(x).__name__}")


def i32_type() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def as_i32(x: int | bool | ir.Value, what: str = "i32") -> ir.Value:
    """Python ints (and bools), index and integer values as i32 (narrower ones zero-extended,
    wider ones truncated). `what` names the argument in the error."""
    i32 = i32_type()
    if isinstance(x, int):
        return c(int(x), i32)
    if isinstance(x, ir.Value):
        if isinstance(x.type, ir.IndexType):
            return arith.index_cast(i32, x)
        if isinstance(x.type, ir.IntegerType):
            width = ir.IntegerType(x.type).width
            if width == 32:
                return x
            return arith.extui(i32, x) if width < 32 else arith.trunci(i32, x)
    raise TypeError(f"{what}: expected an int or an integer/index value, got "
                    f"{getattr(x, 'type', type(x).__name__)}")


def as_i1(x: bool | ir.Value) -> ir.Value:
    """Python bools become i1 constants; i1 values pass through."""
    if isinstance(x, bool):
        return c(int(x), ir.IntegerType.get_signless(1))
    if isinstance(x, ir.Value) and x.type == ir.IntegerType.get_signless(1):
        return x
    raise TypeError(f"condition: expected a bool or an i1 value, got {getattr(x, 'type', type(x).__name__)}")


def cast(x: ir.Value, type: Any, *, unsigned: bool | None = None) -> ir.Value:
    """Convert a scalar value to another index/integer/float type (`type`: MLIR type or dtype).

    Integers widen with sign extension unless `unsigned` (default: unsigned for index and
    `.unsigned` views); int <-> float conversions are signed unless `unsigned`."""
    if not isinstance(type, ir.Type):
        from .dtypes import mlir_type

        type = mlir_type(type)
    if not isinstance(x, ir.Value):
        return c(x, type)
    src = x.type
    if src == type:
        return x
    if unsigned is None:
        unsigned = isinstance(src, ir.IndexType) or isinstance(x, UnsignedIntValue)
    if _is_int(src) and _is_int(type):
        if isinstance(src, ir.IndexType) or isinstance(type, ir.IndexType):
            return (arith.index_castui if unsigned else arith.index_cast)(type, x)
        wide, narrow = ir.IntegerType(type).width, ir.IntegerType(src).width
        if wide > narrow:
            return (arith.extui if unsigned else arith.extsi)(type, x)
        return arith.trunci(type, x)
    if _is_int(src):
        if isinstance(src, ir.IndexType):
            x = arith.index_castui(ir.IntegerType.get_signless(64), x)
        return (arith.uitofp if unsigned else arith.sitofp)(type, x)
    if _is_int(type):
        return (arith.fptoui if unsigned else arith.fptosi)(type, x)
    if ir.FloatType(type).width > ir.FloatType(src).width:
        return arith.extf(type, x)
    return arith.truncf(type, x)


# -- the operators -------------------------------------------------------------------------

def _coerce(other: Any, like: ArithValue, op: str, reading: str | None = None) -> ir.Value:
    """`other` as a value of `like`'s type: Python numbers become constants of that type.

    A number must fit the type as `like` reads it (`reading`, default `like._kind()`; see
    `constants.py`), so a constant never changes meaning on the way in."""
    if isinstance(other, ir.Value):
        if other.type != like.type:
            raise TypeError(f"operator {op}: operand types differ ({like.type} and {other.type}); "
                            f"convert one with dsl.cast(value, type): dsl.cast(right, {spelled_type(like.type)}) "
                            f"or dsl.cast(left, {spelled_type(other.type)})")
        return other
    is_int_type = _is_int(_scalar_type(like.type))
    if isinstance(other, numbers.Integral) or (isinstance(other, float) and not is_int_type):
        return _constant(other, like.type, reading or like._kind(), f"operator {op}")
    if isinstance(other, float):
        raise TypeError(f"operator {op}: the float {other!r} cannot be an operand of {like.type} "
                        f"(convert with dsl.cast)")
    raise TypeError(f"operator {op}: expected a number or a value of type {like.type}, got {type(other).__name__}")


# Wrap-around ops: the result's bits do not depend on the operands' signedness, so a number
# may be given in either reading (0xFFFF0000 as an i32 mask). `<<`'s shift amount is checked apart.
_EITHER_READING = frozenset({"+", "-", "*", "&", "|", "^", "<<"})


def _check_number_operand(value: Any, like: ArithValue, op: str) -> None:
    """Refuse a Python number right of `op` whose meaning the op cannot keep: a shift by a
    count outside [0, width) (undefined in arith: poison) or a division by 0."""
    if not isinstance(value, numbers.Integral) or not _is_int(_scalar_type(like.type)):
        return
    if op in ("<<", ">>"):
        width = int_width(_scalar_type(like.type))
        if isinstance(value, bool) or not 0 <= value < width:
            raise ValueError(f"operator {op}: expected a shift amount in [0, {width - 1}] for {like.type}, "
                             f"got {value!r}")
    elif op in ("//", "%") and value == 0:
        raise ValueError(f"operator {op}: expected a nonzero divisor for {like.type}, got the constant 0")


class ArithValue(ir.Value):
    """A value with Python arithmetic operators (see the module docstring for the rules)."""

    def __init__(self, value: ir.Value):
        super().__init__(value)

    __hash__ = ir.Value.__hash__

    # What flavour of ops this value takes: "unsigned", "signed" or "float".
    def _kind(self) -> str:
        scalar = _scalar_type(self.type)
        if isinstance(scalar, ir.IndexType):
            return "unsigned"
        if isinstance(scalar, ir.IntegerType):
            return "signed"
        return "float"

    def _wrap(self, result: ir.Value) -> ir.Value:
        return result

    def _binary(self, other: Any, op: str, reverse: bool = False) -> ir.Value:
        if not reverse:
            _check_number_operand(other, self, op)
        shift_amount = op in ("<<", ">>") and not reverse
        reading = "unsigned" if shift_amount else "either" if op in _EITHER_READING else None
        rhs = _coerce(other, self, op, reading)
        a, b = (rhs, self) if reverse else (self, rhs)
        kind = self._kind()
        emit = _BINARY[op].get(kind)
        if emit is None:
            hint = {"/": "use // for integer division", "//": "use / for float division"}.get(op, "")
            raise TypeError(f"operator {op} is not defined on {self.type}" + (f": {hint}" if hint else ""))
        return self._wrap(emit(a, b))

    def _compare(self, other: Any, pred: str) -> ir.Value:
        rhs = _coerce(other, self, _COMPARE_SYMBOL[pred])
        kind = self._kind()
        if kind == "float":
            return arith.cmpf(getattr(arith.CmpFPredicate, _FLOAT_PREDICATES[pred]), self, rhs)
        return arith.cmpi(getattr(arith.CmpIPredicate, _INT_PREDICATES[kind][pred]), self, rhs)

    def __add__(self, o): return self._binary(o, "+")
    def __radd__(self, o): return self._binary(o, "+", True)
    def __sub__(self, o): return self._binary(o, "-")
    def __rsub__(self, o): return self._binary(o, "-", True)
    def __mul__(self, o): return self._binary(o, "*")
    def __rmul__(self, o): return self._binary(o, "*", True)
    def __truediv__(self, o): return self._binary(o, "/")
    def __rtruediv__(self, o): return self._binary(o, "/", True)
    def __floordiv__(self, o): return self._binary(o, "//")
    def __rfloordiv__(self, o): return self._binary(o, "//", True)
    def __mod__(self, o): return self._binary(o, "%")
    def __rmod__(self, o): return self._binary(o, "%", True)
    def __and__(self, o): return self._binary(o, "&")
    def __rand__(self, o): return self._binary(o, "&", True)
    def __or__(self, o): return self._binary(o, "|")
    def __ror__(self, o): return self._binary(o, "|", True)
    def __xor__(self, o): return self._binary(o, "^")
    def __rxor__(self, o): return self._binary(o, "^", True)
    def __lshift__(self, o): return self._binary(o, "<<")
    def __rlshift__(self, o): return self._binary(o, "<<", True)
    def __rshift__(self, o): return self._binary(o, ">>")
    def __rrshift__(self, o): return self._binary(o, ">>", True)

    def __lt__(self, o): return self._compare(o, "lt")
    def __le__(self, o): return self._compare(o, "le")
    def __gt__(self, o): return self._compare(o, "gt")
    def __ge__(self, o): return self._compare(o, "ge")

    def __eq__(self, o):  # type: ignore[override]
        if not isinstance(o, (ir.Value, int, float)):
            return NotImplemented
        return self._compare(o, "eq")

    def __ne__(self, o):  # type: ignore[override]
        if not isinstance(o, (ir.Value, int, float)):
            return NotImplemented
        return self._compare(o, "ne")

    def __neg__(self):
        if self._kind() == "float":
            return arith.negf(self)
        return self._wrap(arith.subi(c(0, self.type), self))

    def __invert__(self):
        if self._kind() == "float":
            raise TypeError(f"operator ~ is not defined on {self.type}")
        return self._wrap(arith.xori(self, c(-1, self.type)))

    def __abs__(self):
        if self._kind() == "float":
            return math.absf(self)
        if self._kind() == "unsigned":
            return self
        return math.absi(self)

    def __bool__(self):
        raise TypeError(f"bool() of a {self.type} value: {_BOOL_HINT}")

    def __index__(self):
        raise TypeError(f"a traced {self.type} value is not a Python int (it is known only on the device); "
                        f"use it in ops, or use a Python int where a compile-time number is needed")


class IndexValue(ArithValue):
    """An `index` value: unsigned `//`, `%`, `>>`, comparisons, min/max."""


class IntValue(ArithValue):
    """An `iN` value: signed ops; `.unsigned` views it as unsigned."""

    @property
    def unsigned(self) -> UnsignedIntValue:
        """The same value with unsigned `//`, `%`, `>>`, comparisons and min/max."""
        return UnsignedIntValue(self)

    @property
    def signed(self) -> IntValue:
        return self


class UnsignedIntValue(IntValue):
    """An `iN` value viewed as unsigned; results stay unsigned until `.signed`."""

    def _kind(self) -> str:
        return "unsigned"

    def _wrap(self, result: ir.Value) -> ir.Value:
        return UnsignedIntValue(result)

    @property
    def unsigned(self) -> UnsignedIntValue:
        return self

    @property
    def signed(self) -> IntValue:
        return IntValue(self)


class FloatValue(ArithValue):
    """A floating-point value: `/` is divf, comparisons ordered (`!=` unordered)."""


class VectorValue(ArithValue):
    """A vector of index/int/float: operators act elementwise; numbers are splatted."""


_COMPARE_SYMBOL = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_BINARY = {
    "+": {"signed": arith.addi, "unsigned": arith.addi, "float": arith.addf},
    "-": {"signed": arith.subi, "unsigned": arith.subi, "float": arith.subf},
    "*": {"signed": arith.muli, "unsigned": arith.muli, "float": arith.mulf},
    "/": {"float": arith.divf},
    "//": {"signed": arith.divsi, "unsigned": arith.divui},
    "%": {"signed": arith.remsi, "unsigned": arith.remui},  # no remf: NVPTX cannot lower frem
    "&": {"signed": arith.andi, "unsigned": arith.andi},
    "|": {"signed": arith.ori, "unsigned": arith.ori},
    "^": {"signed": arith.xori, "unsigned": arith.xori},
    "<<": {"signed": arith.shli, "unsigned": arith.shli},
    ">>": {"signed": arith.shrsi, "unsigned": arith.shrui},
}
_MIN_MAX = {
    "min": {"signed": arith.minsi, "unsigned": arith.minui, "float": arith.minimumf},
    "max": {"signed": arith.maxsi, "unsigned": arith.maxui, "float": arith.maximumf},
}


# -- functions over values -----------------------------------------------------------------

def _first_value(args: tuple[Any, ...], what: str) -> ArithValue | None:
    for a in args:
        if isinstance(a, ArithValue):
            return a
        if isinstance(a, ir.Value):
            raise TypeError(f"{what}: expected index/integer/float values, got a value of type {a.type}")
    return None


def _min_max(which: str, args: tuple[Any, ...]) -> Any:
    if len(args) < 2:
        raise TypeError(f"dsl.{which}: expected at least two operands, got {len(args)}")
    like = _first_value(args, f"dsl.{which}")
    if like is None:  # all Python numbers: fold now
        return (builtins.min if which == "min" else builtins.max)(args)
    emit = _MIN_MAX[which][like._kind()]
    result = _coerce(args[0], like, which)
    for other in args[1:]:
        result = like._wrap(emit(result, _coerce(other, like, which)))
    return result


def min(*args: Any) -> Any:  # noqa: A001 (the DSL's name, like Python's)
    """The smallest operand (unsigned for index, NaN-propagating for floats)."""
    return _min_max("min", args)


def max(*args: Any) -> Any:  # noqa: A001
    """The largest operand (unsigned for index, NaN-propagating for floats)."""
    return _min_max("max", args)


def select(condition: bool | ir.Value, if_true: Any, if_false: Any) -> Any:
    """`if_true` where the i1 `condition` holds, else `if_false` (numbers take the other's type)."""
    if isinstance(condition, bool):
        return if_true if condition else if_false
    condition = as_i1(condition)
    like = _first_value((if_true, if_false), "dsl.select")
    if like is None:
        raise TypeError("dsl.select: at least one of if_true/if_false must be a value (its type is the "
                        f"result's), got {type(if_true).__name__} and {type(if_false).__name__}")
    a, b = _coerce(if_true, like, "select"), _coerce(if_false, like, "select")
    return like._wrap(arith.select(condition, a, b))


def fma(a: Any, b: Any, addend: Any) -> ir.Value:
    """a * b + addend in one rounding (`math.fma`) for float scalars or vectors."""
    like = _first_value((a, b, addend), "dsl.fma")
    if like is None or like._kind() != "float":
        raise TypeError("dsl.fma: expected float values (at least one operand a value)")
    return math.fma(_coerce(a, like, "fma"), _coerce(b, like, "fma"), _coerce(addend, like, "fma"))


# -- hints for values given where the bindings need ir.Values ---------------------------------

# The operator that coerces a Python number for each binary arith op (the DSL's way to write it).
_ARITH_OPERATOR = {
    "addi": "+", "addf": "+", "subi": "-", "subf": "-", "muli": "*", "mulf": "*", "divf": "/",
    "divsi": "//", "divui": "//", "remsi": "%", "remui": "%", "andi": "&", "ori": "|", "xori": "^",
    "shli": "<<", "shrsi": ">>", "shrui": ">>",
}


def python_number(value: Any) -> str | None:
    """'the Python int 0' for a Python (or NumPy) number, None for anything else."""
    if isinstance(value, bool):
        return f"the Python bool {value}"
    if isinstance(value, numbers.Integral):
        return f"the Python int {int(value)}"
    if isinstance(value, numbers.Real):
        return f"the Python float {float(value)!r}"
    return None


def spelled_constant(value: Any, type: ir.Type | None) -> str:
    """How to write `value` as a constant of `type` in a kernel body: 'dsl.c(0)' for index,
    'dsl.c(1, "int32")', 'dsl.c(1.0, "float32")'; 'dsl.c(1, type)' when the type is unknown."""
    from .dtypes import dtype_of_mlir

    number = int(value) if isinstance(value, numbers.Integral) else value
    if type is None or isinstance(type, ir.IndexType):
        return f"dsl.c({number!r})" if type is not None or isinstance(number, int) else f"dsl.c({number!r}, type)"
    try:
        name = dtype_of_mlir(type)
    except ValueError:
        return f"dsl.c({number!r}, type)"
    if isinstance(type, ir.FloatType):
        number = float(number)
    return f"dsl.c({number!r}, {name!r})"


def spelled_type(t: ir.Type) -> str:
    """How a kernel body names `t` for `dsl.c`/`dsl.cast`: "'float32'", 'dsl.ir.IndexType.get()'."""
    from .dtypes import dtype_of_mlir

    if isinstance(t, ir.IndexType):
        return "dsl.ir.IndexType.get()"
    try:
        return repr(dtype_of_mlir(t))
    except ValueError:
        return f"dsl.ir.Type.parse({str(t)!r})"


def index_hint(what: str, value: Any) -> str:
    """'index 0: expected an index value, got the Python int 0; write dsl.c(0)' (or the type
    of a value that is no index, with `dsl.cast`)."""
    number = python_number(value)
    if number is not None:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            fix = f"write {spelled_constant(value, index_type())}"
        else:
            fix = "an index is a whole number: write dsl.c(n) or compute it from index values"
        return f"{what}: expected an index value, got {number}; {fix}"
    if isinstance(value, ir.Value):
        fix = f"; convert it with dsl.cast(value, {spelled_type(index_type())})" if _is_int(value.type) else ""
        return f"{what}: expected an index value, got a value of type {value.type}{fix}"
    return f"{what}: expected an index value, got {builtins.type(value).__name__}"


def operand_hint(op: str, what: str, value: Any, like: ir.Value | None) -> str:
    """The error for `value` given as operand `what` of the upstream op `op` where it needs an
    ir.Value: a number gets `dsl.c(...)` of the type of `like` (another operand), and the
    operator that would coerce it for a binary arith op."""
    number = python_number(value)
    if number is None:
        return f"{op}: {what}: expected a value, got {builtins.type(value).__name__}"
    like_type = like.type if isinstance(like, ir.Value) else None
    fix = f"write {spelled_constant(value, like_type)}"
    symbol = _ARITH_OPERATOR.get(op.removeprefix("arith."))
    if symbol is not None and like_type is not None:
        fix += f", or use the operator (`x {symbol} {value!r}` makes the constant of x's type)"
    return f"{op}: {what}: expected a value{f' of type {like_type}' if like_type else ''}, got {number}; {fix}"


class CheckedDialect(types.ModuleType):
    """An upstream dialect module with a few builders replaced by checked ones; every other
    name is the module's own (`dsl.memref.subview`, `dsl.arith.ConstantOp`, ...)."""

    def __init__(self, upstream: types.ModuleType, checked: dict[str, Callable[..., Any]]):
        super().__init__(upstream.__name__, upstream.__doc__)
        self.__dict__.update(checked)
        self._upstream = upstream

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_upstream"], name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._upstream)) | set(self.__dict__))


def _checked_binary(name: str) -> Callable[..., ir.Value]:
    """`arith.<name>(lhs, rhs)` that refuses a Python number or two types while the body runs
    (upstream leaves both to the verifier or to 'Operand 1 ... must be a Value')."""
    upstream = getattr(arith, name)

    def checked(lhs: Any, rhs: Any, *args: Any, **kwargs: Any) -> ir.Value:
        for what, value, other in (("lhs", lhs, rhs), ("rhs", rhs, lhs)):
            if python_number(value) is not None:
                raise TypeError(operand_hint(f"arith.{name}", what, value, other))
        if isinstance(lhs, ir.Value) and isinstance(rhs, ir.Value) and lhs.type != rhs.type:
            raise TypeError(f"arith.{name}: rhs: expected a value of lhs's type {lhs.type}, got {rhs.type}; "
                            f"convert one with dsl.cast(value, type): dsl.cast(rhs, {spelled_type(lhs.type)}) "
                            f"or dsl.cast(lhs, {spelled_type(rhs.type)})")
        return upstream(lhs, rhs, *args, **kwargs)

    checked.__name__ = checked.__qualname__ = name
    checked.__doc__ = f"`arith.{name}(lhs, rhs)` with its operands checked first (one type, no Python numbers)."
    return checked


checked_arith = CheckedDialect(arith, {name: _checked_binary(name) for name in _ARITH_OPERATOR})


# -- registration --------------------------------------------------------------------------

_FLOAT_TYPES = ("F16Type", "BF16Type", "F32Type", "F64Type", "Float8E4M3FNType", "Float8E5M2Type", "TF32Type")
_registered = False


def _vector_caster(value: ir.Value) -> ir.Value:
    scalar = ir.VectorType(value.type).element_type
    if _is_int(scalar) or isinstance(scalar, ir.FloatType):
        return VectorValue(value)
    return value


def register_value_casters() -> None:
    """Make op results and block arguments of index/int/float/vector type come back typed.

    Runs once, when this module is first imported (`mgpu_lab._mlir` imports it beside the
    bindings); the casters are process-wide, keyed by type id."""
    global _registered
    if _registered:
        return
    ir.register_value_caster(ir.IndexType.static_typeid)(IndexValue)
    ir.register_value_caster(ir.IntegerType.static_typeid)(IntValue)
    for name in _FLOAT_TYPES:
        t = getattr(ir, name, None)
        if t is not None:
            ir.register_value_caster(t.static_typeid)(FloatValue)
    ir.register_value_caster(ir.VectorType.static_typeid)(_vector_caster)
    _registered = True


register_value_casters()
