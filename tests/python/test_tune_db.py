"""tessera.tune and tessera.Database: a small job, resumed, interrupted; the
database's queries; errors."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import tessera
from conftest import SMALL_SPEC


def test_tune_small_workload(tuned_db: dict) -> None:
    r: tessera.TuneResult = tuned_db["result"]
    assert r.job == "small" and r.state == "finished" and not r.resumed
    assert r.trials_done == 16 and r.trials_now == 16
    assert r.target.startswith("llvm -mcpu=")
    t = r.best
    assert t.hash == tessera.Workload(SMALL_SPEC).hash
    assert t.trials == 16 and t.by_status["ok"] >= 1
    assert t.best_seconds > 0 and t.gflops > 0
    assert t.trace is not None and "instructions" in t.trace
    progress = tuned_db["progress"]
    assert [p.trial for p in progress] == list(range(16))
    assert all(p.trials == 16 and p.job == "small" for p in progress)
    ok = [p for p in progress if p.status == "ok"]
    assert ok and all(p.seconds > 0 and p.gflops > 0 for p in ok)


def test_queries(tuned_db: dict) -> None:
    r: tessera.TuneResult = tuned_db["result"]
    with tessera.Database(tuned_db["path"]) as db:
        assert db.backend == "sqlite"
        rows = db.workloads()
        assert len(rows) == 1
        row = rows[0]
        assert row.name == "matmul_64x64x64_float32" and row.records == 16
        assert row.target == r.target and row.best_seconds > 0
        # the best record, by Workload, spec, hash, hash prefix and name
        w = tessera.Workload(SMALL_SPEC)
        best = db.best(w)
        for key in (SMALL_SPEC, w.hash, w.hash[:8], w.name):
            assert db.best(key).id == best.id
        assert best.status == "ok" and best.target == r.target
        assert best.latency == pytest.approx(r.best.best_seconds)
        assert best.gflops == pytest.approx(w.flops / best.latency * 1e-9)
        assert best.confirmed  # the job confirmed its top 2
        assert best.job == "small" and best.trial is not None
        assert best.trace is not None and best.measure is not None
        assert "get_block" in best.script
        assert best.scheduled_tir.startswith("func matmul(")
        # records, oldest first; filtered; newest per workload x target
        recs = db.records()
        assert len(recs) == 16 and [x.trial for x in recs] == list(range(16))
        assert all(isinstance(x, tessera.Record) for x in recs)
        assert len(db.records(w, status="ok")) == row.ok
        assert [x.trial for x in db.records(limit=3)] == [13, 14, 15]
        assert db.records(target="llvm -mcpu=x86-64") == []
        top = db.top(w, k=3)
        assert top[0].id == best.id and len(top) <= 3
        assert all(a.latency <= b.latency for a, b in zip(top, top[1:]) if a.confirmed == b.confirmed)


def test_records_as_frame(tuned_db: dict) -> None:
    pd = pytest.importorskip("pandas")
    with tessera.Database(tuned_db["path"]) as db:
        df = db.records(as_frame=True)
    assert isinstance(df, pd.DataFrame) and len(df) == 16
    assert {"latency", "gflops", "status", "trial"} <= set(df.columns)


def test_query_errors(tuned_db: dict, tmp_path: Path) -> None:
    with tessera.Database(tuned_db["path"]) as db:
        with pytest.raises(tessera.NotFoundError):
            db.best("matmul M=8 N=8 K=8")
        with pytest.raises(tessera.NotFoundError):
            db.best("0000")
        with pytest.raises(tessera.NotFoundError, match="no ok record"):
            db.best(SMALL_SPEC, target="llvm -mcpu=x86-64")
        with pytest.raises(tessera.InvalidError):
            db.best(SMALL_SPEC, target="no-such-target")
    with pytest.raises(tessera.InvalidError):
        db.workloads()  # closed
    with pytest.raises(tessera.MissingFileError):
        tessera.Database(str(tmp_path / "absent.db"))
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 10)
    with pytest.raises(tessera.InvalidError, match="not an SQLite file"):
        tessera.Database(str(junk))
    assert junk.read_bytes() == b"this is not a database" * 10


def test_resume_extends_the_job(tuned_db: dict, tmp_path: Path) -> None:
    path = tmp_path / "resume.db"
    first = tessera.tune(SMALL_SPEC, trials=8, batch=4, db=str(path), job="j", confirm=0)
    assert first.trials_done == 8
    again = tessera.tune(SMALL_SPEC, trials=12, batch=4, db=tessera.Database(str(path)), job="j", confirm=0)
    assert again.resumed and again.trials_done == 12 and again.trials_now == 4
    with tessera.Database(str(path)) as db:
        assert len(db.records()) == 12


def test_ctrl_c_stops_after_the_batch(tmp_path: Path) -> None:
    path = tmp_path / "interrupt.db"
    calls = []

    def interrupt_once(p: tessera.Progress) -> None:
        calls.append(p)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C in a notebook sends

    r = tessera.tune(SMALL_SPEC, trials=64, batch=4, db=str(path), job="stop", on_progress=interrupt_once, confirm=0)
    assert r.state == "interrupted"
    assert 4 <= r.trials_done < 64 and r.trials_done % 4 == 0
    with tessera.Database(str(path)) as db:
        assert len(db.records()) == r.trials_done  # the batch in flight was kept
    resumed = tessera.tune(SMALL_SPEC, trials=r.trials_done + 4, batch=4, db=str(path), job="stop", confirm=0)
    assert resumed.resumed and resumed.state == "finished"


def test_progress_exception_stops_and_is_raised(tmp_path: Path) -> None:
    path = tmp_path / "raise.db"

    class Enough(Exception):
        pass

    def fail(p: tessera.Progress) -> None:
        raise Enough("from on_progress")

    with pytest.raises(Enough):
        tessera.tune(SMALL_SPEC, trials=64, batch=4, db=str(path), job="raise", on_progress=fail, confirm=0)
    with tessera.Database(str(path)) as db:
        n = len(db.records())
    assert 4 <= n < 64


def test_tune_errors(tmp_path: Path) -> None:
    db = str(tmp_path / "e.db")
    with pytest.raises(tessera.InvalidError, match="'K'"):
        tessera.tune("matmul M=64 N=64", trials=4, db=db)
    with pytest.raises(tessera.InvalidError):
        tessera.tune(SMALL_SPEC, trials=4, db=db, cost_model="magic")
    with pytest.raises(tessera.InvalidError):
        tessera.tune(SMALL_SPEC, trials=4, db=db, target="no-such-target")
    with pytest.raises(tessera.MissingFileError):
        tessera.tune(str(tmp_path / "absent.onnx"), trials=4, db=db)
