"""Compiled models: an ONNX model compiled into a shared library with the C
interface of include/tessera/model.h, and run on numpy arrays."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from . import _lib
from .database import Database
from .errors import Error, InvalidError, MissingFileError, RuntimeFault, UnsupportedError
from .tuning import ShapeSpec, _shape_strings, _winograd

# The ABI version of include/tessera/model.h this package reads.
MODEL_ABI_VERSION = 1

# ONNX TensorProto codes -> numpy dtypes (bfloat16 arrays are their 16-bit
# patterns, as uint16).
_DTYPES: dict[int, np.dtype] = {
    1: np.dtype(np.float32),
    2: np.dtype(np.uint8),
    3: np.dtype(np.int8),
    6: np.dtype(np.int32),
    7: np.dtype(np.int64),
    9: np.dtype(np.bool_),
    10: np.dtype(np.float16),
    11: np.dtype(np.float64),
    16: np.dtype(np.uint16),
}


class _TensorInfo(ctypes.Structure):
    """``ts_model_tensor_info`` of include/tessera/model.h."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("bytes", ctypes.c_int64),
    ]


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output.

    Attributes:
        name: the ONNX graph's name of the tensor.
        dtype: its numpy dtype (bfloat16 tensors are uint16 bit patterns).
        shape: its dimensions.
        nbytes: the size of its buffer.
    """

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    nbytes: int


class _DimInfo(ctypes.Structure):
    """``ts_model_dim_info`` of include/tessera/model.h."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("min", ctypes.c_int64),
        ("max", ctypes.c_int64),
        ("size", ctypes.c_int64),
        ("n_sizes", ctypes.c_int),
        ("sizes", ctypes.POINTER(ctypes.c_int64)),
    ]


@dataclass(frozen=True)
class DimInfo:
    """A dynamic dimension of a model compiled with ``shape_buckets``.

    Attributes:
        name: the symbol (the ONNX model's name of the dimension).
        min, max: the sizes the model serves.
        size: the size of the next runs (:meth:`Module.set_dim`).
        buckets: the padded sizes compiled; a size runs on the smallest
            that holds it.
    """

    name: str
    min: int
    max: int
    size: int
    buckets: tuple[int, ...]


@dataclass(frozen=True)
class BenchmarkResult:
    """Latencies of a model's runs (seconds), from :meth:`Module.benchmark`.

    Attributes:
        median, mean, min, stdev: over the timed runs.
        runs: how many runs were timed.
        times: each run's seconds.
    """

    median: float
    mean: float
    min: float
    stdev: float
    runs: int
    times: tuple[float, ...]

    def __repr__(self) -> str:
        return (
            f"BenchmarkResult(median={self.median * 1e3:.3f} ms, mean={self.mean * 1e3:.3f} ms, "
            f"min={self.min * 1e3:.3f} ms, runs={self.runs})"
        )


_FUNCS = {
    "ts_model_abi_version": (ctypes.c_int, []),
    "ts_model_create": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]),
    "ts_model_last_error": (ctypes.c_char_p, []),
    "ts_model_num_inputs": (ctypes.c_int, [ctypes.c_void_p]),
    "ts_model_num_outputs": (ctypes.c_int, [ctypes.c_void_p]),
    "ts_model_input_info": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_TensorInfo)]),
    "ts_model_output_info": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_TensorInfo)]),
    "ts_model_run": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    "ts_model_set_num_threads": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]),
    "ts_model_num_kernels": (ctypes.c_int, [ctypes.c_void_p]),
    "ts_model_kernel_name": (ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_int]),
    "ts_model_profile": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)],
    ),
    "ts_model_info": (ctypes.c_char_p, []),
    "ts_model_destroy": (None, [ctypes.c_void_p]),
}

# Libraries of older versions may lack these (no dynamic dimension then).
_OPTIONAL_FUNCS = {
    "ts_model_num_dims": (ctypes.c_int, [ctypes.c_void_p]),
    "ts_model_dim": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_DimInfo)]),
    "ts_model_set_dim": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64]),
}


class Module:
    """A compiled model, loaded and ready to run.

    Call it with numpy arrays: positionally in the order of :attr:`inputs`
    (``module(x)``) or by input name (``module(input_ids=ids)``). Arrays are
    converted to the input's dtype and must have its shape. It returns the
    output array, or a tuple of arrays for a model of several outputs
    (:meth:`run` gives a dict by name). Runs on one Module are serialized;
    it holds the model's memory arena and thread pool until :meth:`close`.
    """

    def __init__(
        self,
        path: str,
        threads: Optional[int] = None,
        report: Optional[dict] = None,
        _tmpdir: Optional[tempfile.TemporaryDirectory] = None,
    ) -> None:
        self._model: Optional[int] = None
        self._dl: Optional[ctypes.CDLL] = None
        self._tmpdir = _tmpdir
        self._lock = threading.RLock()  # reentrant: a run sets its size first
        self.path = os.path.abspath(path)
        #: what compile reported (tasks, schedule sources, memory), or None
        self.report = report
        if not os.path.exists(self.path):
            raise MissingFileError(f"cannot load '{path}': No such file or directory", code=-5)
        _lib.lib()  # the runtime's symbols first (the model links libtessera_rt)
        try:
            dl = ctypes.CDLL(self.path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as e:
            raise InvalidError(f"cannot load the compiled model '{path}': {e}", code=-1) from None
        for name, (res, args) in _FUNCS.items():
            try:
                fn = getattr(dl, name)
            except AttributeError:
                raise InvalidError(f"{path} is not a compiled tessera model (no symbol '{name}')", code=-1) from None
            fn.restype = res
            fn.argtypes = args
        self._has_dims = True
        for name, (res, args) in _OPTIONAL_FUNCS.items():
            fn = getattr(dl, name, None)
            if fn is None:
                self._has_dims = False
                continue
            fn.restype = res
            fn.argtypes = args
        self._dl = dl
        abi = dl.ts_model_abi_version()
        if abi != MODEL_ABI_VERSION:
            raise UnsupportedError(
                f"{path}: compiled-model interface version {abi}; this package reads "
                f"version {MODEL_ABI_VERSION} (compile the model again)",
                code=-6,
            )
        m = ctypes.c_void_p()
        if dl.ts_model_create(int(threads or 0), ctypes.byref(m)) != 0:
            raise RuntimeFault(f"{path}: cannot create the model: {self._last_error()}", code=-7)
        self._model = m.value
        self.inputs: list[TensorInfo] = []
        self.outputs: list[TensorInfo] = []
        self._read_shapes()

    def _read_shapes(self) -> None:
        """:attr:`inputs` and :attr:`outputs` at the size set now."""
        dl, m = self._dl, self._model
        assert dl is not None
        self.inputs = [self._info(dl.ts_model_input_info, i) for i in range(dl.ts_model_num_inputs(m))]
        self.outputs = [self._info(dl.ts_model_output_info, i) for i in range(dl.ts_model_num_outputs(m))]

    # -- the library --

    def _last_error(self) -> str:
        assert self._dl is not None
        return (self._dl.ts_model_last_error() or b"").decode("utf-8", "replace")

    def _info(self, fn: Any, i: int) -> TensorInfo:
        t = _TensorInfo()
        if fn(self._model, i, ctypes.byref(t)) != 0:
            raise RuntimeFault(f"{self.path}: tensor {i}: {self._last_error()}", code=-7)
        if t.dtype not in _DTYPES:
            raise UnsupportedError(f"{self.path}: tensor '{t.name.decode()}' has ONNX dtype {t.dtype}", code=-6)
        return TensorInfo(
            name=t.name.decode(),
            dtype=_DTYPES[t.dtype],
            shape=tuple(int(t.shape[d]) for d in range(t.ndim)),
            nbytes=int(t.bytes),
        )

    def _m(self) -> int:
        if self._model is None:
            raise InvalidError("the module is closed")
        return self._model

    @property
    def dims(self) -> list[DimInfo]:
        """The model's dynamic dimensions (empty unless it was compiled with
        ``shape_buckets``)."""
        assert self._dl is not None
        if not self._has_dims:
            return []
        m = self._m()
        out = []
        for i in range(max(0, self._dl.ts_model_num_dims(m))):
            d = _DimInfo()
            if self._dl.ts_model_dim(m, i, ctypes.byref(d)) != 0:
                raise RuntimeFault(f"{self.path}: dimension {i}: {self._last_error()}", code=-7)
            out.append(
                DimInfo(
                    name=d.name.decode(),
                    min=int(d.min),
                    max=int(d.max),
                    size=int(d.size),
                    buckets=tuple(int(d.sizes[k]) for k in range(d.n_sizes)),
                )
            )
        return out

    def set_dim(self, name: str, size: int) -> None:
        """Sets dynamic dimension ``name`` to ``size`` for the next runs;
        :attr:`inputs` and :attr:`outputs` then have that size. Calling the
        module with arrays of another size sets it too.
        :class:`tessera.InvalidError` for an unknown name or a size out of
        the range the model serves."""
        with self._lock:
            self._set_dim(name, size)

    def _set_dim(self, name: str, size: int) -> None:
        assert self._dl is not None
        names = [d.name for d in self.dims]
        if name not in names:
            have = ", ".join(names) if names else "none (it was compiled without shape_buckets)"
            raise InvalidError(f"the model has no dynamic dimension '{name}' (its dynamic dimensions: {have})")
        if self._dl.ts_model_set_dim(self._m(), name.encode(), int(size)) != 0:
            raise InvalidError(f"{name}={size}: {self._last_error()}")
        self._read_shapes()

    @property
    def info(self) -> dict:
        """The library's description: model, target, arena and constant
        bytes, calls, and each task's schedule source and latency."""
        assert self._dl is not None
        return json.loads((self._dl.ts_model_info() or b"{}").decode())

    @property
    def kernels(self) -> list[str]:
        """The kernel call sites of one run, in run order (``TASK (NODE)``)."""
        assert self._dl is not None
        m = self._m()
        return [(self._dl.ts_model_kernel_name(m, k) or b"").decode() for k in range(self._dl.ts_model_num_kernels(m))]

    def set_threads(self, threads: int) -> None:
        """Replaces the thread pool by one of ``threads`` threads (0: the
        online cores)."""
        assert self._dl is not None
        with self._lock:
            if self._dl.ts_model_set_num_threads(self._m(), int(threads)) != 0:
                raise RuntimeFault(f"cannot set {threads} threads: {self._last_error()}", code=-7)

    # -- running --

    def _arrays(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[np.ndarray]:
        names = [t.name for t in self.inputs]
        if len(args) > len(names):
            raise InvalidError(f"the model takes {len(names)} inputs ({', '.join(names)}); {len(args)} given")
        given: dict[str, Any] = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise InvalidError(f"the model has no input '{k}' (its inputs: {', '.join(names)})")
            if k in given:
                raise InvalidError(f"input '{k}' given twice")
            given[k] = v
        missing = [n for n in names if n not in given]
        if missing:
            raise InvalidError(f"missing input{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
        self._size_from(given)
        arrays = []
        for t in self.inputs:
            a = np.ascontiguousarray(np.asarray(given[t.name]), dtype=t.dtype)
            if a.shape != t.shape:
                raise InvalidError(
                    f"input '{t.name}' has shape {tuple(a.shape)}; the model wants {t.dtype}{list(t.shape)}"
                )
            arrays.append(a)
        return arrays

    def _size_from(self, given: Mapping[str, Any]) -> None:
        """A model with a dynamic dimension takes its size from the first
        input whose shape differs from the one set now, on the first axis
        that differs (the check after says what else is wrong)."""
        dims = self.dims
        if not dims:
            return
        for t in self.inputs:
            shape = np.shape(given[t.name])
            if len(shape) != len(t.shape):
                continue
            for have, want in zip(shape, t.shape):
                if have != want:
                    with self._lock:
                        self._set_dim(dims[0].name, int(have))
                    return

    def _call(self, arrays: list[np.ndarray], seconds: Optional[ctypes.Array] = None) -> list[np.ndarray]:
        assert self._dl is not None
        outs = [np.empty(t.shape, dtype=t.dtype) for t in self.outputs]
        ins = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        ops = (ctypes.c_void_p * max(1, len(outs)))(*[o.ctypes.data for o in outs])
        with self._lock:
            m = self._m()
            if seconds is None:
                rc = self._dl.ts_model_run(m, ins, ops)
            else:
                rc = self._dl.ts_model_profile(m, ins, ops, seconds)
            if rc != 0:
                raise RuntimeFault(f"the model failed: {self._last_error()}", code=-7)
        return outs

    def run(self, *args: Any, **kwargs: Any) -> dict[str, np.ndarray]:
        """Runs the model; returns every output by name."""
        with self._lock:  # the size the arrays set holds for their run
            outs = self._call(self._arrays(args, kwargs))
            return {t.name: o for t, o in zip(self.outputs, outs)}

    def __call__(self, *args: Any, **kwargs: Any) -> Union[np.ndarray, tuple[np.ndarray, ...]]:
        """Runs the model on numpy arrays; the output, or a tuple of them."""
        with self._lock:
            outs = self._call(self._arrays(args, kwargs))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def random_inputs(self, seed: int = 1) -> dict[str, np.ndarray]:
        """Seeded inputs of the right dtypes and shapes: floats uniform in
        [-1, 1), integers and booleans 0 or 1."""
        rng = np.random.default_rng(seed)
        out = {}
        for t in self.inputs:
            if t.dtype.kind == "f":
                out[t.name] = rng.uniform(-1, 1, size=t.shape).astype(t.dtype)
            else:
                out[t.name] = rng.integers(0, 2, size=t.shape).astype(t.dtype)
        return out

    def benchmark(
        self,
        inputs: Optional[Mapping[str, Any]] = None,
        repeat: int = 20,
        min_seconds: float = 0.2,
        warmup: int = 2,
    ) -> BenchmarkResult:
        """Times the model: ``warmup`` untimed runs, then at least
        ``repeat`` timed runs and at least ``min_seconds`` of them.
        ``inputs`` by name (None: :meth:`random_inputs`)."""
        arrays = self._arrays((), dict(inputs) if inputs is not None else self.random_inputs())
        for _ in range(max(0, warmup)):
            self._call(arrays)
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < max(1, repeat) or time.perf_counter() - start < min_seconds:
            t0 = time.perf_counter()
            self._call(arrays)
            times.append(time.perf_counter() - t0)
        return BenchmarkResult(
            median=statistics.median(times),
            mean=statistics.fmean(times),
            min=min(times),
            stdev=statistics.stdev(times) if len(times) > 1 else 0.0,
            runs=len(times),
            times=tuple(times),
        )

    def profile(self, inputs: Optional[Mapping[str, Any]] = None) -> list[tuple[str, float]]:
        """One run with each kernel call timed: ``(kernel, seconds)`` in run
        order."""
        assert self._dl is not None
        arrays = self._arrays((), dict(inputs) if inputs is not None else self.random_inputs())
        names = self.kernels
        secs = (ctypes.c_double * max(1, len(names)))()
        self._call(arrays, secs)
        return [(n, float(secs[k])) for k, n in enumerate(names)]

    # -- the file --

    def save(self, path: Union[str, os.PathLike]) -> str:
        """Copies the compiled library to ``path`` (load it again with
        :func:`tessera.load`, or from C through ``<tessera/model.h>``); it
        finds libtessera_rt.so through its run path, the folder of this
        package's libraries. Returns the path written."""
        dest = os.fspath(path)
        tmp = dest + ".tmp"
        shutil.copyfile(self.path, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, dest)
        return dest

    def close(self) -> None:
        """Frees the model's arena and thread pool (a second call does
        nothing). The library stays loaded in the process."""
        with self._lock:
            if self._model is not None and self._dl is not None:
                self._dl.ts_model_destroy(self._model)
            self._model = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> "Module":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        def sig(ts: list[TensorInfo]) -> str:
            return ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in ts)

        return f"Module({os.path.basename(self.path)!r}, inputs=[{sig(self.inputs)}], outputs=[{sig(self.outputs)}])"


def load(path: Union[str, os.PathLike], threads: Optional[int] = None) -> Module:
    """Loads a model compiled by :func:`tessera.compile` (or ``tessera
    compile``) with a pool of ``threads`` threads (None: the online cores).
    :class:`tessera.NotFoundError` when the file does not exist,
    :class:`tessera.InvalidError` when it is not a compiled model."""
    return Module(os.fspath(path), threads=threads)


def compile(
    model: Union[str, os.PathLike],
    db: Union[Database, str, os.PathLike, None] = None,
    target: Optional[str] = None,
    *,
    input_shapes: ShapeSpec = None,
    layout: Optional[str] = None,
    input_layout: Optional[str] = None,
    output_layout: Optional[str] = None,
    winograd: Union[bool, int, str] = True,
    threads: Optional[int] = None,
    build_threads: Optional[int] = None,
    output: Union[str, os.PathLike, None] = None,
    shape_buckets: Optional[Mapping[str, Sequence[int]]] = None,
    dim_max: Optional[int] = None,
    dims: Optional[Mapping[str, int]] = None,
) -> Module:
    """Compiles an ONNX model with the database's tuned schedules, as
    ``tessera compile`` does, and loads it.

    Args:
        model: the ONNX file.
        db: the tuning database (a path, URL or :class:`Database`; None:
            every task gets the default schedule). Each task takes the best
            record for exactly this target, or the default schedule when it
            has none (``Module.report["warning"]`` lists those).
        target: the target string (None: ``llvm``, this machine).
        input_shapes: symbolic input dimensions fixed, as
            ``{"input_ids": (1, 16)}`` or ``["input_ids=1x16"]``.
        layout: ``"nhwc"`` (default) or ``"nchw"`` convolutions,
            ``"blocked"`` (channel-blocked where a conv can be) or
            ``"auto"`` (NHWC or blocked per conv by the database's
            latencies; tune with the same layout).
        input_layout, output_layout: ``"nchw"`` (default: as the model
            declares its 4-D tensors) or ``"nhwc"``.
        winograd: 3x3 convolutions by Winograd's F(4x4, 3x3) or F(2x2,
            3x3), the tile per conv by its image (True or ``"auto"``), one
            tile for all (2 or 4), or none (False).
        threads: the loaded model's thread pool (None: the online cores).
        build_threads: kernels built at once (None: the online cores).
        output: where to write the library (None: a temporary file, removed
            when the module is closed; :meth:`Module.save` copies it).
        shape_buckets: one library for every size of the model's dynamic
            dimension, as ``tessera compile --shape-buckets``:
            ``{"seq": (8, 16)}`` compiles a program padded to each size;
            a size runs on the smallest that holds it, and the largest is
            the top of the range (:meth:`Module.set_dim`, or arrays of the
            size). The database's records for each size are used.
        dim_max: the top of the range when it is above the largest bucket
            (``--dim-max``): one more program, of that size.
        dims: sizes of named dynamic dimensions in every input that has
            them, as ``--dim``: ``{"batch": 1}`` (a model with a batch and
            a sequence dimension, compiled for every sequence length).

    Raises:
        tessera.Error: a model that cannot be read or compiled (the subclass
            and message say why: a missing file is
            :class:`tessera.MissingFileError`).
    """
    path = os.fspath(model)
    if not os.path.exists(path):
        raise MissingFileError(f"cannot open the model '{path}': No such file or directory", code=-4)
    buckets = _buckets(shape_buckets, dim_max)
    tmpdir = None
    if output is None:
        tmpdir = tempfile.TemporaryDirectory(prefix="tessera-")
        out = os.path.join(tmpdir.name, os.path.splitext(os.path.basename(path))[0] + ".so")
    else:
        out = os.path.abspath(os.fspath(output))
    req: dict[str, Any] = {
        "model": path,
        "output": out,
        "runtime_dir": _lib.runtime_dir(),
        "input_shapes": _shape_strings(input_shapes),
        **_winograd(winograd),
    }
    if buckets is not None:
        req["shape_buckets"] = buckets
    if dims:
        req["dims"] = [f"{k}={int(v)}" for k, v in dims.items()]
    for key, val in (
        ("target", target),
        ("layout", layout),
        ("input_layout", input_layout),
        ("output_layout", output_layout),
        ("threads", build_threads),
    ):
        if val is not None:
            req[key] = val
    own = db is not None and not isinstance(db, Database)
    database: Optional[Database]
    if db is None or isinstance(db, Database):
        database = db
    else:
        database = Database(os.fspath(db), read_only=True)
    lib = _lib.lib()
    err = _lib.new_error()
    res = ctypes.c_void_p()
    try:
        if database is not None:
            with database._lock:
                rc = lib.ts_py_compile(database._h(), json.dumps(req).encode(), ctypes.byref(res), ctypes.byref(err))
        else:
            rc = lib.ts_py_compile(None, json.dumps(req).encode(), ctypes.byref(res), ctypes.byref(err))
        if rc != 0:
            if tmpdir is not None:
                tmpdir.cleanup()
            _lib.raise_error(rc, err, f"cannot compile '{path}'")
        report = _lib.take_json(res.value)
    finally:
        if own and database is not None:
            database.close()
    return Module(out, threads=threads, report=report, _tmpdir=tmpdir)



def _buckets(shape_buckets: Optional[Mapping[str, Sequence[int]]], dim_max: Optional[int]) -> Optional[dict[str, Any]]:
    """The request's "shape_buckets" from compile's arguments."""
    if shape_buckets is None:
        if dim_max is not None:
            raise InvalidError("dim_max goes with shape_buckets")
        return None
    if len(shape_buckets) != 1:
        raise InvalidError(f"shape_buckets: one dynamic dimension per library; {len(shape_buckets)} given")
    ((symbol, sizes),) = shape_buckets.items()
    try:
        sizes = [int(v) for v in sizes]
    except (TypeError, ValueError):
        raise InvalidError(f"shape_buckets '{symbol}': sizes are integers, as (8, 16, 32)") from None
    if not sizes or any(v < 1 for v in sizes) or any(a >= b for a, b in zip(sizes, sizes[1:])):
        raise InvalidError(f"shape_buckets '{symbol}': sizes are positive and ascending; {sizes} given")
    if dim_max is not None:
        if int(dim_max) < sizes[-1]:
            raise InvalidError(f"dim_max {dim_max} is below the largest bucket {sizes[-1]}")
        if int(dim_max) > sizes[-1]:
            sizes.append(int(dim_max))
    return {"symbol": symbol, "sizes": sizes}


__all__ = ["compile", "load", "Module", "TensorInfo", "DimInfo", "BenchmarkResult", "Error"]
