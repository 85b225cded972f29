"""Lays out a tree of shared-memory scratch buffers in dynamic smem and builds views of them.

A tree is a ShapeDtype, a Barriers, a Union of trees, or a tuple/list/dict of trees. Buffers
of 1 KiB or more are aligned to 1024 bytes (what the 128-byte swizzle needs), others to 128;
mbarriers to 8. A Union places its members at one offset: use it for buffers whose
lifetimes do not overlap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..compiler.compiled_kernel import SmemBuffer
from .shapes import Barriers, ShapeDtype, Union

BARRIER_BYTES = 8


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def buffer_alignment(nbytes: int) -> int:
    return 1024 if nbytes >= 1024 else 128


@dataclass(frozen=True)
class SmemPlan:
    """Offsets of every leaf, the records for the smem viewer, and the total size."""

    records: tuple[SmemBuffer, ...]
    total_bytes: int
    tree: Any  # the input tree with each leaf replaced by its SmemBuffer record


def plan_smem(tree: Any, base: int = 0) -> SmemPlan:
    """Assign offsets to every leaf of `tree` starting at `base`."""
    records: list[SmemBuffer] = []
    unions = [0]

    def place(node: Any, offset: int, path: str, union: int) -> tuple[Any, int]:
        if isinstance(node, ShapeDtype):
            offset = _align(offset, buffer_alignment(node.nbytes))
            rec = SmemBuffer(node.name or path or "smem", offset, node.nbytes, node.shape, node.dtype, "buffer", union)
            records.append(rec)
            return rec, offset + node.nbytes
        if isinstance(node, Barriers):
            offset = _align(offset, BARRIER_BYTES)
            rec = SmemBuffer(node.name or path or "barriers", offset, node.count * BARRIER_BYTES, (node.count,),
                             "uint64", "barrier", union)
            records.append(rec)
            return rec, offset + rec.nbytes
        if isinstance(node, Union):
            group = unions[0]
            unions[0] += 1
            start = _align(offset, 1024)
            end = start
            members = node.members
            placed = _map_children(members, lambda child, key: place(child, start, _join(path, key), group))
            for _, child_end in _leaves_ends(placed):
                end = max(end, child_end)
            return _rebuild(members, placed), end
        if isinstance(node, (tuple, list, dict)):
            results = {}
            keys = node.keys() if isinstance(node, dict) else range(len(node))
            for key in keys:
                results[key], offset = place(node[key], offset, _join(path, key), union)
            if isinstance(node, dict):
                return results, offset
            return type(node)(results[k] for k in keys), offset
        if node is None:
            return None, offset
        raise TypeError(
            f"smem{'.' + path if path else ''}: expected ShapeDtype, Barriers, Union, tuple, list "
            f"or dict, got {type(node).__name__}")

    placed_tree, end = place(tree, base, "", -1)
    return SmemPlan(tuple(records), end, placed_tree)


def _join(path: str, key: Any) -> str:
    if key == "":
        return path
    return f"{path}.{key}" if path else str(key)


def _map_children(members: Any, fn: Callable[[Any, Any], tuple[Any, int]]) -> Any:
    if isinstance(members, (tuple, list)):
        return [fn(m, i) for i, m in enumerate(members)]
    if isinstance(members, dict):
        return {k: fn(m, k) for k, m in members.items()}
    return [fn(members, "")]


def _leaves_ends(placed: Any):
    return placed.values() if isinstance(placed, dict) else placed


def _rebuild(members: Any, placed: Any) -> Any:
    if isinstance(members, dict):
        return {k: v[0] for k, v in placed.items()}
    if isinstance(members, (tuple, list)):
        return type(members)(v[0] for v in placed)
    return placed[0][0]


def map_leaves(tree: Any, fn: Callable[[SmemBuffer], Any]) -> Any:
    """Replace every SmemBuffer record of a planned tree by fn(record)."""
    if isinstance(tree, SmemBuffer):
        return fn(tree)
    if isinstance(tree, dict):
        return {k: map_leaves(v, fn) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(map_leaves(v, fn) for v in tree)
    return tree
