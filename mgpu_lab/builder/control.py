"""Dynamic loops and conditionals (scf.for / scf.if) for kernel bodies.

Loop carries and branch results are trees: None, MLIR values, Python numbers/strings (static:
passed through, not carried), tuples / lists / dicts of trees, and any object with the
`flatten_values()` protocol (`FragmentedArray`, `WGMMAAccumulator`, your own classes):

    def flatten_values(self) -> tuple[list[ir.Value], Callable[[Sequence[ir.Value]], Self]]

returns the values to carry and a function rebuilding the object from new ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._mlir import ir, scf
from .values import as_index, c


def flatten_values(tree: Any) -> tuple[list[ir.Value], Callable[[Sequence[ir.Value]], Any]]:
    """The MLIR values in a carry tree (see the module doc) and a function that rebuilds the
    same tree from as many new values."""
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return [], lambda vals: tree
    if isinstance(tree, ir.Value):
        return [tree], lambda vals: vals[0]
    method = getattr(tree, "flatten_values", None) or getattr(tree, "_flatten_values", None)
    if method is not None:
        return method()
    if isinstance(tree, dict):
        keys = list(tree)
        values, rebuild = flatten_values([tree[k] for k in keys])
        return values, lambda vals: dict(zip(keys, rebuild(vals)))
    if isinstance(tree, (tuple, list)):
        parts = [flatten_values(part) for part in tree]
        flat = [v for values, _ in parts for v in values]
        sizes = [len(values) for values, _ in parts]
        kind = type(tree)

        def rebuild(vals: Sequence[ir.Value]) -> Any:
            out, at = [], 0
            for (_, rebuild_part), size in zip(parts, sizes):
                out.append(rebuild_part(list(vals[at:at + size])))
                at += size
            return kind(out) if kind in (tuple, list) else kind(*out)  # namedtuples take fields

        return flat, rebuild
    raise TypeError(f"carry: expected None, MLIR values, numbers, tuples/lists/dicts of them or an object "
                    f"with flatten_values(), got {type(tree).__name__}")



def for_range(start: int | ir.Value, stop: int | ir.Value, step: int | ir.Value = 1, *,
              carry: Any = None, unroll: bool = False, dtype: str | None = None,
              rolled: bool = False) -> Callable[[Callable[..., Any]], Any]:
    """Decorator: run the function as the body of a dynamic loop; returns the final carry.

        @for_range(0, k_steps, carry=acc)
        def acc(k, acc):
            ...
            return new_acc

    With `unroll=True` and Python-int bounds the body is traced once per iteration instead.
    dtype: the loop counter's type, an integer dtype name ("int32", "uint32", ...); None: index
    (64-bit on the GPU). The bounds are cast to it (index values unsigned, ints as constants). A
    32-bit counter takes one register instead of two: what a kernel at the register limit needs
    for an outer loop whose counter lives through an inner one.
    rolled: keep the loop a loop: neither LLVM nor ptxas unrolls it (`.pragma "nounroll"`). For a
    short loop of few iterations known at build time whose body is big (a GEMM's k-loop of
    wgmmas), which LLVM would otherwise unroll in full and ptxas then take twice as long on.
    """
    if unroll and rolled:
        raise ValueError("for_range: unroll=True traces the body once per iteration; rolled=True keeps one loop: "
                         "give at most one of them")

    def wrap(body: Callable[..., Any]) -> Any:
        if unroll:
            if not all(isinstance(x, int) for x in (start, stop, step)):
                raise TypeError("for_range(unroll=True): start, stop and step must be Python ints")
            value = carry
            for i in range(start, stop, step):
                value = body(c(i), value) if carry is not None else body(c(i))
            return value
        values, rebuild = flatten_values(carry)
        loop = scf.ForOp(*_bounds(start, stop, step, dtype), values)
        if rolled:  # convert-scf-to-cf carries it to the latch; NVPTX emits the pragma
            loop.operation.attributes["loop_annotation"] = ir.Attribute.parse(
                "#llvm.loop_annotation<unroll = <disable = true>>")
        with ir.InsertionPoint(loop.body):
            iter_args = list(loop.inner_iter_args)
            if carry is None:
                body(loop.induction_variable)
                scf.yield_([])
            else:
                new = body(loop.induction_variable, rebuild(iter_args))
                new_values, _ = flatten_values(new)
                if [v.type for v in new_values] != [v.type for v in values]:
                    raise TypeError(
                        "for_range: the body must return a carry of the same types as `carry`: "
                        f"expected {[str(v.type) for v in values]}, "
                        f"got {[str(v.type) for v in new_values]}")
                scf.yield_(new_values)
        return rebuild(list(loop.results)) if carry is not None else None

    return wrap


def _bounds(start: Any, stop: Any, step: Any, dtype: str | None) -> list[ir.Value]:
    """The loop's bounds as index values, or as values of the integer `dtype`."""
    if dtype is None:
        return [as_index(x) for x in (start, stop, step)]
    from .dtypes import mlir_type
    from .values import cast

    try:
        int_type = mlir_type(dtype)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"for_range: dtype must be an integer dtype name such as 'int32', got {dtype!r}") from e
    if not isinstance(int_type, ir.IntegerType):
        raise ValueError(f"for_range: dtype must be an integer dtype name such as 'int32', got {dtype!r}")
    bounds = []
    for name, x in (("start", start), ("stop", stop), ("step", step)):
        if isinstance(x, ir.Value) and not isinstance(x.type, (ir.IndexType, ir.IntegerType)):
            raise TypeError(f"for_range: {name} must be an int or an integer/index value, got a value of type {x.type}")
        bounds.append(c(x, int_type) if isinstance(x, int) else cast(x, int_type))
    return bounds


@contextlib.contextmanager
def when(condition: ir.Value) -> Iterator[None]:
    """Ops inside the `with` run only where `condition` (an i1) holds."""
    if_op = scf.IfOp(condition)
    with ir.InsertionPoint(if_op.then_block):
        yield
        scf.yield_([])


def if_else(condition: ir.Value, then: Callable[[], Any], otherwise: Callable[[], Any]) -> Any:
    """Trace both branches; each returns values of the same types, which become the results."""
    # Result types are known only after tracing `then`: trace it into a result-less scf.if,
    # then move its ops into the real one.
    draft = scf.IfOp(condition, [], has_else=False)
    with ir.InsertionPoint(draft.then_block):
        then_values, rebuild = flatten_values(then())
        scf.yield_(then_values)
    types = [v.type for v in then_values]
    if_op = scf.IfOp(condition, types, has_else=True)
    for op in list(draft.then_block.operations):
        ir.InsertionPoint(if_op.then_block).insert(op.detach_from_parent())
    draft.operation.erase()
    with ir.InsertionPoint(if_op.else_block):
        other, _ = flatten_values(otherwise())
        if [v.type for v in other] != types:
            raise TypeError(
                f"if_else: branches return different types: {[str(t) for t in types]} "
                f"vs {[str(v.type) for v in other]}")
        scf.yield_(other)
    return rebuild(list(if_op.results))
