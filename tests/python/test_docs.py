"""docs/python.md's walk-through, run: its python cells in order, in a fresh
folder holding models/, with every budget cut to a first batch and no
confirmation rounds."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import _source_dir


def _cells(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_walk_through(models_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("pandas")
    doc = (_source_dir() / "docs" / "python.md").read_text(encoding="utf-8")
    cells = _cells(doc)
    assert len(cells) >= 8
    (tmp_path / "models").symlink_to(models_dir)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        scope: dict = {"__name__": "__walk__"}
        for i, cell in enumerate(cells):
            # a first batch, without the end-of-job confirmation rounds
            # (conftest's job covers those): 30 s -> 15 s
            code = re.sub(r"\btrials=(\d+)", lambda m: f"trials={min(int(m.group(1)), 8)}, confirm=0", cell)
            exec(compile(code, f"docs/python.md cell {i + 1}", "exec"), scope)
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "largest error / largest magnitude" in out and "True" in out
