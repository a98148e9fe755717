"""No memory growth over a thousand calls of each binding."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import tessera
from conftest import SMALL_SPEC


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _growth(fn: Callable[[], object], n: int = 1000) -> int:
    for _ in range(100):  # caches and allocator pools settle first
        fn()
    before = _rss_bytes()
    for _ in range(n):
        fn()
    return _rss_bytes() - before


LIMIT = 512 << 10  # 512 KiB: a leak of 1 KiB a call would be twice that


def test_workload_calls_do_not_leak() -> None:
    assert _growth(lambda: tessera.Workload(SMALL_SPEC)) < LIMIT

    def bad() -> None:
        with pytest.raises(tessera.InvalidError):
            tessera.Workload("matmul M=64")

    assert _growth(bad) < LIMIT


def test_database_calls_do_not_leak(tuned_db: dict) -> None:
    with tessera.Database(tuned_db["path"]) as db:
        assert _growth(lambda: db.best(SMALL_SPEC)) < LIMIT
        assert _growth(lambda: db.records(limit=4)) < LIMIT
    assert _growth(lambda: tessera.Database(tuned_db["path"]).close()) < LIMIT


def test_model_runs_do_not_leak(models_dir: Path) -> None:
    with tessera.compile(models_dir / "resnet50_small.onnx", threads=1) as m:
        x = np.zeros(m.inputs[0].shape, np.float32)
        assert _growth(lambda: m(x)) < LIMIT
