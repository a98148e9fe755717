"""Tuning jobs: the schedules of workloads, or of every task of a model,
searched and measured on this machine and committed to a tuning
database."""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from . import _lib
from .database import Database
from .errors import Error, InvalidError, MissingFileError
from .workload import Workload

ShapeSpec = Union[Mapping[str, Sequence[int]], Sequence[str], None]


@dataclass(frozen=True)
class Progress:
    """One measured candidate, as a tuning job reports it.

    Attributes:
        job: the job's name.
        trial: the candidate's trial index within the job (0-based).
        trials: the job's total budget.
        task: the index of the task (workload) it belongs to.
        workload: the task's name.
        status: ``ok``, ``build_error``, ``run_error``, ``timeout``,
            ``wrong_result`` or ``worker_lost``.
        seconds: its measured latency (None unless ok).
        gflops: its GFLOP/s (None unless ok).
        best_seconds: the task's best latency so far (None before the first
            ok measurement).
        elapsed: seconds since the job (this run of it) started.
        error: the error text of a failed candidate.
    """

    job: str
    trial: int
    trials: int
    task: int
    workload: str
    status: str
    seconds: Optional[float]
    gflops: Optional[float]
    best_seconds: Optional[float]
    elapsed: float
    error: str


@dataclass(frozen=True)
class TaskResult:
    """The outcome of one task of a job.

    Attributes:
        name: the task's name (the workload's short name, or for a model
            the first graph node that calls it).
        hash: the workload's structural hash.
        spec: the operator spec, or None (a TIR function, a model's task).
        weight: how often it runs per model run.
        flops: its operations per run.
        best_seconds: its best latency (None when nothing measured ok).
        gflops: ``flops / best_seconds / 1e9``, or None.
        confirmed: whether ``best_seconds`` comes from the confirmation at
            the end of the job.
        trials: trials measured for it by the job (all runs).
        trials_now: trials measured for it by this call.
        trial_of_best: the job trial that found the best, or None.
        by_status: trials per status.
        trace: the best schedule's trace (JSON object), or None.
    """

    name: str
    hash: str
    spec: Optional[str]
    weight: float
    flops: float
    best_seconds: Optional[float]
    gflops: Optional[float]
    confirmed: bool
    trials: int
    trials_now: int
    trial_of_best: Optional[int]
    by_status: dict[str, int]
    trace: Optional[dict] = field(default=None, repr=False)


@dataclass(frozen=True)
class TuneResult:
    """The outcome of :func:`tessera.tune`.

    Attributes:
        job: the job's name (give it as ``job=`` to resume or extend it).
        state: ``finished``, or ``interrupted`` when stopped early (Ctrl-C,
            or an exception raised by ``on_progress``); every batch measured
            before is committed, and the job resumes with the same ``job``.
        resumed: whether an existing job was continued.
        target: the canonical target string the records are filed under.
        trials_done: the job's trials in all, every run.
        trials_now: trials measured by this call.
        seconds: wall time of this call's search.
        tasks: one :class:`TaskResult` per task.
    """

    job: str
    state: str
    resumed: bool
    target: str = field(repr=False)
    trials_done: int
    trials_now: int
    seconds: float
    tasks: list[TaskResult]

    @property
    def best(self) -> TaskResult:
        """The only task's result (a job of one workload)."""
        if len(self.tasks) != 1:
            raise InvalidError(f"the job has {len(self.tasks)} tasks: use .tasks")
        return self.tasks[0]


def _winograd(winograd: Union[bool, int, str]) -> dict[str, Any]:
    """The request fields of ``winograd=``: True or "auto" (the tile per
    conv), 2 or 4 (that tile), False (direct convolutions)."""
    if winograd is True or winograd == "auto":
        return {"winograd": True, "winograd_tile": 0}
    if winograd is False:
        return {"winograd": False}
    if isinstance(winograd, int) and winograd in (2, 4):
        return {"winograd": True, "winograd_tile": winograd}
    raise InvalidError(f"winograd={winograd!r}: want True, False, 'auto', 2 or 4", code=-1)


def _shape_strings(input_shapes: ShapeSpec) -> list[str]:
    """``{"x": (1, 3, 32, 32)}`` or ``["x=1x3x32x32"]`` as the importer's
    NAME=DIMS strings."""
    if input_shapes is None:
        return []
    if isinstance(input_shapes, Mapping):
        return [f"{k}=" + "x".join(str(int(d)) for d in v) for k, v in input_shapes.items()]
    if isinstance(input_shapes, str):
        return [input_shapes]
    return [str(s) for s in input_shapes]


def _is_model(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike)) and (
        str(x).endswith(".onnx") or (os.path.sep in str(x) and "=" not in str(x))
    )


def _tasks(what: Any, weights: Optional[Sequence[float]]) -> list[dict]:
    items = list(what) if isinstance(what, (list, tuple)) else [what]
    if weights is not None and len(weights) != len(items):
        raise InvalidError(f"{len(weights)} weights for {len(items)} workloads")
    out = []
    for i, w in enumerate(items):
        if isinstance(w, str):
            w = Workload(w)
        if not isinstance(w, Workload):
            raise TypeError(f"a workload is a Workload or a spec str, not {type(w).__name__}")
        out.append(w.task(1.0 if weights is None else float(weights[i])))
    return out


def _opt(x: Optional[float]) -> Optional[float]:
    return None if x is None else float(x)


def tune(
    workload_or_model: Union[Workload, str, os.PathLike, Sequence[Union[Workload, str]]],
    trials: int = 64,
    db: Union[Database, str, os.PathLike] = "tessera.db",
    job: Optional[str] = None,
    target: Optional[str] = None,
    on_progress: Optional[Callable[[Progress], None]] = None,
    *,
    weights: Optional[Sequence[float]] = None,
    input_shapes: ShapeSpec = None,
    layout: Optional[str] = None,
    winograd: Union[bool, int, str] = True,
    trials_per_task: int = 0,
    seed: int = 1,
    batch: Optional[int] = None,
    population: Optional[int] = None,
    timeout_ms: Optional[int] = None,
    build_timeout_ms: Optional[int] = None,
    cost_model: str = "xgb",
    strategy: str = "evolutionary",
    task_scheduler: str = "gradient",
    tensorize: bool = True,
    confirm: int = 6,
    verbose: bool = False,
) -> TuneResult:
    """Runs (or resumes) a tuning job, as ``tessera tune`` does.

    Args:
        workload_or_model: a :class:`Workload` or an operator spec, a list of
            them, or the path of an ONNX model (every task of the model,
            each weighted by its calls per run).
        trials: the job's total measurement budget. Running the same ``job``
            again continues where it stopped and measures only what remains.
        db: the tuning database (a path, a ``postgresql://`` URL or an open
            :class:`Database`); a file is created when absent.
        job: the job's name (None: a new generated name).
        target: the target string (None: ``llvm``, this machine).
        on_progress: called with a :class:`Progress` after each measured
            candidate. An exception it raises stops the job after the batch
            in flight and is raised again once the batch is committed.
        weights: how often each workload runs (a list of workloads).
        input_shapes: a model's symbolic input dimensions fixed, as
            ``{"input_ids": (1, 128)}`` or ``["input_ids=1x128"]``.
        layout: ``"nhwc"`` (the default), ``"nchw"``, ``"blocked"`` or
            ``"auto"`` for a model's convolutions (``"auto"`` also tunes
            each conv channel-blocked and the layout transforms, so that
            ``compile(..., layout="auto")`` can choose by measurement).
        winograd: 3x3 convolutions by Winograd's F(4x4, 3x3) or F(2x2,
            3x3), the tile per conv by its image (True or ``"auto"``), one
            tile for all (2 or 4), or none (False).
        trials_per_task: at most this many trials per task (0: no cap).
        seed: the search seed.
        batch, population: candidates measured per round, evolutionary
            population (None: the defaults, 32 and 256).
        timeout_ms, build_timeout_ms: a candidate's run and build time
            limits (None: adaptive, 60 s).
        cost_model: ``"xgb"`` or ``"random"``.
        strategy: ``"evolutionary"`` or ``"random"``.
        task_scheduler: ``"gradient"`` or ``"round-robin"``.
        tensorize: include the tensor-intrinsic variants in the design space.
        confirm: when the job finishes, measure the ``confirm`` fastest
            schedules of each task again side by side in interleaved rounds
            and keep their medians (what compile uses); 0: no confirmation.
        verbose: print the task table and progress (on ``sys.stdout``).

    Returns:
        A :class:`TuneResult`. Ctrl-C (KeyboardInterrupt, in a notebook the
        interrupt button) stops the job after the batch in flight: that batch
        and every earlier one are committed, and the result has state
        ``interrupted``; run the same ``job`` again to resume.

    Raises:
        tessera.Error: a bad workload, model or option, or a database error
            (the trials committed before it are kept).
    """
    req: dict[str, Any] = {
        "trials": int(trials),
        "trials_per_task": int(trials_per_task),
        "seed": int(seed),
        "cost_model": cost_model,
        "strategy": strategy,
        "task_scheduler": task_scheduler,
        "tensorize": bool(tensorize),
        "confirm_top": int(confirm),
        **_winograd(winograd),
    }
    if trials < 0:
        raise InvalidError(f"trials must be >= 0, not {trials}")
    if cost_model not in ("xgb", "random"):
        raise InvalidError(f"cost_model: xgb or random, not '{cost_model}'")
    if _is_model(workload_or_model):
        req["model"] = os.fspath(workload_or_model)  # type: ignore[arg-type]
        if not os.path.exists(req["model"]):
            raise MissingFileError(f"cannot open the model '{req['model']}': No such file or directory", code=-4)
        req["input_shapes"] = _shape_strings(input_shapes)
        if weights is not None:
            raise InvalidError("weights go with workloads; a model's tasks are weighted by their calls")
    else:
        if input_shapes is not None:
            raise InvalidError("input_shapes go with a model")
        req["workloads"] = _tasks(workload_or_model, weights)
    for key, val in (
        ("job", job),
        ("target", target),
        ("layout", layout),
        ("batch", batch),
        ("population", population),
        ("timeout_ms", timeout_ms),
        ("build_timeout_ms", build_timeout_ms),
    ):
        if val is not None:
            req[key] = val

    own = not isinstance(db, Database)
    database = db if isinstance(db, Database) else Database(os.fspath(db), create=True)
    try:
        return _run(database, req, on_progress, verbose)
    finally:
        if own:
            database.close()


def _run(
    database: Database,
    req: dict[str, Any],
    on_progress: Optional[Callable[[Progress], None]],
    verbose: bool,
) -> TuneResult:
    lib = _lib.lib()
    stop = ctypes.c_int(0)
    failure: list[BaseException] = []
    budget = int(req["trials"])

    def log_line(line: bytes) -> None:
        if on_progress is None or failure:
            return
        try:
            o = json.loads(line.decode("utf-8", "replace"))
            on_progress(
                Progress(
                    job=o["job"],
                    trial=int(o["trial"]),
                    trials=budget,
                    task=int(o["task"]),
                    workload=o["workload"],
                    status=o["status"],
                    seconds=_opt(o.get("seconds")),
                    gflops=_opt(o.get("gflops")),
                    best_seconds=_opt(o.get("best_seconds")) or None,
                    elapsed=float(o.get("elapsed_s", 0.0)),
                    error=o.get("error", ""),
                )
            )
        except BaseException as e:  # noqa: BLE001 - raised again after the job
            failure.append(e)
            stop.value = 1

    def text_line(line: bytes) -> None:
        if verbose:
            print(line.decode("utf-8", "replace"), file=sys.stdout, flush=True)

    log_cb = _lib.LINE_FN(log_line)
    text_cb = _lib.LINE_FN(text_line)
    err = _lib.new_error()
    out = ctypes.c_void_p()
    rc_box: list[int] = []
    request = json.dumps(req).encode()

    done = threading.Event()

    def work() -> None:
        try:
            with database._lock:
                rc_box.append(
                    lib.ts_py_tune(
                        database._h(),
                        request,
                        log_cb if on_progress is not None else _lib.LINE_FN(),
                        text_cb if verbose else _lib.LINE_FN(),
                        ctypes.byref(stop),
                        ctypes.byref(out),
                        ctypes.byref(err),
                    )
                )
        except BaseException as e:  # noqa: BLE001 - raised again below
            failure.append(e)
        finally:
            done.set()

    # The job runs in a thread of its own so that this one can take Ctrl-C
    # (KeyboardInterrupt) and turn it into the tuner's stop request. (An
    # Event, not Thread.join: a join interrupted by KeyboardInterrupt can
    # take a running thread for finished on Python 3.11.)
    t = threading.Thread(target=work, name="tessera-tune", daemon=True)
    t.start()
    interrupts = 0
    while not done.is_set():
        try:
            done.wait(0.1)
        except KeyboardInterrupt:
            interrupts += 1
            stop.value = 1
            print(
                "tessera.tune: stopping after the batch in flight (its results are kept)"
                if interrupts == 1
                else "tessera.tune: still waiting for the batch in flight to be committed",
                file=sys.stderr,
                flush=True,
            )
    t.join()
    rc = rc_box[0] if rc_box else -10
    if rc != 0:
        if failure:
            raise failure[0]
        _lib.raise_error(rc, err, "tuning failed")
    o = _lib.take_json(out.value)
    if failure:
        raise failure[0]
    tasks = [
        TaskResult(
            name=x["name"],
            hash=x["hash"],
            spec=x["spec"],
            weight=float(x["weight"]),
            flops=float(x["flops"]),
            best_seconds=x["best_seconds"],
            gflops=x["gflops"],
            confirmed=bool(x["confirmed"]),
            trials=int(x["trials"]),
            trials_now=int(x["trials_now"]),
            trial_of_best=x["trial_of_best"],
            by_status={k: int(v) for k, v in x["by_status"].items()},
            trace=x["trace"],
        )
        for x in o["tasks"]
    ]
    return TuneResult(
        job=o["job"],
        state=o["state"],
        resumed=bool(o["resumed"]),
        target=o["target"],
        trials_done=int(o["trials_done"]),
        trials_now=int(o["trials_now"]),
        seconds=float(o["seconds"]),
        tasks=tasks,
    )


__all__ = ["tune", "TuneResult", "TaskResult", "Progress", "Error"]
