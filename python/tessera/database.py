"""The tuning database: an SQLite file or a PostgreSQL server
(docs/database.md), opened for queries."""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Union

from . import _lib
from .errors import InvalidError, MissingFileError, NotFoundError
from .workload import Workload

WorkloadKey = Union[Workload, str]


@dataclass(frozen=True)
class WorkloadSummary:
    """One workload on one target, as ``tessera db list`` shows it.

    Attributes:
        hash: the workload's structural hash.
        name: its short name.
        flops: floating-point operations of one run.
        target: the canonical target string, or None for a workload with no
            record yet.
        records: records of the workload on the target, any status.
        ok: records that measured ok.
        best_seconds: the best latency (the confirmed one when there is
            one), or None.
        gflops: ``flops / best_seconds / 1e9``, or None.
    """

    hash: str
    name: str
    flops: float
    target: Optional[str] = field(repr=False)
    records: int
    ok: int
    best_seconds: Optional[float]
    gflops: Optional[float]


@dataclass(frozen=True)
class Record:
    """One measured schedule of a workload on a target.

    Attributes:
        id: the record's id (grows with commit order).
        workload: the workload's structural hash.
        workload_name: its short name.
        flops: the workload's operations per run.
        target: the canonical target string it was measured on.
        status: ``ok``, ``build_error``, ``run_error``, ``timeout``,
            ``wrong_result`` or ``worker_lost``.
        latency: seconds per run: the confirmed figure when the record has
            one, else the search-time median; None when it has no run time.
        search_latency: the search-time median, or None.
        gflops: ``flops / latency / 1e9``, or None.
        confirmed: whether ``latency`` comes from a confirmation (the top
            schedules timed again side by side in interleaved rounds).
        confirmed_spread: (slowest - fastest round) / latency of that
            confirmation, or None.
        run_secs: the search's per-repeat seconds.
        job: the tuning job that measured it, or None.
        trial: its trial index within the job, or None.
        error: the error text of a failed candidate ("" when ok).
        worker: the worker that measured it.
        version: the tessera version that wrote it.
        created: when it was committed (UTC).
        measure: how it was measured (threads, repeats, CPUs, ...), or None.
        trace: the schedule, as the trace's JSON object.
        script: the trace as a readable script (best records only).
        scheduled_tir: the workload scheduled by the trace, as TIR text
            (best records only).
    """

    id: int
    workload: str
    workload_name: str
    flops: float = field(repr=False)
    target: str = field(repr=False)
    status: str
    latency: Optional[float]
    search_latency: Optional[float]
    gflops: Optional[float]
    confirmed: bool
    confirmed_spread: Optional[float] = field(repr=False)
    run_secs: tuple[float, ...] = field(repr=False)
    job: Optional[str]
    trial: Optional[int]
    error: str = field(repr=False)
    worker: str = field(repr=False)
    version: str = field(repr=False)
    created: str = field(repr=False)
    measure: Optional[dict] = field(default=None, repr=False)
    trace: Optional[dict] = field(default=None, repr=False)
    script: Optional[str] = field(default=None, repr=False)
    scheduled_tir: Optional[str] = field(default=None, repr=False)

    @classmethod
    def _from_json(cls, o: dict[str, Any]) -> "Record":
        return cls(
            id=int(o["id"]),
            workload=o["workload"],
            workload_name=o["workload_name"],
            flops=float(o["flops"]),
            target=o["target"],
            status=o["status"],
            latency=o["latency_s"],
            search_latency=o["search_latency_s"],
            gflops=o["gflops"],
            confirmed=o["confirmed_s"] is not None,
            confirmed_spread=o["confirmed_spread"],
            run_secs=tuple(o["run_secs"]),
            job=o["job"],
            trial=None if o["trial"] is None else int(o["trial"]),
            error=o["error"],
            worker=o["worker"],
            version=o["version"],
            created=o["created"],
            measure=o["measure"],
            trace=o["trace"],
            script=o.get("script") or None,
            scheduled_tir=o.get("scheduled_tir") or None,
        )


class Database:
    """A tuning database, opened for queries (and written by
    :func:`tessera.tune`).

    ``path_or_url`` is an SQLite file or a ``postgresql://`` URL. A file that
    does not exist is :class:`tessera.NotFoundError` unless ``create`` is
    true; a file that is not a tessera database, or of a newer schema, is
    :class:`tessera.InvalidError` / :class:`tessera.UnsupportedError` with
    the reason, and is left as it was. Use it as a context manager, or call
    :meth:`close`. One handle is not for concurrent use: calls on it are
    serialized.
    """

    def __init__(self, path_or_url: Union[str, "os.PathLike[str]"], create: bool = False, read_only: bool = False) -> None:
        self._handle: Optional[int] = None
        self._lock = threading.RLock()
        path_or_url = os.fspath(path_or_url)
        is_url = path_or_url.startswith(("postgresql://", "postgres://"))
        if not create and not is_url and not os.path.exists(path_or_url):
            raise MissingFileError(f"{path_or_url}: no such database (No such file or directory)", code=-5)
        lib = _lib.lib()
        err = _lib.new_error()
        h = ctypes.c_void_p()
        rc = lib.ts_py_db_open(
            _lib.enc(str(path_or_url)), int(create), int(read_only), ctypes.byref(h), ctypes.byref(err)
        )
        _lib.check(rc, err)
        self._handle = h.value
        self.url = str(path_or_url)
        self.read_only = read_only

    # -- the handle --

    def _h(self) -> int:
        if self._handle is None:
            raise InvalidError("the database is closed")
        return self._handle

    def close(self) -> None:
        """Closes the connection (a second call does nothing)."""
        with self._lock:
            if self._handle is not None:
                _lib.lib().ts_db_close(self._handle)
                self._handle = None

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def path(self) -> str:
        """The path (or the URL without its password)."""
        with self._lock:
            return (_lib.lib().ts_db_path(self._h()) or b"").decode()

    @property
    def backend(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        with self._lock:
            return (_lib.lib().ts_db_backend(self._h()) or b"").decode()

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else self.backend
        return f"Database({self.url!r}, {state})"

    def canonical_target(self, target: Optional[str] = None) -> str:
        """The canonical form of a target string (None or ``"llvm"``: this
        machine), the form records are filed under."""
        with self._lock:
            ptr = _lib.lib().ts_db_canonical_target(self._h(), _lib.enc(target or "llvm"))
            if not ptr:
                msg = (_lib.lib().ts_db_errmsg(self._h()) or b"").decode()
                raise InvalidError(f"bad target '{target}': {msg}", code=-1)
            return _lib.take_string(ptr)

    # -- queries --

    @staticmethod
    def _key(workload: Optional[WorkloadKey]) -> Optional[str]:
        """The database key of a workload argument: a Workload's hash; a
        string that reads as an operator spec hashed the same way; any
        other string (a hash, a unique hash prefix, a name) as it is."""
        if workload is None or isinstance(workload, Workload):
            return None if workload is None else workload.hash
        if not isinstance(workload, str):
            raise TypeError(f"a workload is a Workload or a str, not {type(workload).__name__}")
        if "=" in workload:
            try:
                return Workload(workload).hash
            except InvalidError:
                pass
        return workload

    def _records(
        self, workload: Optional[WorkloadKey], target: Optional[str], mode: int, limit: int
    ) -> list[Record]:
        lib = _lib.lib()
        err = _lib.new_error()
        out = ctypes.c_void_p()
        with self._lock:
            rc = lib.ts_py_db_records(
                self._h(),
                _lib.enc(self._key(workload)),
                _lib.enc(target),
                mode,
                limit,
                ctypes.byref(out),
                ctypes.byref(err),
            )
        _lib.check(rc, err)
        return [Record._from_json(o) for o in _lib.take_json(out.value)]

    def workloads(self) -> list[WorkloadSummary]:
        """Every workload x target with its record counts and best latency
        (``tessera db list``)."""
        lib = _lib.lib()
        err = _lib.new_error()
        out = ctypes.c_void_p()
        with self._lock:
            rc = lib.ts_py_db_workloads(self._h(), ctypes.byref(out), ctypes.byref(err))
        _lib.check(rc, err)
        rows = []
        for o in _lib.take_json(out.value):
            best = o["best_seconds"]
            gf = o["flops"] / best * 1e-9 if best and best > 0 else None
            rows.append(
                WorkloadSummary(
                    hash=o["hash"],
                    name=o["name"],
                    flops=float(o["flops"]),
                    target=o["target"],
                    records=int(o["records"]),
                    ok=int(o["ok"]),
                    best_seconds=best,
                    gflops=gf,
                )
            )
        return rows

    def best(self, workload: WorkloadKey, target: Optional[str] = None) -> Record:
        """The best ok record of a workload on a target (None: this machine),
        with its trace as a script and the scheduled TIR: what
        :func:`tessera.compile` uses. ``workload`` is a
        :class:`tessera.Workload`, an operator spec, a hash, a unique hash
        prefix or a name. :class:`tessera.NotFoundError` when there is no ok
        record."""
        target = target or "llvm"
        recs = self._records(workload, target, 1, 0)
        if not recs:
            raise NotFoundError(
                f"no ok record of workload '{self._key(workload)}' on target "
                f"'{self.canonical_target(target)}'",
                code=-5,
            )
        return recs[0]

    def top(self, workload: WorkloadKey, k: int = 10, target: Optional[str] = None) -> list[Record]:
        """Up to k fastest ok records of a workload on a target (None: this
        machine), fastest first."""
        if k < 1:
            raise InvalidError(f"k must be >= 1, not {k}")
        return self._records(workload, target or "llvm", 2, k)

    def records(
        self,
        workload: Optional[WorkloadKey] = None,
        target: Optional[str] = None,
        status: Optional[str] = None,
        limit: Optional[int] = None,
        as_frame: bool = False,
    ) -> Any:
        """Records, oldest first: of one workload (None: every workload), on
        one target (None: every target), of one status (None: any), at most
        ``limit`` per workload x target (the newest).

        Returns a list of :class:`Record`, or with ``as_frame=True`` a pandas
        DataFrame with one row per record (pandas must be installed)."""
        recs = self._records(workload, target, 0, int(limit or 0))
        if status is not None:
            recs = [r for r in recs if r.status == status]
        if not as_frame:
            return recs
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Database.records(as_frame=True) needs pandas (pip install pandas)") from None
        rows = [asdict(r) for r in recs]
        columns = [f for f in Record.__dataclass_fields__]
        return pd.DataFrame(rows, columns=columns)


__all__ = ["Database", "Record", "WorkloadSummary"]
