"""tessera: an auto-tuning tensor program generator, from Python.

Tune a workload, look at the best schedule the tuning database holds,
compile an ONNX model with the tuned schedules and run it on numpy arrays::

    import tessera
    w = tessera.Workload("matmul M=512 N=512 K=512")
    result = tessera.tune(w, trials=200, db="mm.db")
    best = tessera.Database("mm.db").best(w)
    print(best.latency, best.gflops, best.script)

    module = tessera.compile("model.onnx", db="model.db")
    y = module(x)

The functions call libtessera.so (the C API of tessera's modules) through
ctypes; every failure is raised as a :class:`tessera.Error` subclass
carrying the C error's message. docs/python.md walks through it.
"""

from __future__ import annotations

from .database import Database, Record, WorkloadSummary
from .errors import (
    Error,
    FileError,
    InternalError,
    InvalidError,
    MissingFileError,
    NotFoundError,
    OutOfMemoryError,
    ParseError,
    RuntimeFault,
    ScheduleError,
    UnsupportedError,
    VerifyError,
)
from .model import BenchmarkResult, DimInfo, Module, TensorInfo, compile, load
from .tuning import Progress, TaskResult, TuneResult, tune
from .workload import Workload

__version__ = "0.1.0"


def library_version() -> str:
    """The version of the loaded libtessera.so (``TS_VERSION``)."""
    from . import _lib

    return (_lib.lib().ts_py_version() or b"").decode()


__all__ = [
    "Workload",
    "tune",
    "TuneResult",
    "TaskResult",
    "Progress",
    "Database",
    "Record",
    "WorkloadSummary",
    "compile",
    "load",
    "Module",
    "TensorInfo",
    "DimInfo",
    "BenchmarkResult",
    "Error",
    "InvalidError",
    "ParseError",
    "OutOfMemoryError",
    "FileError",
    "NotFoundError",
    "MissingFileError",
    "UnsupportedError",
    "RuntimeFault",
    "VerifyError",
    "ScheduleError",
    "InternalError",
    "library_version",
    "__version__",
]
