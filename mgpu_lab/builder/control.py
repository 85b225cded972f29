"""Dynamic loops and conditionals (scf.for / scf.if) for kernel bodies."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._mlir import ir, scf
from .values import as_index, c


def _flatten(carry: Any) -> tuple[list[ir.Value], Callable[[Sequence[ir.Value]], Any]]:
    """Carries are None, one value, or a tuple/list of values (kept as the same kind)."""
    if carry is None:
        return [], lambda vals: None
    if isinstance(carry, ir.Value):
        return [carry], lambda vals: vals[0]
    if isinstance(carry, (tuple, list)):
        kind = type(carry)
        return list(carry), lambda vals: kind(vals)
    if hasattr(carry, "_flatten_values"):
        return carry._flatten_values()
    raise TypeError(f"carry: expected None, an MLIR value or a tuple of them, got {type(carry).__name__}")


def for_range(start: int | ir.Value, stop: int | ir.Value, step: int | ir.Value = 1, *,
              carry: Any = None, unroll: bool = False) -> Callable[[Callable[..., Any]], Any]:
    """Decorator: run the function as the body of a dynamic loop; returns the final carry.

        @for_range(0, k_steps, carry=acc)
        def acc(k, acc):
            ...
            return new_acc

    With `unroll=True` and Python-int bounds the body is traced once per iteration instead.
    """

    def wrap(body: Callable[..., Any]) -> Any:
        if unroll:
            if not all(isinstance(x, int) for x in (start, stop, step)):
                raise TypeError("for_range(unroll=True): start, stop and step must be Python ints")
            value = carry
            for i in range(start, stop, step):
                value = body(c(i), value) if carry is not None else body(c(i))
            return value
        values, rebuild = _flatten(carry)
        loop = scf.ForOp(as_index(start), as_index(stop), as_index(step), values)
        with ir.InsertionPoint(loop.body):
            iter_args = list(loop.inner_iter_args)
            if carry is None:
                body(loop.induction_variable)
                scf.yield_([])
            else:
                new = body(loop.induction_variable, rebuild(iter_args))
                new_values, _ = _flatten(new)
                if [v.type for v in new_values] != [v.type for v in values]:
                    raise TypeError(
                        "for_range: the body must return a carry of the same types as `carry`: "
                        f"expected {[str(v.type) for v in values]}, "
                        f"got {[str(v.type) for v in new_values]}")
                scf.yield_(new_values)
        return rebuild(list(loop.results)) if carry is not None else None

    return wrap


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
        then_values, rebuild = _flatten(then())
        scf.yield_(then_values)
    types = [v.type for v in then_values]
    if_op = scf.IfOp(condition, types, has_else=True)
    for op in list(draft.then_block.operations):
        ir.InsertionPoint(if_op.then_block).insert(op.detach_from_parent())
    draft.operation.erase()
    with ir.InsertionPoint(if_op.else_block):
        other, _ = _flatten(otherwise())
        if [v.type for v in other] != types:
            raise TypeError(
                f"if_else: branches return different types: {[str(t) for t in types]} "
                f"vs {[str(v.type) for v in other]}")
        scf.yield_(other)
    return rebuild(list(if_op.results))
