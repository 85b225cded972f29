"""Warpgroup MMA (Hopper `wgmma.mma_async`): one warpgroup computes acc (64 x n) += a @ b.

Operand types (a and b alike, except f8 which may mix e4m3 and e5m2):

    inputs          k per instruction   accumulator     majors        SASS
    bf16            16                  f32             k or mn       HGMMA
    f16             16                  f32 or f16      k or mn       HGMMA
    f32 (tf32=True) 8                   f32             k only        HGMMA .TF32
    f8 e4m3 / e5m2  32                  f32 or f16      k only        QGMMA

b is always a shared-memory tile; a is a shared-memory tile or, for bf16/f16, a
`FragmentedArray` of shape (64, k) in `WGMMAFragLayout(k)` (the A-operand register layout is
the accumulator layout). Shared-memory operands are what a TMA copy with the same swizzle
(32, 64 or 128 bytes; w = swizzle bytes / element size) writes:

- a, a_major="k": (64, w), row-major: k = w (one swizzle span of k).
- a, a_major="mn": (64 // w, k, w): a stored transposed, as column chunks of w rows of a
  (TMA boxes (k, w) of a row-major (K, M) array, i.e. of A.T).
- b, b_major="k": (n, w): b transposed, n rows of k = w (TMA box of a row-major (N, K) matrix:
  `wgmma(acc, a, b_t)` computes A @ B.T tiles).
- b, b_major="mn": (n // w, k, w): b itself in column chunks of w (TMA boxes (k, w) of a
  row-major (K, N) matrix), for A @ B.

a and b may use different swizzles (`a_swizzle=`, `b_swizzle=`; default `swizzle`); their k
extents must agree. The accumulator (`WGMMAAccumulator`) is a `FragmentedArray` in
`WGMMAFragLayout(n)` (layouts.py has the coordinates); wgmma's PTX takes it as flat values
(f32: n/2 per thread; f16: n/4 i32 words of two columns each).

wgmma is asynchronous: issue `wgmma(...)` calls (they fence first), `wgmma_commit_group()`,
and `acc = wgmma_wait_group(n, acc)` before reading acc or overwriting the operands.
Threading acc through the wait is what keeps the compiler from reading the registers early.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._mlir import arith, ir, llvm, vector
from .dtypes import bitwidth, mlir_type
from .fragmented import FragmentedArray, bits_of, elements, from_bits
from .layouts import WGMMAFragLayout
from .values import as_i32, c
from .ptx import i32, i64, inline_ptx, smem_address

M_TILE = 64
K_STEP_BYTES = 32  # every wgmma instruction consumes 32 bytes of k (16 x 16-bit, 8 x tf32, 32 x f8)
SWIZZLES = (32, 64, 128)
_LAYOUT_CODE = {128: 1, 64: 2, 32: 3}  # sm_90 descriptor bits 62-63
_PTX_TYPES = {"bf16": "bf16", "f16": "f16", "f32": "tf32", "f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}
_ACC_TYPES = {"float32": "f32", "float16": "f16"}


def _f32() -> ir.Type:
    return ir.F32Type.get()


class WGMMAAccumulator:
    """The 64 x n wgmma accumulator of one warpgroup: a thin wrapper over `value`, a
    `FragmentedArray` in `WGMMAFragLayout(n)` (f32, or f16 for an f16 accumulator), which is
    what the tensor cores write (as in Mosaic GPU). All math and stores go through `value`.

    `values` is the flat per-thread view wgmma's inline PTX takes and loop carries use: f32
    scalars (n/2), or for f16 i32 words of two columns each (n/4). `WGMMAAccumulator(values,
    n, dtype)` rebuilds one from them; `WGMMAAccumulator.from_array(array)` wraps an array."""

    def __init__(self, values: Sequence[ir.Value] | FragmentedArray, n: int | None = None,
                 dtype: str = "float32"):
        if isinstance(values, FragmentedArray):
            self.value = _check_array(values)
            return
        _check_dtype(dtype)
        if not isinstance(n, int):
            raise TypeError(f"WGMMAAccumulator: n (columns) must be an int, got {n!r}")
        per_value = 2 if dtype == "float32" else 4
        if len(values) != n // per_value:
            raise ValueError(f"WGMMAAccumulator: a 64 x {n} {dtype} tile needs {n // per_value} values per thread, "
                             f"got {len(values)}")
        values = list(values)
        if dtype == "float16":
            regs = [from_bits([v], ir.F16Type.get(), 2) for v in values]
        else:
            pair = ir.VectorType.get([2], _f32())
            regs = [vector.from_elements(pair, values[2 * i: 2 * i + 2]) for i in range(n // 4)]
        self.value = FragmentedArray(regs, WGMMAFragLayout(n))

    @classmethod
    def from_array(cls, array: FragmentedArray) -> WGMMAAccumulator:
        """Wrap a (64, n) f32 or f16 array in WGMMAFragLayout (e.g. a bias to accumulate onto)."""
        return cls(array)

    @classmethod
    def zeros(cls, n: int, dtype: str = "float32") -> WGMMAAccumulator:
        _check_n(n)
        _check_dtype(dtype)
        return cls(FragmentedArray.splat(0.0, WGMMAFragLayout(n), dtype))

    @classmethod
    def uninitialized(cls, n: int, dtype: str = "float32") -> WGMMAAccumulator:
        """A 64 x n accumulator whose registers hold no defined value, for a wgmma with
        accumulate=False, which ignores them: no zeros are moved in (n / 2 moves per thread),
        which matters where registers are short, e.g. a mainloop holding a second product
        while the first is promoted (the block-scaled FP8 GEMM's overlap_promotion)."""
        _check_n(n)
        _check_dtype(dtype)
        layout = WGMMAFragLayout(n)
        undefined = llvm.UndefOp(ir.VectorType.get([layout.vec], mlir_type(dtype))).result
        return cls(FragmentedArray([undefined] * layout.registers, layout))

    @property
    def n(self) -> int:
        return self.value.layout.n

    @property
    def dtype(self) -> str:
        return "float16" if str(self.value.element_type) == "f16" else "float32"

    @property
    def values(self) -> list[ir.Value]:
        """The flat per-thread values (see the class doc)."""
        if self.dtype == "float16":
            return [bits_of(r, 32)[0] for r in self.value.registers]
        return [v for r in self.value.registers for v in elements(r)]

    def flatten_values(self) -> tuple[list[ir.Value], Callable[[Sequence[ir.Value]], WGMMAAccumulator]]:
        """For `for_range(carry=acc)` and `if_else`: the accumulator as a flat list of values."""
        n, dtype = self.n, self.dtype
        return self.values, lambda vals: WGMMAAccumulator(list(vals), n, dtype)

    _flatten_values = flatten_values  # the older private name

    def store(self, ref: ir.Value, dtype: Any = None) -> None:
        """Write the tile to a (64, n) memref (global or shared), converting to its element type
        (or `dtype`), two adjacent columns per store."""
        shape = tuple(ir.MemRefType(ref.type).shape)
        if shape != (M_TILE, self.n):
            raise ValueError(f"WGMMAAccumulator.store: expected a ({M_TILE}, {self.n}) memref, got {shape}")
        self.value.astype(ir.MemRefType(ref.type).element_type if dtype is None else dtype).store(ref)

    def store_swizzled(self, ref: ir.Value, swizzle: int = 128) -> None:
        """Write the tile to smem laid out for a TMA store with `swizzle`: ref (n // w, 64, w), w
        = swizzle bytes / element size, converting to the ref's element type. Bank-conflict
        free (it is `value.astype(...).store_tiled(ref, swizzle)`)."""
        elem = ir.MemRefType(ref.type).element_type
        self.value.astype(elem).store_tiled(ref, swizzle)


def _check_array(array: FragmentedArray) -> FragmentedArray:
    layout = array.layout
    if not isinstance(layout, WGMMAFragLayout) or layout.m != M_TILE:
        raise ValueError(f"WGMMAAccumulator: needs a (64, n) array in WGMMAFragLayout, got {layout}")
    if str(array.element_type) not in ("f32", "f16"):
        raise ValueError(f"WGMMAAccumulator: accumulators are f32 or f16, the array is {array.element_type}; "
                         f"use astype")
    _check_n(layout.n)
    return array


def _check_dtype(dtype: str) -> None:
    if dtype not in _ACC_TYPES:
        raise ValueError(f"WGMMAAccumulator: dtype must be 'float32' or 'float16', got {dtype!r}")


def _check_n(n: int) -> None:
    if not isinstance(n, int) or not 8 <= n <= 256 or n % 8:
        raise ValueError(f"wgmma: n must be a multiple of 8 in [8, 256], got {n!r}")


def smem_descriptor(address: ir.Value, *, swizzle: int, leading_byte_offset: int,
                    stride_byte_offset: int) -> ir.Value:
    """The 64-bit wgmma matrix descriptor of an smem operand at `address` (i32, shared window):
    bits 0-13 address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 62-63 the swizzle mode."""
    if swizzle not in _LAYOUT_CODE:
        raise ValueError(f"wgmma: swizzle must be 32, 64 or 128 bytes, got {swizzle!r}")
    static = ((leading_byte_offset >> 4) & 0x3FFF) << 16
    static |= ((stride_byte_offset >> 4) & 0x3FFF) << 32
    static |= _LAYOUT_CODE[swizzle] << 62
    if static >= 1 << 63:
        static -= 1 << 64  # as a signed i64 constant
    addr = arith.extui(i64(), as_i32(address).unsigned >> 4 & 0x3FFF)
    return addr | static


def _advance(desc: ir.Value, nbytes: int) -> ir.Value:
    return desc if not nbytes else desc + (nbytes >> 4)


def wgmma_fence(*operands: Any) -> Any:
    """`wgmma.fence`: order earlier register/smem writes before the next wgmma reads them.

    With operands (`WGMMAAccumulator`s, or `FragmentedArray`s of 32-bit words such as a
    register A of bf16 pairs), returns them threaded through the fence: every write to them
    (a rescale, a conversion, zeros) is then ordered before it, as CUTLASS's
    `warpgroup_fence_operand` does. Otherwise the compiler may sink such writes between the
    fence and the wgmma reading them, and ptxas serializes every wgmma of the kernel (C7513).
    Pass fence=False to the `wgmma` calls that follow."""
    if not operands:
        inline_ptx("wgmma.fence.sync.aligned;")
        return None
    words, rebuilds = [], []
    for operand in operands:
        if isinstance(operand, WGMMAAccumulator):
            count = len(operand.values)
            words += operand.values
            rebuilds.append((count, lambda vals, acc=operand: WGMMAAccumulator(vals, acc.n, acc.dtype)))
        elif isinstance(operand, FragmentedArray):
            regs = [bits_of(r, 32) for r in operand.registers]
            per = len(regs[0])
            words += [w for r in regs for w in r]

            def rebuild(vals, arr=operand, per=per):
                vt = ir.VectorType(arr.registers[0].type)
                regs = [from_bits(vals[k:k + per], vt.element_type, vt.shape[0]) for k in range(0, len(vals), per)]
                return FragmentedArray(regs, arr.layout, signed=arr.signed)

            rebuilds.append((len(regs) * per, rebuild))
        else:
            raise TypeError(f"wgmma_fence: operands must be WGMMAAccumulator or FragmentedArray, got "
                            f"{type(operand).__name__}")
    types = [w.type for w in words]
    cons = ["=f" if str(t) == "f32" else "=r" for t in types]
    out = inline_ptx("wgmma.fence.sync.aligned;", words, cons + [str(i) for i in range(len(words))], types)
    out = out if isinstance(out, list) else [out]
    result, at = [], 0
    for count, rebuild in rebuilds:
        result.append(rebuild(out[at:at + count]))
        at += count
    return result[0] if len(result) == 1 else tuple(result)


def wgmma_commit_group() -> None:
    """Close the group of wgmma issued since the last commit."""
    inline_ptx("wgmma.commit_group.sync.aligned;")


def _acc_constraint(dtype: str) -> tuple[str, ir.Type]:
    return ("=f", _f32()) if dtype == "float32" else ("=r", i32())


def wgmma_wait_group(pending: int, acc: WGMMAAccumulator | None = None) -> WGMMAAccumulator | None:
    """Wait until at most `pending` committed groups are in flight. Pass the accumulator(s) the
    groups write and use the returned one: reads of it cannot move above the wait."""
    if not isinstance(pending, int) or not 0 <= pending <= 7:
        raise ValueError(f"wgmma_wait_group: pending must be an int in [0, 7], got {pending!r}")
    asm = f"wgmma.wait_group.sync.aligned {pending};"
    if acc is None:
        inline_ptx(asm)
        return None
    count = len(acc.values)
    cons, vtype = _acc_constraint(acc.dtype)
    values = inline_ptx(asm, acc.values, [cons] * count + [str(i) for i in range(count)], [vtype] * count)
    values = values if isinstance(values, list) else [values]
    return WGMMAAccumulator(values, acc.n, acc.dtype)


@dataclass(frozen=True)
class _Operand:
    """An smem operand's descriptor fields and its k extent."""

    k: int
    lbo: int
    sbo: int
    k_step_bytes: int  # descriptor advance per instruction
    transposed: int  # imm-trans bit: 1 for MN-major


def _smem_operand(ref: ir.Value, what: str, major: str, swizzle: int, itemsize: int, mn: int,
                  k_inst: int) -> _Operand:
    """Check an smem operand (a: mn = 64 rows; b: mn = n) and derive its descriptor fields."""
    ref_type = ir.MemRefType(ref.type)
    if str(ref_type.memory_space) != "#gpu.address_space<workgroup>":
        raise ValueError(f"wgmma: {what} must be in shared memory, got {ref_type}")
    if swizzle not in SWIZZLES:
        raise ValueError(f"wgmma: {what}_swizzle must be 32, 64 or 128 (bytes), got {swizzle!r}")
    width = swizzle // itemsize  # elements in one swizzled row
    shape = tuple(ref_type.shape)
    strides, _ = ref_type.get_strides_and_offset()
    rows = "64 rows of a" if what == "a" else "n rows of b transposed"
    if major == "k":
        if shape != (mn, width):
            raise ValueError(f"wgmma: with {what}_major='k' and {what}_swizzle={swizzle}, {what} must be "
                             f"({mn}, {width}) ({rows}, one {swizzle}-byte swizzle span of k), got {shape}")
        if tuple(strides) != (width, 1):
            raise ValueError(f"wgmma: {what} must have contiguous {swizzle}-byte rows, got strides {tuple(strides)}")
        return _Operand(width, 16, 8 * swizzle, K_STEP_BYTES, 0)
    if major != "mn":
        raise ValueError(f"wgmma: {what}_major must be 'k' or 'mn', got {major!r}")
    if itemsize != 2:
        raise ValueError(f"wgmma: {what}_major='mn' (transposed) needs 16-bit inputs (bf16/f16); tf32 and f8 "
                         f"operands must be K-major")
    dim = "n" if what == "b" else "m (64)"
    if mn % width:
        raise ValueError(f"wgmma: with {what}_major='mn', {dim} must be a multiple of {width} (the elements in one "
                         f"{swizzle}-byte swizzle span), got {mn}")
    if len(shape) != 3 or shape[0] != mn // width or shape[2] != width or shape[1] % k_inst:
        raise ValueError(f"wgmma: with {what}_major='mn' and {what}_swizzle={swizzle}, {what} must be "
                         f"({mn // width}, k, {width}) (column chunks of {width}, k a multiple of {k_inst}), "
                         f"got {shape}")
    if tuple(strides[1:]) != (width, 1):
        raise ValueError(f"wgmma: {what} must have contiguous {swizzle}-byte rows, got strides {tuple(strides)}")
    return _Operand(shape[1], strides[0] * itemsize, 8 * swizzle, k_inst * swizzle, 1)


def _input_type(value: Any, what: str) -> ir.Type:
    if isinstance(value, FragmentedArray):
        return value.element_type
    if not isinstance(value, ir.Value) or not isinstance(value.type, ir.MemRefType):
        raise TypeError(f"wgmma: {what} must be an smem memref{' or a FragmentedArray' if what == 'a' else ''}, "
                        f"got {type(value).__name__}")
    return ir.MemRefType(value.type).element_type


def _register_a(a: Any, elem: ir.Type, k_inst: int) -> tuple[int, list[ir.Value]]:
    """(k, i32 words) of an A operand held in registers."""
    if bitwidth(elem) != 16:
        raise ValueError(f"wgmma: a from registers needs bf16/f16 elements, got {elem}; put tf32/f8 A in "
                         f"shared memory")
    layout = a.layout
    if not isinstance(layout, WGMMAFragLayout) or layout.m != M_TILE or layout.n % k_inst:
        raise ValueError(f"wgmma: a in registers must be a (64, k) FragmentedArray in WGMMAFragLayout(k), k a "
                         f"multiple of {k_inst}, got {layout}")
    assert isinstance(a, FragmentedArray)
    return layout.n, [bits_of(reg, 32)[0] for reg in a.registers]


def wgmma(acc: WGMMAAccumulator, a: Any, b: ir.Value, *, a_major: str = "k", b_major: str = "k",
          swizzle: int = 128, a_swizzle: int | None = None, b_swizzle: int | None = None,
          accumulate: bool | ir.Value = True, fence: bool = True, tf32: bool = False) -> WGMMAAccumulator:
    """acc (64 x n) += a (64 x k) @ b (k x n) on one warpgroup; see the module doc for types
    and layouts. Issues one `wgmma.mma_async` per 32 bytes of k (not committed: call
    `wgmma_commit_group`). accumulate=False (or an i1 value that is false) ignores acc's old
    contents (D = A @ B). tf32=True accepts f32 operands (multiplied as tf32)."""
    ta, tb = _input_type(a, "a"), _input_type(b, "b")
    for what, t in (("a", ta), ("b", tb)):
        if str(t) == "f32" and not tf32:
            raise ValueError(f"wgmma: {what} must be bf16 or f16 in shared memory, got f32; f32 operands multiply "
                             f"as tf32 (10-bit mantissa): pass tf32=True")
        if str(t) not in _PTX_TYPES:
            raise ValueError(f"wgmma: {what} must be bf16, f16, f8E4M3FN, f8E5M2 or f32 (with tf32=True), got {t}")
    pa, pb = _PTX_TYPES[str(ta)], _PTX_TYPES[str(tb)]
    f8 = pa in ("e4m3", "e5m2")
    if (pa != pb) and not (f8 and pb in ("e4m3", "e5m2")):
        raise ValueError(f"wgmma: a and b must have the same element type (f8 may mix e4m3/e5m2), got {ta} and {tb}")
    itemsize = bitwidth(ta) // 8
    k_inst = K_STEP_BYTES // itemsize
    n = acc.n
    _check_n(n)
    acc_ptx = _ACC_TYPES[acc.dtype]
    if acc.dtype == "float16" and pa not in ("f16", "e4m3", "e5m2"):
        raise ValueError(f"wgmma: an f16 accumulator needs f16 or f8 inputs, got {pa}; use WGMMAAccumulator.zeros"
                         f"(n) (f32)")
    a_swizzle = swizzle if a_swizzle is None else a_swizzle
    b_swizzle = swizzle if b_swizzle is None else b_swizzle
    ob = _smem_operand(b, "b", b_major, b_swizzle, itemsize, n, k_inst)
    registers_a = isinstance(a, FragmentedArray)
    if registers_a:
        if a_major != "k":
            raise ValueError("wgmma: a in registers has no major; leave a_major='k'")
        k, a_words = _register_a(a, ta, k_inst)
        oa = None
    else:
        oa = _smem_operand(a, "a", a_major, a_swizzle, itemsize, M_TILE, k_inst)
        k = oa.k
    if k != ob.k:
        raise ValueError(f"wgmma: a has k = {k} but b has k = {ob.k} (check the swizzles: a K-major operand spans "
                         f"one swizzle, {a_swizzle}/{b_swizzle} bytes)")
    if pa == "tf32" and ob.transposed:
        raise ValueError("wgmma: tf32 operands must be K-major")

    if oa is not None:
        desc_a = smem_descriptor(smem_address(a), swizzle=a_swizzle, leading_byte_offset=oa.lbo,
                                 stride_byte_offset=oa.sbo)
    desc_b = smem_descriptor(smem_address(b), swizzle=b_swizzle, leading_byte_offset=ob.lbo,
                             stride_byte_offset=ob.sbo)
    if isinstance(accumulate, bool):
        scale_d = c(int(accumulate), i32())
    else:
        scale_d = arith.extui(i32(), accumulate)
    if fence:
        wgmma_fence()
    count = len(acc.values)
    cons, vtype = _acc_constraint(acc.dtype)
    regs = ", ".join(f"${i}" for i in range(count))
    a_operands = 4 if registers_a else 1
    a_text = "{" + ", ".join(f"${count + i}" for i in range(4)) + "}" if registers_a else f"${count}"
    b_index, p_index = count + a_operands, count + a_operands + 1
    trans = []
    if pa in ("bf16", "f16"):
        trans = ([] if registers_a else [str(oa.transposed)]) + [str(ob.transposed)]
    tail = ", ".join(["p", "1", "1", *trans])
    asm = ("{\n.reg .pred p;\n"
           f"setp.ne.b32 p, ${p_index}, 0;\n"
           f"wgmma.mma_async.sync.aligned.m64n{n}k{k_inst}.{acc_ptx}.{pa}.{pb} {{{regs}}}, {a_text}, ${b_index}, "
           f"{tail};\n}}")
    constraints = [cons] * count + (["r"] * 4 if registers_a else ["l"]) + ["l", "r"] + [str(i) for i in range(count)]
    values = acc.values
    for step in range(k // k_inst):
        a_in = a_words[4 * step: 4 * step + 4] if registers_a else [_advance(desc_a, step * oa.k_step_bytes)]
        operands = [*a_in, _advance(desc_b, step * ob.k_step_bytes), scale_d, *values]
        out = inline_ptx(asm, operands, constraints, [vtype] * count, memory=False)
        values = out if isinstance(out, list) else [out]
        scale_d = c(1, i32())
    return WGMMAAccumulator(values, n, acc.dtype)
