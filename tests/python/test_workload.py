"""tessera.Workload: specs, TIR text, hashes, errors."""

from __future__ import annotations

import pytest

import tessera


def test_spec_builds_the_operator() -> None:
    w = tessera.Workload("matmul M=64 N=64 K=64")
    assert w.op == "matmul"
    assert w.spec.startswith("matmul M=64 N=64 K=64 ")  # canonical: defaults filled
    assert w.name == "matmul_64x64x64_float32"
    assert w.flops == 2 * 64 * 64 * 64
    assert len(w.hash) == 32 and int(w.hash, 16) >= 0
    assert w.tir.startswith("func matmul(")


def test_hash_is_structural() -> None:
    a = tessera.Workload("matmul M=64 N=64 K=64")
    b = tessera.Workload.from_tir(a.tir.replace("func matmul(", "func renamed("))
    assert b.spec is None and b.name == "renamed"
    assert a.hash == b.hash and a == b
    assert b.flops == a.flops
    assert tessera.Workload("matmul M=64 N=64 K=32").hash != a.hash


def test_bad_spec_names_the_key() -> None:
    with pytest.raises(tessera.InvalidError, match="'K'") as e:
        tessera.Workload("matmul M=64 N=64")
    assert isinstance(e.value, tessera.Error) and isinstance(e.value, ValueError)
    assert e.value.code == -1
    with pytest.raises(tessera.InvalidError, match="unknown operator|frobnicate"):
        tessera.Workload("frobnicate X=1")
    with pytest.raises(TypeError):
        tessera.Workload(64)  # type: ignore[arg-type]


def test_tir_parse_error_has_a_position() -> None:
    with pytest.raises(tessera.ParseError) as e:
        tessera.Workload.from_tir("func f(A: float32[4]) {\n  oops\n}\n", name="bad.tir")
    assert e.value.line == 2 and e.value.column > 0
    assert "bad.tir:2:" in str(e.value)


def test_missing_tir_file() -> None:
    with pytest.raises(tessera.MissingFileError):
        tessera.Workload.from_file("/nonexistent/w.tir")


def test_version() -> None:
    assert tessera.library_version() == tessera.__version__
