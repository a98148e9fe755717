"""The C library behind the package: libtessera.so loaded with ctypes.

Everything here is private to the package. The library is the one installed
beside this file (``libtessera.so.0``); ``TESSERA_LIBRARY`` names another
one (a build tree's) for development. The compiled-model runtime
(``libtessera_rt.so``) is looked for in the same folder, or in
``TESSERA_RUNTIME_DIR``.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from typing import Any, Optional

from .errors import Error, error_for_code

_HERE = os.path.dirname(os.path.abspath(__file__))


class TsError(ctypes.Structure):
    """``ts_error`` of tir/tir.h."""

    _fields_ = [
        ("code", ctypes.c_int),
        ("line", ctypes.c_int),
        ("column", ctypes.c_int),
        ("src_file", ctypes.c_char_p),
        ("src_line", ctypes.c_int),
        ("msg", ctypes.c_char * 1024),
    ]


class TsHash128(ctypes.Structure):
    """``ts_hash128`` of tir/tir.h."""

    _fields_ = [("hi", ctypes.c_uint64), ("lo", ctypes.c_uint64)]


class TsWorkload(ctypes.Structure):
    """``ts_workload`` of tir/tir.h."""

    _fields_ = [
        ("func", ctypes.c_void_p),
        ("op", ctypes.c_char * 32),
        ("spec", ctypes.c_char * 512),
        ("name", ctypes.c_char * 128),
        ("flops", ctypes.c_double),
    ]


LINE_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p)

_c_int = ctypes.c_int
_vp = ctypes.c_void_p
_cp = ctypes.c_char_p
_err = ctypes.POINTER(TsError)

# name: (restype, argtypes)
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "ts_py_version": (_cp, []),
    "ts_py_free": (None, [_vp]),
    "ts_strerror": (_cp, [_c_int]),
    "ts_workload_from_spec": (_c_int, [_cp, ctypes.POINTER(ctypes.POINTER(TsWorkload)), _err]),
    "ts_workload_free": (None, [ctypes.POINTER(TsWorkload)]),
    "ts_func_parse": (_c_int, [_cp, ctypes.c_size_t, _cp, ctypes.POINTER(_vp), _err]),
    "ts_func_verify": (_c_int, [_vp, _err]),
    "ts_func_free": (None, [_vp]),
    "ts_func_name": (_cp, [_vp]),
    "ts_func_print": (_vp, [_vp]),
    "ts_func_flops": (ctypes.c_double, [_vp]),
    "ts_func_hash": (TsHash128, [_vp]),
    "ts_hash128_hex": (None, [TsHash128, ctypes.c_char * 33]),
    "ts_py_db_open": (_c_int, [_cp, _c_int, _c_int, ctypes.POINTER(_vp), _err]),
    "ts_db_close": (None, [_vp]),
    "ts_db_backend": (_cp, [_vp]),
    "ts_db_path": (_cp, [_vp]),
    "ts_db_canonical_target": (_vp, [_vp, _cp]),
    "ts_db_errmsg": (_cp, [_vp]),
    "ts_py_db_workloads": (_c_int, [_vp, ctypes.POINTER(_vp), _err]),
    "ts_py_db_records": (_c_int, [_vp, _cp, _cp, _c_int, _c_int, ctypes.POINTER(_vp), _err]),
    "ts_py_tune": (
        _c_int,
        [_vp, _cp, LINE_FN, LINE_FN, ctypes.POINTER(_c_int), ctypes.POINTER(_vp), _err],
    ),
    "ts_py_compile": (_c_int, [_vp, _cp, ctypes.POINTER(_vp), _err]),
}

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


def library_path() -> str:
    """The path of the libtessera.so this package loads."""
    env = os.environ.get("TESSERA_LIBRARY")
    if env:
        return env
    return os.path.join(_HERE, "libtessera.so.0")


def runtime_dir() -> str:
    """The folder holding libtessera_rt.so, which compiled models link."""
    env = os.environ.get("TESSERA_RUNTIME_DIR")
    if env:
        return env
    return os.path.dirname(os.path.abspath(library_path()))


def lib() -> ctypes.CDLL:
    """The loaded library, its functions typed (loaded once per process).

    It is loaded with RTLD_GLOBAL: kernels compiled in this process (the
    tuner's confirmation rounds) find the runtime's ts_rt_* functions
    among the process's global symbols, as they do in the `tessera`
    program. The library exports nothing but ts_* symbols.
    """
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        path = library_path()
        if not os.path.exists(path):
            raise error_for_code(
                -4, f"the tessera library is not installed: no file {path}"
            )
        try:
            handle = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        except OSError as e:
            raise error_for_code(-4, f"cannot load {path}: {e}") from None
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(handle, name)
            fn.restype = res
            fn.argtypes = args
        _lib = handle
        return handle


def new_error() -> TsError:
    """A cleared ts_error to pass to a call."""
    return TsError()


def raise_error(rc: int, err: TsError, context: str = "") -> None:
    """Raises the tessera.Error subclass of code rc with err's message."""
    msg = err.msg.decode("utf-8", "replace")
    if not msg:
        msg = (lib().ts_strerror(rc) or b"error").decode()
    if context:
        msg = f"{context}: {msg}"
    raise error_for_code(rc, msg, line=err.line, column=err.column)


def check(rc: int, err: TsError, context: str = "") -> None:
    """Raises when rc is a failure code."""
    if rc != 0:
        raise_error(rc, err, context)


def take_string(ptr: Optional[int]) -> str:
    """A malloc'd C string returned by the library, copied and freed."""
    if not ptr:
        return ""
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib().ts_py_free(ptr)


def take_json(ptr: Optional[int]) -> Any:
    """Malloc'd JSON text returned by the library, parsed and freed."""
    return json.loads(take_string(ptr))


def enc(s: Optional[str]) -> Optional[bytes]:
    """A str for a const char * argument (None stays NULL)."""
    return None if s is None else s.encode("utf-8")


__all__ = ["Error", "lib", "library_path", "runtime_dir"]
