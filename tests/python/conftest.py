"""Fixtures of the Python package's tests: the small generated ONNX models
(the build's graph_models folder under ctest, TESSERA_TEST_MODELS; else
written here once per session by scripts/gen_models.py with the system
Python's onnx package) and a tuning database with one tuned workload."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import tessera

SMALL_SPEC = "matmul M=64 N=64 K=64"
MODELS = ("resnet50", "ops")


def _source_dir() -> Path:
    env = os.environ.get("TESSERA_SOURCE_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding resnet50_small.onnx and ops_small.onnx."""
    env = os.environ.get("TESSERA_TEST_MODELS")
    if env and all((Path(env) / f"{m}_small.onnx").exists() for m in MODELS):
        return Path(env)
    out = tmp_path_factory.mktemp("models")
    gen = _source_dir() / "scripts" / "gen_models.py"
    try:
        subprocess.run(
            ["/usr/bin/python3", str(gen), "--out", str(out), "--small", "--bad", "--models", ",".join(MODELS)],
            check=True,
            capture_output=True,
            timeout=300,
        )
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot generate the test models: {e}")
    return out


@pytest.fixture(scope="session")
def tuned_db(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A database with a 16-trial job (two batches of 8) of SMALL_SPEC, and
    that job's result and progress reports."""
    path = tmp_path_factory.mktemp("db") / "tuned.db"
    seen: list[tessera.Progress] = []
    result = tessera.tune(
        SMALL_SPEC, trials=16, batch=8, db=str(path), job="small", on_progress=seen.append, confirm=2
    )
    return {"path": str(path), "result": result, "progress": seen}
