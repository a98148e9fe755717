"""Workloads: an operator of the library built from its spec, or a function
in the TIR text form."""

from __future__ import annotations

import ctypes
from typing import Optional

from . import _lib


class Workload:
    """A tensor program to tune: an operator of the library, or TIR text.

    ``Workload("matmul M=1024 N=1024 K=1024")`` builds the operator from its
    spec (``tessera show --ops`` lists the operators and their keys; a bad
    spec raises :class:`tessera.InvalidError` naming the key).
    ``Workload.from_tir(text)`` parses a function in the TIR text form
    (:class:`tessera.ParseError` with the line and column when it does not
    parse).

    Attributes:
        spec: the canonical spec (every key, defaults filled in), or None for
            a TIR function.
        name: the short name (``matmul_1024x1024x1024_float32``).
        op: the operator name, or None for a TIR function.
        hash: the structural hash (32 hex digits), the workload's identity in
            the tuning database; the same on every machine.
        flops: floating-point operations of one run.
        tir: the unscheduled function in the TIR text form.
    """

    spec: Optional[str]
    name: str
    op: Optional[str]
    hash: str
    flops: float
    tir: str

    def __init__(self, spec: str) -> None:
        if not isinstance(spec, str):
            raise TypeError(f"a workload spec is a str, not {type(spec).__name__}")
        lib = _lib.lib()
        err = _lib.new_error()
        w = ctypes.POINTER(_lib.TsWorkload)()
        rc = lib.ts_workload_from_spec(_lib.enc(spec), ctypes.byref(w), ctypes.byref(err))
        _lib.check(rc, err, f"workload '{spec}'")
        try:
            c = w.contents
            self.spec = c.spec.decode()
            self.op = c.op.decode()
            self.name = c.name.decode()
            self.flops = float(c.flops)
            self._describe(c.func, flops_known=True)
        finally:
            lib.ts_workload_free(w)

    @classmethod
    def from_tir(cls, text: str, name: str = "<tir>") -> "Workload":
        """A workload from a function in the TIR text form; ``name`` is used
        in parse errors (a file name, say)."""
        lib = _lib.lib()
        err = _lib.new_error()
        f = ctypes.c_void_p()
        data = text.encode("utf-8")
        rc = lib.ts_func_parse(data, len(data), _lib.enc(name), ctypes.byref(f), ctypes.byref(err))
        _lib.check(rc, err)
        try:
            rc = lib.ts_func_verify(f, ctypes.byref(err))
            _lib.check(rc, err, name)
            self = cls.__new__(cls)
            self.spec = None
            self.op = None
            self.name = (lib.ts_func_name(f) or b"").decode()
            self._describe(f.value or 0, flops_known=False)
            return self
        finally:
            lib.ts_func_free(f)

    @classmethod
    def from_file(cls, path: str) -> "Workload":
        """A workload from a TIR text file."""
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except FileNotFoundError:
            raise _lib.error_for_code(-4, f"cannot open '{path}': No such file or directory") from None
        return cls.from_tir(text, name=path)

    def _describe(self, func: int, flops_known: bool) -> None:
        lib = _lib.lib()
        self.tir = _lib.take_string(lib.ts_func_print(func))
        hx = (ctypes.c_char * 33)()
        lib.ts_hash128_hex(lib.ts_func_hash(func), hx)
        self.hash = hx.value.decode()
        if not flops_known:
            self.flops = float(lib.ts_func_flops(func))

    def task(self, weight: float = 1.0) -> dict:
        """The request entry of this workload in a tuning job."""
        if self.spec is not None:
            return {"spec": self.spec, "weight": weight}
        return {"tir": self.tir, "name": self.name, "weight": weight}

    def __repr__(self) -> str:
        what = self.spec if self.spec is not None else self.name
        return f"Workload({what!r}, hash={self.hash}, flops={self.flops:.6g})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workload) and other.hash == self.hash

    def __hash__(self) -> int:
        return hash(self.hash)


__all__ = ["Workload"]
