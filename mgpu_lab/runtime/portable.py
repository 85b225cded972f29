"""The launcher core: argument checks, module loading, the launch. Self-contained on purpose.

This file imports only the standard library, numpy, CuPy and cuda-bindings, because
`mgpu_lab.runtime.export` copies its source verbatim into exported modules: the exported launcher is
the same tested code that `Kernel.__call__` runs. Keep it free of mgpu_lab imports.

A kernel is described by a plain dict (see `PortableLauncher.__init__`). The call path is lean:
modules load once per device; a call whose arrays are CuPy arrays matching the signature
exactly is accepted by a few attribute compares per array (anything else goes through the
full, explaining check); pointers go into preallocated parameter slots and `cuLaunchKernel`
is called through CuPy's Cython wrapper `cupy.cuda.driver.launchKernel`, which takes plain
ints (0.2 us on the host; a ctypes call with 11 arguments costs 0.9 us). For the common case,
a kernel whose parameters are its arrays' pointers, each signature gets one generated function
(`call_source`) doing the checks, the parameter writes and the launch with no intermediate
objects. Kernels with clusters use cuda-bindings' `cuLaunchKernelEx` with a launch configuration
per thread (libcuda's by ctypes with a prebuilt struct was no faster: 1.36 us of host work against
1.28, benchmarks/bench_launch_host.py).
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

_SLOT_BYTES = 128  # a TMA descriptor, the largest parameter
_SLOT_WORDS = _SLOT_BYTES // 8
_DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024  # above this the function attribute must be raised
# Names numpy does not know natively but ml_dtypes/CuPy do (the builder reads this table too).
ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
_CUDA_ERROR_INVALID_CONTEXT = 201


class PortableLaunchError(ValueError):
    """Raised for bad kernel arguments when no error class is injected."""


NO_GPU = "no CUDA GPU or driver found: compiling works, launching and tuning need a Hopper GPU"


class NoCudaDeviceError(RuntimeError):
    """No usable CUDA GPU or driver on this machine: kernels compile, nothing can launch."""


def device_getter(cupy: Any) -> Any:
    """CuPy's current-device query, with a missing driver or GPU said once and clearly (CuPy's
    own error is cudaErrorInsufficientDriver / cudaErrorNoDevice from deep inside)."""
    get = cupy.cuda.runtime.getDevice

    def current_device() -> int:
        try:
            return get()
        except Exception as e:  # noqa: BLE001 - CUDARuntimeError, whatever CuPy version raises it
            raise NoCudaDeviceError(f"{NO_GPU} ({type(e).__name__}: {e})") from None
    return current_device


def dtype_from_name(name: str) -> np.dtype:
    """numpy dtype for a name, with ml_dtypes for bfloat16 and float8."""
    if name in ML_DTYPES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


# CuPy has no float8 types: such arrays live on the device as uint8 arrays of their bytes.
BYTES_ON_DEVICE = ("float8_e4m3fn", "float8_e5m2")


def device_dtype(name: str) -> np.dtype:
    """The dtype a CuPy array for a kernel array of dtype `name` has (uint8 for float8)."""
    return np.dtype(np.uint8) if name in BYTES_ON_DEVICE else dtype_from_name(name)


def cuda_check(result: tuple, what: str) -> Any:
    """Unpack a cuda-bindings result tuple, raising RuntimeError with the CUDA error name."""
    from cuda.bindings import driver

    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        name = name.decode() if isinstance(name, bytes) else name
        raise RuntimeError(f"{what} failed: {name}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


@functools.cache
def _driver_launch() -> tuple[Any, type[Exception]]:
    """(launchKernel, its error class): CuPy's Cython cuLaunchKernel, which converts its 11 int
    arguments in C; ctypes' conversion of the same arguments costs 4x as much."""
    import cupy

    driver = cupy.cuda.driver
    return driver.launchKernel, driver.CUDADriverError


def device_smem_limit(device: int) -> int:
    """The device's per-block opt-in shared-memory limit, in bytes."""
    from cuda.bindings import driver

    attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    return int(cuda_check(driver.cuDeviceGetAttribute(attr, device), "cuDeviceGetAttribute"))


def cluster_launch_config(driver: Any, grid: tuple, block: tuple, smem: int, cluster: tuple) -> Any:
    """cuda-bindings' CUlaunchConfig of a launch in clusters of `cluster` blocks (stream unset)."""
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = smem
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
    config.attrs = [attr]
    config.numAttrs = 1
    return config


class _ClusterLaunchConfig(threading.local):
    """A cluster kernel's CUlaunchConfig, one per thread: each thread sets its own stream in it
    right before its launch, so two threads never launch on each other's stream."""

    def __init__(self, driver: Any, grid: tuple, block: tuple, smem: int, cluster: tuple):
        self.config = cluster_launch_config(driver, grid, block, smem, cluster)


class _ParamBlock:
    """One kernel parameter block: slots 64-byte aligned (as byval TMA descriptors need) and the
    argv array of their addresses that a launch passes as kernelParams."""

    def __init__(self, count: int):
        raw = np.zeros(max(count, 1) * _SLOT_WORDS + 8, dtype=np.uint64)
        shift = (-raw.ctypes.data % 64) // 8
        self.raw = raw
        self.words = raw[shift: shift + max(count, 1) * _SLOT_WORDS]
        base = self.base = self.words.ctypes.data
        self.slots = (ctypes.c_uint64 * (max(count, 1) * _SLOT_WORDS)).from_address(base)  # ctypes view of words
        whole = memoryview(self.words).cast("B")
        self.slot_views = [whole[i * _SLOT_BYTES: (i + 1) * _SLOT_BYTES] for i in range(count)]  # byte view per slot
        self.argv = np.array([base + i * _SLOT_BYTES for i in range(count)] or [0], dtype=np.uint64)
        self.argv_address = int(self.argv.ctypes.data)


# Full parameter blocks kept per thread and kernel, by their arrays' pointers. A layer's linear
# runs one kernel on each layer's weights in turn, and torch's allocator hands the activations
# back at the same addresses every step, so a model's calls cycle through a few pointer sets:
# each keeps its encoded TMA descriptors instead of encoding and copying them again.
_FILLED_BLOCKS = 32


class _ParamStorage(_ParamBlock, threading.local):
    """Per-thread parameter blocks: its own (written in place by the generated pointer-only call,
    and by profiled launches) and, for kernels with TMA descriptors, up to `_FILLED_BLOCKS` full
    blocks by pointers (least recently used dropped first)."""

    def __init__(self, count: int):
        super().__init__(count)
        self.count = count
        self.parts = (self.slots, self.argv_address)  # one thread-local read on the hot path
        self.filled: OrderedDict[tuple, _ParamBlock] = OrderedDict()
        self.last_key, self.last_argv = None, 0  # the last TMA launch's pointers and argv (a loop's calls)

    def filled_block(self, key: tuple, fill: Any) -> _ParamBlock:
        """The block filled for pointers `key`: kept, or `fill(block)` on a fresh (or the least
        recently used) one. A fill that raises leaves no block behind for `key`."""
        block = self.filled.get(key)
        if block is not None:
            self.filled.move_to_end(key)
        else:
            block = self.filled.popitem(last=False)[1] if len(self.filled) >= _FILLED_BLOCKS \
                else _ParamBlock(self.count)
            self.last_key = None  # the block may have been the last launch's: refilled below
            fill(block)
            self.filled[key] = block
        self.last_key, self.last_argv = key, block.argv_address
        return block


class LoadedFunction:
    """The kernel loaded on one device, with its launch configuration baked in."""

    def __init__(self, spec: dict, device: int, resource_error: type[Exception]):
        from cuda.bindings import driver

        self._driver = driver
        name = spec["name"]
        total = spec["dynamic_smem"] + spec.get("static_smem", 0)
        limit = device_smem_limit(device)
        if total > limit:
            raise resource_error(
                f"smem: kernel {name} needs {total} bytes of shared memory ({spec['dynamic_smem']} dynamic "
                f"+ {spec.get('static_smem', 0)} static) but the device allows at most {limit} bytes per block")
        self.module = self._load(spec, driver)
        self.function = cuda_check(driver.cuModuleGetFunction(self.module, name.encode()),
                                   f"cuModuleGetFunction({name})")
        self.handle = int(self.function)
        self.smem = spec["dynamic_smem"]
        if self.smem > _DEFAULT_DYNAMIC_SMEM_LIMIT:
            attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            cuda_check(driver.cuFuncSetAttribute(self.function, attr, self.smem), "raising the dynamic smem limit")
        self.grid, self.block, cluster = tuple(spec["grid"]), tuple(spec["block"]), tuple(spec["cluster"])
        self.config = self._cluster_config(cluster) if cluster != (1, 1, 1) else None
        self.dims = (*self.grid, *self.block, self.smem)  # cuLaunchKernel's 7 ints, in order
        self.launch_kernel, self.launch_error = _driver_launch()

    def _load(self, spec: dict, driver: Any) -> Any:
        err, module = driver.cuModuleLoadData(spec["cubin"])
        if err == driver.CUresult.CUDA_SUCCESS:
            return module
        if spec.get("ptx") and err == driver.CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU:
            # A newer GPU than the cubin's: let the driver compile the embedded PTX.
            return cuda_check(driver.cuModuleLoadData(spec["ptx"].encode() + b"\0"), f"JIT-loading {spec['name']}'s PTX")
        return cuda_check((err, module), f"loading {spec['name']}'s cubin")

    def _cluster_config(self, cluster: tuple) -> _ClusterLaunchConfig:
        return _ClusterLaunchConfig(self._driver, self.grid, self.block, self.smem, cluster)

    def launch(self, stream: int, argv: int) -> None:
        """Launch on `stream` with `argv` (the kernelParams array's address), both ints.
        (The launcher's generated call makes the cuLaunchKernel call itself and comes here on errors.)"""
        err = self._launch_once(stream, argv)
        if err:
            self.recover(err, stream, argv)

    def recover(self, err: int, stream: int, argv: int) -> None:
        """After a failed launch: retry once if the thread had no current context, else raise."""
        if err == _CUDA_ERROR_INVALID_CONTEXT:
            # A thread that has made no CUDA runtime call yet has no current context.
            import cupy

            cupy.cuda.runtime.free(0)
            err = self._launch_once(stream, argv)
        if err:
            cuda_check((self._driver.CUresult(int(err)),), "cuLaunchKernel")

    def _launch_once(self, stream: int, argv: int) -> int:
        if self.config is None:
            try:
                self.launch_kernel(self.handle, *self.dims, stream, argv, 0)
            except self.launch_error as error:
                return int(error.status)
            return 0
        config = self.config.config  # this thread's
        config.hStream = stream
        (err,) = self._driver.cuLaunchKernelEx(config, self.function, argv, 0)
        return int(err)


def _torch_view(x: Any, cupy: Any) -> Any:
    """A CuPy array over a CUDA torch tensor's memory, for dtypes DLPack cannot carry into
    CuPy (bfloat16, float8). None when `x` is not such a tensor."""
    if not (hasattr(x, "data_ptr") and hasattr(x, "element_size") and getattr(x, "is_cuda", False)):
        return None
    try:
        dtype = device_dtype(str(x.dtype).removeprefix("torch."))
    except (TypeError, AttributeError):
        return None
    if not x.is_contiguous():
        return None
    memory = cupy.cuda.UnownedMemory(x.data_ptr(), x.numel() * x.element_size(), x, device_id=x.device.index)
    return cupy.ndarray(tuple(x.shape), dtype, cupy.cuda.MemoryPointer(memory, 0))


_DEVICE_ARRAY_KINDS = "CuPy/torch/__cuda_array_interface__/DLPack"
_DLPACK_DEVICE_TYPES = {1: "cpu", 2: "cuda", 3: "cuda pinned host", 13: "cuda managed"}


def _describe(x: Any) -> str:
    """A type's name as the user wrote it: `list`, `numpy.ndarray`, `torch.Tensor`."""
    cls = type(x)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"


def _dlpack_device(x: Any) -> str | None:
    """The DLPack device kind of `x` ("cpu", "cuda", ...), or None when it does not say."""
    try:
        kind = int(x.__dlpack_device__()[0])
    except Exception:  # noqa: BLE001 - objects without a usable __dlpack_device__
        return None
    return _DLPACK_DEVICE_TYPES.get(kind, f"DLPack device type {kind}")


def _pairs_that_may_not_alias(n_in: int, n_out: int, may_alias: Any) -> list[tuple[int, int]]:
    """(array, array) index pairs whose memory must not overlap: every output against every
    input (unless declared in `may_alias`: [(output, input)] pairs, or True for all) and
    outputs against each other."""
    allowed = set() if not may_alias else (
        {(o, i) for o in range(n_out) for i in range(n_in)} if may_alias is True else {tuple(p) for p in may_alias})
    pairs = [(n_in + o, i) for o in range(n_out) for i in range(n_in) if (o, i) not in allowed]
    pairs += [(n_in + o, n_in + q) for o in range(n_out) for q in range(o + 1, n_out)]
    return pairs


def _array_checks(indexes: range, reject: str, shapes: list[tuple[int, ...]], devices: bool = True) -> list[str]:
    """Source lines accepting arrays x<i> (i in `indexes`) only if each is an `nd` of shape
    s<i> (`shapes[i]`), dtype d<i>, C-contiguous, 16-byte aligned and (`devices`) on `device`;
    they bind p<i>, its pointer, and run `reject` otherwise. One test per array, cheapest
    attributes first."""
    lines = []
    for i in indexes:
        lines += [f"    if (type(x{i}) is not nd or not x{i}._c_contiguous",
                  f"            or (x{i}.dtype is not d{i} and x{i}.dtype != d{i}) or {_shape_test(i, shapes[i])}):",
                  f"        {reject}",
                  f"    m{i} = x{i}.data",
                  f"    p{i} = m{i}.ptr"]
    if indexes:
        on_device = "".join(f" or m{i}.device_id != device" for i in indexes) if devices else ""
        lines += [f"    if ({' | '.join(f'p{i}' for i in indexes)}) & 15{on_device}:", f"        {reject}"]
    return lines


def _shape_test(i: int, shape: tuple[int, ...]) -> str:
    """True when x<i>'s shape is not s<i>. CuPy builds a new tuple for every `.shape` read; a
    1- or 2-D shape with a nonzero first dimension is pinned down by ndim, len() and size alone
    (l<i> and z<i>), which cost half as much."""
    if len(shape) in (1, 2) and shape[0] > 0:
        size = f" or x{i}.size != z{i}" if len(shape) == 2 else ""
        return f"x{i}.ndim != {len(shape)} or len(x{i}) != l{i}{size}"
    return f"x{i}.shape != s{i}"


def _overlap_checks(no_alias: list[tuple[int, int]], nbytes: list[int], reject: str) -> list[str]:
    """Source lines running `reject` when a pair of pointers in `no_alias` overlaps."""
    lines = []
    for a, b in no_alias:
        if nbytes[a] and nbytes[b]:
            # p_a < p_b + n_b and p_b < p_a + n_a, with one subtraction
            lines += [f"    if {-nbytes[b]} < p{b} - p{a} < {nbytes[a]}:", f"        {reject}"]
    return lines


def _compile(lines: list[str], namespace: dict, name: str) -> Any:
    # Named after this file, so tracebacks place the generated frames in the launcher (and
    # mgpu_lab's error trimming cuts them like the launcher's own).
    here = globals().get("__file__", "<mgpu_lab launcher>")  # an exported module may run without a file
    code = compile("\n".join(lines), f"{here}:generated {name}", "exec")
    exec(code, namespace)  # noqa: S102 - generated from indexes and sizes only
    return namespace[name]


def _signature_values(ndarray: type, specs: list) -> dict[str, Any]:
    """The generated code's free names: nd, and s<i>/d<i> per array (bound as values, never as source)."""
    namespace: dict[str, Any] = {"nd": ndarray}
    for i, (shape, dtype) in enumerate(specs):
        namespace[f"s{i}"], namespace[f"d{i}"] = tuple(shape), dtype
        namespace[f"l{i}"], namespace[f"z{i}"] = (shape[0] if shape else 0), int(np.prod(shape, dtype=np.int64))
    return namespace


def exact_match_checker(ndarray: type, specs: list, nbytes: list[int] = (),
                        no_alias: list[tuple[int, int]] = ()) -> Any:
    """check(arrays, device) -> data pointers, or None unless every array is an `ndarray`
    matching its (shape, dtype) spec exactly (C-contiguous, 16-byte aligned, on `device`) and
    no pair in `no_alias` overlaps. The tests are unrolled for this many arrays: half the cost
    of a loop. Only indexes and sizes enter the generated source; shapes and dtypes are bound
    as values."""
    n = len(specs)
    if n == 0:
        return lambda arrays, device: [] if len(arrays) == 0 else None
    lines = ["def check(arrays, device):", f"    if len(arrays) != {n}:", "        return None",
             f"    {', '.join(f'x{i}' for i in range(n))}, = arrays"]
    shapes = [tuple(shape) for shape, _ in specs]
    lines += _array_checks(range(n), "return None", shapes) + _overlap_checks(no_alias, nbytes, "return None")
    lines.append(f"    return [{', '.join(f'p{i}' for i in range(n))}]")
    return _compile(lines, _signature_values(ndarray, specs), "check")


def _tuple_source(names: Any) -> str:
    return "(" + "".join(f"{name}, " for name in names) + ")"


def call_source(shapes: list[tuple[int, ...]], n_in: int, nbytes: list[int], no_alias: list[tuple[int, int]],
                inline_launch: tuple[int, ...] | None, front: bool = False, one_device: bool = False) -> list[str]:
    """Source of `call(args, out=None, stream=None)` for one signature (`shapes`: the inputs'
    then the outputs', the first `n_in` inputs): the exact-match checks
    of `exact_match_checker`, outputs allocated when `out` is None, then the launch. With
    `inline_launch` (cuLaunchKernel's grid, block and smem ints; for kernels whose parameters
    are exactly their arrays' pointers) it writes the pointer slots and calls the driver
    itself; otherwise it hands the checked arrays to `launch_general`. Anything not matching
    exactly, or a device the kernel is not loaded on yet, goes to `slow` (the explaining path).

    `front`: the source of a front end's `call(*args, out=None, stream=None, isolate=None,
    timeout_s=None)` instead, which also hands an `isolate` request and `settings.enabled` (the
    process-wide isolation switch) to `slow(args, out, stream, isolate, timeout_s)`, and hands
    any error to `trim(error)` before re-raising it.

    `one_device`: the process sees one GPU (`only_device`, 0), so every array is on it and it is
    current: the code reads neither the current device nor each array's.

    Free names: nd, s<i>, d<i>, l<i>, z<i>, get_device or only_device, handles (device -> CUfunction int), slow, empty,
    and storage, current_stream, stream_pointer, launch, launch_error, recover (inline) or
    launch_general; settings and trim with `front`."""
    n_out = len(shapes) - n_in
    ins, outs = range(n_in), range(n_in, n_in + n_out)
    if front:
        slow = "return slow(args, out, stream, isolate, timeout_s)"
        lines = ["def call(*args, out=None, stream=None, isolate=None, timeout_s=None):",
                 "    if isolate is not None or settings.enabled:", f"        {slow}"]
    else:
        slow = "return slow(args, out, stream)"
        lines = ["def call(args, out=None, stream=None):"]
    lines += [f"    device = {'only_device' if one_device else 'get_device()'}",
              "    handle = handles.get(device)",
              f"    if handle is None or len(args) != {n_in}:",
              f"        {slow}"]
    if n_in:
        lines.append(f"    {', '.join(f'x{i}' for i in ins)}, = args")
    devices = not one_device
    lines += _array_checks(ins, slow, shapes, devices)
    if n_out == 0:
        lines += ["    if out is not None:", f"        {slow}"]
    else:
        lines.append("    if out is None:")
        lines += [line for i in outs for line in (f"        x{i} = empty(s{i}, d{i})", f"        p{i} = x{i}.data.ptr")]
        lines.append("    else:")
        if n_out == 1:
            lines.append(f"        x{n_in} = out")
        else:
            lines += [f"        if type(out) is not tuple or len(out) != {n_out}:", f"            {slow}",
                      f"        {', '.join(f'x{i}' for i in outs)}, = out"]
        lines += ["    " + line for line in _array_checks(outs, slow, shapes, devices) + _overlap_checks(no_alias, nbytes, slow)]
    results = f"x{n_in}" if n_out == 1 else _tuple_source(f"x{i}" for i in outs)
    if inline_launch is None:
        arrays = _tuple_source(f"x{i}" for i in range(n_in + n_out))
        pointers = ", ".join(f"p{i}" for i in range(n_in + n_out))
        lines.append(f"    return launch_general({arrays}, [{pointers}], device, stream)")
    else:
        lines += _launch_lines([f"p{i}" for i in range(n_in + n_out)], inline_launch)
        lines.append(f"    return {results}")
    if front:
        # An error leaves with the front end's frames cut (`trim`), this one's too: a bare
        # `raise` after trimming does not add the frame back.
        lines = [lines[0], "    try:"] + ["    " + line for line in lines[1:]]
        lines += ["    except Exception as error:", "        trim(error)", "        raise"]
    return lines


def _launch_lines(pointers: list[str], dims: tuple[int, ...]) -> list[str]:
    """Source lines writing the `pointers` expressions into this thread's parameter slots and
    calling cuLaunchKernel on `handle` with the `dims` ints; a driver error goes to `recover`."""
    lines = ["    slots, argv = storage.parts"]
    lines += [f"    slots[{i * _SLOT_WORDS}] = {pointer}" for i, pointer in enumerate(pointers)]
    return lines + ["    s = current_stream(device).ptr if stream is None else stream_pointer(stream)",
                    "    try:",
                    f"        launch(handle, {', '.join(str(int(d)) for d in dims)}, s, argv, 0)",
                    "    except launch_error as error:",
                    "        recover(device, error, s, argv)"]


class ArgumentChecker:
    """The argument checks of a signature: inputs and outputs ([(shape, dtype name)]), and which
    outputs may overlap which inputs (`may_alias`). `checked` accepts exactly matching CuPy arrays
    with a few attribute compares and explains anything else; `PortableLauncher` and the program
    runner check the user's arrays with it."""

    def __init__(self, spec: dict, error: type[Exception] = PortableLaunchError):
        import cupy

        self._cupy = cupy
        self._ndarray = cupy.ndarray
        self._get_device = device_getter(cupy)
        self._raw_get_device = cupy.cuda.runtime.getDevice  # for generated calls: they run once a module loaded
        self._current_stream = cupy.cuda.get_current_stream
        self.spec = spec
        self.name = spec["name"]
        self._error = error
        self.n_in = len(spec["inputs"])
        self.in_specs = [(tuple(s), device_dtype(d)) for s, d in spec["inputs"]]
        self.out_specs = [(tuple(s), device_dtype(d)) for s, d in spec["outputs"]]
        self._all_specs = self.in_specs + self.out_specs
        self._shapes = [shape for shape, _ in self._all_specs]
        self._nbytes = [int(np.prod(shape, dtype=np.int64)) * dtype.itemsize for shape, dtype in self._all_specs]
        self._declared = [d for _, d in spec["inputs"]] + [d for _, d in spec["outputs"]]
        self._no_alias = _pairs_that_may_not_alias(self.n_in, len(self.out_specs), spec.get("may_alias"))
        self._exact_inputs = exact_match_checker(self._ndarray, self.in_specs)
        self._exact_all = exact_match_checker(self._ndarray, self._all_specs, self._nbytes, self._no_alias)

    # -- arguments -----------------------------------------------------------------------
    def _as_device_array(self, x: Any, position: int, what: str, spec: tuple) -> Any:
        cupy, err, name = self._cupy, self._error, self.name
        if not isinstance(x, cupy.ndarray):
            x = self._convert(x, position, what)
        shape, dtype = spec
        if x.shape != shape:
            raise err(f"{what} {position} of {name}: expected shape {shape}, got {x.shape}")
        if x.dtype != dtype:
            declared = self._declared[position if what == "input" else self.n_in + position]
            note = f" (the bytes of {declared}: CuPy has no float8 type)" if declared in BYTES_ON_DEVICE else ""
            raise err(f"{what} {position} of {name}: expected dtype {dtype.name}{note}, got {x.dtype.name}")
        if not x.flags.c_contiguous:
            raise err(f"{what} {position} of {name}: expected a C-contiguous array, got strides {x.strides} for "
                      f"shape {x.shape}; pass cupy.ascontiguousarray(x)")
        if x.data.ptr % 16:
            raise err(f"{what} {position} of {name}: expected a 16-byte aligned array (kernels use 16-byte "
                      f"accesses), got address {x.data.ptr:#x}; pass a copy")
        device = self._get_device()
        if x.device.id != device:
            raise err(f"{what} {position} of {name}: expected an array on the current device {device}, "
                      f"got one on device {x.device.id}")
        return x

    def _convert(self, x: Any, position: int, what: str) -> Any:
        """A CuPy array sharing the memory of a device array of another library; a clear error
        for anything that is not one (host arrays, lists, scalars)."""
        cupy, err, name = self._cupy, self._error, self.name
        expected = f"{what} {position} of {name}: expected a device array ({_DEVICE_ARRAY_KINDS})"
        if isinstance(x, np.ndarray):
            raise err(f"{expected}, got a host numpy.ndarray; move it with cupy.asarray(x)")
        # Class-level checks: torch computes __cuda_array_interface__ on access and raises
        # for dtypes it cannot describe (bfloat16), which hasattr(x, ...) would propagate.
        has_dlpack = hasattr(type(x), "__dlpack__")
        if not has_dlpack and not hasattr(type(x), "__cuda_array_interface__"):
            raise err(f"{expected}, got {_describe(x)}")
        where = _dlpack_device(x) if has_dlpack else None
        if where in ("cpu", "cuda pinned host"):
            raise err(f"{expected}, got a {_describe(x)} in host memory ({where}); move it to the GPU first")
        try:
            return cupy.from_dlpack(x) if has_dlpack else cupy.asarray(x)
        except Exception as e:  # noqa: BLE001 - report any conversion failure the same way
            view = _torch_view(x, cupy)
            if view is None:
                raise err(f"{expected}, got {_describe(x)} ({e})") from None
            return view

    def _checked_arrays(self, args: tuple, out: Any, device: int) -> list[Any]:
        """Inputs and outputs as checked CuPy arrays (outputs allocated when `out` is None)."""
        arrays = [self._as_device_array(x, i, "input", spec) for i, (x, spec) in enumerate(zip(args, self.in_specs))]
        if out is None:
            return arrays + [self._cupy.empty(shape, dtype) for shape, dtype in self.out_specs]
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(self.out_specs):
            raise self._error(f"out of {self.name}: expected {len(self.out_specs)} output arrays, got {len(outs)}")
        return arrays + [self._as_device_array(o, i, "output", spec)
                         for i, (o, spec) in enumerate(zip(outs, self.out_specs))]

    def _check_aliasing(self, pointers: list[int]) -> None:
        nbytes = self._nbytes
        for a, b in self._no_alias:
            pa, pb = pointers[a], pointers[b]
            if pa < pb + nbytes[b] and pb < pa + nbytes[a] and nbytes[a] and nbytes[b]:
                raise self._error(self._aliasing_message(a, b))

    def _aliasing_message(self, a: int, b: int) -> str:
        def label(index: int) -> str:
            return f"input {index}" if index < self.n_in else f"output {index - self.n_in}"

        head = f"{label(a)} of {self.name} overlaps {label(b)} in memory"
        if b >= self.n_in:
            return f"{head}: two outputs must not share memory; pass separate output arrays"
        return (f"{head}: the kernel may read data it already overwrote. Pass a separate output array, or "
                f"build the kernel with may_alias={{{a - self.n_in}: {b}}} if it is written to work in place")

    def check_count(self, args: tuple) -> None:
        """The number of inputs, named with their shapes and dtypes when it is wrong."""
        if len(args) != self.n_in:
            raise self._error(f"{self.name} takes {self.n_in} input array(s) "
                              f"{[f'{s}:{d.name}' for s, d in self.in_specs]}, got {len(args)}")

    def stream_pointer(self, stream: Any) -> int:
        """`stream` (None: CuPy's current one; a CuPy or torch stream; a raw handle) as an int."""
        if stream is None:
            return self._current_stream().ptr
        if type(stream) is int:
            return stream
        if hasattr(stream, "ptr"):
            return stream.ptr
        return int(getattr(stream, "cuda_stream", stream))  # torch.cuda.Stream, or an int handle

    def device_for(self, args: tuple, out: Any) -> int:
        """The current device; without a GPU, the arguments' shapes and dtypes are checked first
        (no CUDA needed for that), so a wrong argument is named before the missing GPU is."""
        try:
            return self._get_device()
        except NoCudaDeviceError:
            outs = () if out is None else (tuple(out) if isinstance(out, (tuple, list)) else (out,))
            for what, arrays, specs in (("input", args, self.in_specs), ("output", outs, self.out_specs)):
                for i, (x, (shape, dtype)) in enumerate(zip(arrays, specs)):
                    got = getattr(x, "shape", None)
                    if got is not None and tuple(got) != shape:
                        raise self._error(f"{what} {i} of {self.name}: expected shape {shape}, got {tuple(got)}") from None
                    try:
                        got_dtype = np.dtype(getattr(x, "dtype"))
                    except (AttributeError, TypeError):
                        continue
                    if got_dtype != dtype:
                        raise self._error(f"{what} {i} of {self.name}: expected dtype {dtype.name}, "
                                          f"got {got_dtype.name}") from None
            raise

    def checked(self, args: tuple, out: Any, device: int) -> tuple[list, list[int]]:
        """(arrays, data pointers) of a call: inputs then outputs, every check passed, outputs
        allocated when `out` is None."""
        if out is None:
            pointers = self._exact_inputs(args, device)
            if pointers is None:
                arrays = self._checked_arrays(args, None, device)
                return arrays, [a.data.ptr for a in arrays]
            outs = [self._cupy.empty(shape, dtype) for shape, dtype in self.out_specs]
            return [*args, *outs], pointers + [o.data.ptr for o in outs]
        arrays = args + tuple(out) if isinstance(out, (tuple, list)) else (*args, out)
        pointers = self._exact_all(arrays, device)
        if pointers is None:  # something differs: find it and say what
            arrays = self._checked_arrays(args, out, device)
            pointers = [a.data.ptr for a in arrays]
            if self._no_alias:
                self._check_aliasing(pointers)
        return arrays, pointers

class PortableLauncher(ArgumentChecker):
    """Checks arguments and launches one kernel on CuPy's current stream.

    spec keys: name, grid, block, cluster, dynamic_smem, static_smem, inputs and outputs
    ([(shape, dtype name)]), params ([(kind, index)] with kind "array"|"tma"|"profile"),
    cubin (bytes), ptx (str, optional fallback), profile_words (words per block, or None),
    may_alias (optional: [(output index, input index)] pairs whose memory may overlap, or
    True for all; any other overlap of an output with an input or another output is refused).
    tma_encoder: object with encode(index, arrays) -> np.uint64[16], for "tma" params, and
    optionally encode_into(index, pointers, address, view), which writes them into a slot.
    """

    def __init__(self, spec: dict, *, error: type[Exception] = PortableLaunchError,
                 resource_error: type[Exception] = ValueError, tma_encoder: Any = None):
        super().__init__(spec, error)
        self._profiled = spec.get("profile_words") is not None
        self._resource_error = resource_error
        self.param_kinds = [tuple(p) for p in spec["params"]]
        # Every parameter an array pointer in order: the call writes pointers and launches.
        self._pointer_only = self.param_kinds == [("array", i) for i in range(len(self._all_specs))]
        self._pointer_slots = slice(0, len(self.param_kinds) * _SLOT_WORDS, _SLOT_WORDS)  # first word of each slot
        self.num_blocks = int(np.prod(spec["grid"]))
        self._storage = _ParamStorage(len(self.param_kinds))
        self._functions: dict[int, LoadedFunction] = {}
        self._handles: dict[int, int] = {}  # device -> CUfunction, read by the generated call
        self._tma = tma_encoder
        self._profile_buffer = None
        self.last_profile = None

    # -- launching -----------------------------------------------------------------------
    def _function(self, device: int) -> LoadedFunction:
        # CuPy (and torch) run on each device's primary context, so a device id names the
        # context a module was loaded into.
        fn = self._functions.get(device)
        if fn is None:
            self._cupy.cuda.runtime.free(0)  # makes sure the primary context exists and is current
            fn = LoadedFunction(self.spec, device, self._resource_error)
            self._loaded(device, fn)
        return fn

    def _loaded(self, device: int, fn: LoadedFunction) -> None:
        """Launch on `device` through `fn`. The first load installs this signature's generated
        `call` (and `unchecked`) on the instance; until then both take the explaining path."""
        self._functions[device] = fn
        self._handles[device] = fn.handle
        if "call" not in self.__dict__:
            self.call, self.unchecked = self._generated_call(), self._generated_unchecked()

    def _inline_launch(self) -> tuple[int, ...] | None:
        """cuLaunchKernel's grid, block and smem ints when the generated code may launch itself:
        every parameter an array pointer and no cluster (else `_launch` fills the slots)."""
        spec = self.spec
        if not self._pointer_only or tuple(spec["cluster"]) != (1, 1, 1):
            return None
        return (*spec["grid"], *spec["block"], spec["dynamic_smem"])

    def _one_device(self) -> bool:
        """Whether this process sees exactly one GPU (then it is device 0 and always current)."""
        runtime = self._cupy.cuda.runtime
        try:
            return runtime.getDeviceCount() == 1
        except runtime.CUDARuntimeError:  # no driver: CPU tests drive the launcher with stand-ins
            return False

    def _generated_names(self) -> dict[str, Any]:
        launch, launch_error = _driver_launch()
        names = _signature_values(self._ndarray, self._all_specs)
        names.update(get_device=self._raw_get_device, only_device=0, handles=self._handles, slow=self._call_explaining,
                     empty=self._cupy.empty, storage=self._storage, current_stream=self._current_stream,
                     stream_pointer=self.stream_pointer, launch=launch, launch_error=launch_error,
                     recover=self._recover, launch_general=self._launch)
        return names

    def _generated_call(self) -> Any:
        lines = call_source(self._shapes, self.n_in, self._nbytes, self._no_alias, self._inline_launch(),
                            one_device=self._one_device())
        return _compile(lines, self._generated_names(), "call")

    def front_call(self, general: Any, settings: Any, trim: Any) -> Any:
        """A front end's `call(*args, out=None, stream=None, isolate=None, timeout_s=None)`: this
        signature's generated checks and launch in one function (no second call), handing an
        `isolate` request, `settings.enabled` (isolation switched on) and every argument the
        checks do not accept at once to `general(args, out, stream, isolate, timeout_s)`. Needs
        the module loaded (the generated `call` installed)."""
        lines = call_source(self._shapes, self.n_in, self._nbytes, self._no_alias, self._inline_launch(),
                            front=True, one_device=self._one_device())
        names = self._generated_names()
        names.update(slow=general, settings=settings, trim=trim)
        return _compile(lines, names, "call")

    def _generated_unchecked(self) -> Any:
        dims = self._inline_launch()
        if dims is None:
            return self._unchecked_general
        n = len(self._all_specs)
        lines = ["def unchecked(arrays, stream=None):",
                 f"    device = {'only_device' if self._one_device() else 'get_device()'}",
                 "    handle = handles.get(device)",
                 f"    if handle is None or len(arrays) != {n}:",
                 "        return launch_general(arrays, [a.data.ptr for a in arrays], device, stream)"]
        if n:
            lines.append(f"    {', '.join(f'x{i}' for i in range(n))}, = arrays")
        lines += _launch_lines([f"x{i}.data.ptr" for i in range(n)], dims)
        return _compile(lines, self._generated_names(), "unchecked")

    def _recover(self, device: int, error: Exception, stream: int, argv: int) -> None:
        self._functions[device].recover(int(error.status), stream, argv)

    def __call__(self, *args: Any, out: Any = None, stream: Any = None) -> Any:
        return self.call(args, out, stream)

    def call(self, args: tuple, out: Any = None, stream: Any = None) -> Any:
        """`self(*args, out=out, stream=stream)` with the inputs as one tuple (for wrappers).
        Once the module is loaded, the instance's generated `call` stands in for this method."""
        return self._call_explaining(args, out, stream)

    def _call_explaining(self, args: tuple, out: Any, stream: Any) -> Any:
        """The full path: every check with its message, module loading, any kind of parameter."""
        self.check_count(args)
        device = self.device_for(args, out)
        arrays, pointers = self.checked(args, out, device)
        return self._launch(arrays, pointers, device, stream)

    def launch_unchecked(self, *arrays: Any, stream: Any = None) -> None:
        """Launch on CuPy arrays (inputs then outputs) without any argument check.

        For hot loops whose arguments were validated once by a normal call: a wrong shape,
        dtype, device or alignment here is undefined behaviour on the GPU, not an error."""
        self.unchecked(arrays, stream)

    def unchecked(self, arrays: tuple, stream: Any = None) -> None:
        """`launch_unchecked(*arrays, stream=stream)` with the arrays as one tuple. Once the
        module is loaded, the instance's generated `unchecked` stands in for this method."""
        self._unchecked_general(arrays, stream)

    def _unchecked_general(self, arrays: tuple, stream: Any = None) -> None:
        self._launch(arrays, [a.data.ptr for a in arrays], self._get_device(), stream)

    def _launch(self, arrays: Any, pointers: list[int], device: int, stream: Any) -> Any:
        self.launch_pointers(pointers, device, self.stream_pointer(stream))
        n_in = self.n_in
        return arrays[n_in] if len(arrays) == n_in + 1 else tuple(arrays[n_in:])

    def launch_pointers(self, pointers: list[int], device: int, stream: int) -> None:
        """Launch on `device` (current) and `stream` (an int handle) with the arrays' data pointers
        (inputs, then outputs), no checks: the path of callers that checked their own arrays (torch
        tensors, whose pointers they read directly). TMA descriptors are encoded (and cached) from
        the pointers."""
        fn = self._functions.get(device)
        if fn is None:
            fn = self._function(device)
        storage = self._storage
        if self._pointer_only:
            storage.slots[self._pointer_slots] = pointers
            argv = storage.argv_address
        elif self._profiled:
            self._fill_slots(storage, pointers, pointers)  # a fresh profile buffer every launch
            argv = storage.argv_address
        else:
            # TMA descriptors depend on nothing but the pointers: a block filled for these
            # pointers before (a loop of calls, a model's layers) is launched as it is.
            key = tuple(pointers)
            if storage.last_key == key:  # a loop of calls on the same arrays
                argv = storage.last_argv
            else:
                argv = storage.filled_block(key, lambda b: self._fill_slots(b, pointers, pointers)).argv_address
        fn.launch(stream, argv)
        if self._profiled:
            self.last_profile = self._profile_buffer

    def _fill_slots(self, block: _ParamBlock, arrays: Any, pointers: list[int]) -> None:
        """Parameters of kernels with TMA descriptors or a profiler buffer, slot by slot. An
        encoder with `encode_into` writes each descriptor straight into its slot."""
        slots, base = block.slots, block.base
        encode_into = getattr(self._tma, "encode_into", None)
        for slot, (kind, index) in enumerate(self.param_kinds):
            word = slot * _SLOT_WORDS
            if kind == "array":
                slots[word] = pointers[index]
            elif kind != "tma":
                slots[word] = self._new_profile_buffer().data.ptr
            elif encode_into is not None:
                encode_into(index, pointers, base + word * 8, block.slot_views[slot])
            else:
                block.words[word: word + _SLOT_WORDS] = self._tma.encode(index, arrays)

    def _new_profile_buffer(self) -> Any:
        self._profile_buffer = self._cupy.empty((self.num_blocks, self.spec["profile_words"]), np.uint32)
        return self._profile_buffer
