"""tessera.compile, tessera.load and Module: small models compiled, checked
against onnxruntime, saved and loaded again; errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tessera

ort = pytest.importorskip("onnxruntime")


def _ort_outputs(model: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    s = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _rel_error(got: np.ndarray, want: np.ndarray) -> float:
    scale = float(np.max(np.abs(want))) or 1.0
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale


@pytest.fixture(scope="module")
def resnet(models_dir: Path) -> tessera.Module:
    m = tessera.compile(models_dir / "resnet50_small.onnx", threads=2)
    yield m
    m.close()


@pytest.mark.parametrize("name", ["resnet50_small", "ops_small"])
def test_compiled_model_matches_onnxruntime(models_dir: Path, name: str) -> None:
    path = models_dir / f"{name}.onnx"
    with tessera.compile(path, threads=2) as m:
        assert m.inputs and m.outputs
        feeds = m.random_inputs(seed=3)
        got = m.run(**feeds)
        want = _ort_outputs(path, feeds)
        assert list(got) == [t.name for t in m.outputs]
        for t, w in zip(m.outputs, want):
            assert got[t.name].shape == w.shape and got[t.name].dtype == w.dtype
            assert _rel_error(got[t.name], w) < 1e-3, t.name


def test_module_interface(resnet: tessera.Module, tmp_path: Path) -> None:
    (inp,) = resnet.inputs
    (out,) = resnet.outputs
    assert inp.name == "data" and inp.shape == (1, 3, 32, 32) and inp.dtype == np.float32
    assert out.shape == (1, 10) and inp.nbytes == 4 * 3 * 32 * 32
    x = np.random.default_rng(0).standard_normal(inp.shape)  # float64: converted
    y = resnet(x)
    assert isinstance(y, np.ndarray) and y.shape == out.shape
    assert np.array_equal(resnet(data=x), y)
    assert np.array_equal(resnet.run(x)[out.name], y)
    assert "target" in resnet.info and resnet.report is not None
    assert resnet.report["tasks"] and all(t["source"] == "default" for t in resnet.report["tasks"])
    b = resnet.benchmark(repeat=5, min_seconds=0.01)
    assert b.runs >= 5 and 0 < b.min <= b.median
    prof = resnet.profile()
    assert len(prof) == len(resnet.kernels) and all(s >= 0 for _, s in prof)
    saved = resnet.save(tmp_path / "resnet.so")
    with tessera.load(saved, threads=1) as again:
        assert again.report is None
        assert np.array_equal(again(x), y)


def test_bad_inputs(resnet: tessera.Module) -> None:
    with pytest.raises(tessera.InvalidError, match="shape"):
        resnet(np.zeros((1, 3, 16, 16), np.float32))
    with pytest.raises(tessera.InvalidError, match="missing input"):
        resnet()
    with pytest.raises(tessera.InvalidError, match="no input 'image'"):
        resnet(image=np.zeros((1, 3, 32, 32), np.float32))
    with pytest.raises(tessera.InvalidError, match="2 given"):
        resnet(np.zeros((1, 3, 32, 32)), np.zeros(1))


def test_compile_and_load_errors(models_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(tessera.MissingFileError):
        tessera.compile(tmp_path / "absent.onnx")
    with pytest.raises(FileNotFoundError):  # the built-in class too
        tessera.load(tmp_path / "absent.so")
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07\x12\xff\xff\xff\xff")
    with pytest.raises(tessera.Error, match="not a valid ONNX model"):
        tessera.compile(corrupt)
    not_a_model = tmp_path / "x.so"
    not_a_model.write_bytes(b"not an ELF file")
    with pytest.raises(tessera.InvalidError, match="cannot load"):
        tessera.load(not_a_model)


def test_winograd_option(models_dir: Path) -> None:
    # every form of winograd= reaches the compiler; a bad one is refused
    # before it (the zoo's small models have no conv Winograd takes)
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    outs = []
    for w in (True, False, "auto", 2, 4):
        with tessera.compile(models_dir / "resnet50_small.onnx", threads=2, winograd=w) as m:
            outs.append(m(data=x))
    for y in outs[1:]:
        assert np.array_equal(y, outs[0])
    for bad in (3, "4", None):
        with pytest.raises(tessera.InvalidError, match="winograd="):
            tessera.compile(models_dir / "resnet50_small.onnx", winograd=bad)


def test_tune_model_then_compile_with_db(models_dir: Path, tmp_path: Path) -> None:
    path = models_dir / "ops_small.onnx"
    db = str(tmp_path / "model.db")
    r = tessera.tune(path, trials=8, batch=4, db=db, job="ops", confirm=0)
    assert r.state == "finished" and r.trials_done == 8 and len(r.tasks) > 1
    tuned = {t.hash for t in r.tasks if t.best_seconds is not None}
    assert tuned
    with tessera.compile(path, db=db, threads=2) as m:
        from_db = {t["hash"] for t in m.report["tasks"] if t["source"] == "db"}
        assert from_db and from_db <= tuned  # the tuned tasks' records are used
        feeds = m.random_inputs(seed=5)
        for got, want in zip(m.run(**feeds).values(), _ort_outputs(path, feeds)):
            assert _rel_error(got, want) < 1e-3


def test_blocked_layout_by_measurement(models_dir: Path, tmp_path: Path) -> None:
    """layout="auto": tune measures each conv NHWC and channel-blocked (and
    the transforms), compile chooses by those records; either way the
    outputs are onnxruntime's, and "blocked" blocks every conv it can."""
    path = models_dir / "digits_small.onnx"
    db = str(tmp_path / "block.db")
    # one trial per task (its default schedule) is a record for each of the
    # 15 tasks (the two convs in each layout, the transforms, the rest):
    # enough for compile to choose by
    r = tessera.tune(path, layout="auto", trials=20, trials_per_task=1, batch=2,
                     db=db, job="block", confirm=0)
    assert all(t.trials >= 1 for t in r.tasks), [(t.name, t.trials) for t in r.tasks]
    names = " ".join(t.name for t in r.tasks)
    assert "NCHW16c" in names and "NCHW8c" in names and "to_blocked" in names
    feeds = None
    for layout in ("auto", "blocked"):
        with tessera.compile(path, db=db, layout=layout, threads=2) as m:
            feeds = feeds or m.random_inputs(seed=7)
            for got, want in zip(m.run(**feeds).values(), _ort_outputs(path, feeds)):
                assert _rel_error(got, want) < 1e-3, layout


def test_dynamic_dimension(models_dir: Path) -> None:
    """One library for every sequence length of dyn_seq (a softmax, a max
    and a mean along it): sizes inside, between and above the buckets
    match onnxruntime; the size comes from the arrays or from set_dim."""
    path = models_dir / "dyn_seq.onnx"
    with tessera.compile(path, shape_buckets={"seq": (4, 8)}, dim_max=12, threads=1) as m:
        assert [b["size"] for b in m.report["buckets"]] == [4, 8, 12]
        (d,) = m.dims
        assert (d.name, d.min, d.max, d.buckets) == ("seq", 1, 12, (4, 8, 12))
        rng = np.random.default_rng(4)
        for n in (1, 3, 4, 7, 12):
            x = rng.standard_normal((1, n, 8)).astype(np.float32)
            got = m.run(x)
            assert m.dims[0].size == n and m.inputs[0].shape == (1, n, 8)
            for t, want in zip(m.outputs, _ort_outputs(path, {"x": x})):
                assert got[t.name].shape == want.shape, t.name
                assert _rel_error(got[t.name], want) < 1e-4, (n, t.name)
        m.set_dim("seq", 5)
        assert m.inputs[0].shape == (1, 5, 8) and m.outputs[0].shape == (1, 5, 8)
        with pytest.raises(tessera.InvalidError, match="seq=13"):
            m.set_dim("seq", 13)
        with pytest.raises(tessera.InvalidError, match="no dynamic dimension 'batch'"):
            m.set_dim("batch", 2)
        with pytest.raises(tessera.InvalidError, match="seq=13"):
            m(np.zeros((1, 13, 8), np.float32))


def test_dynamic_dimension_errors(models_dir: Path, resnet: tessera.Module) -> None:
    path = models_dir / "dyn_seq.onnx"
    with pytest.raises(tessera.InvalidError, match="ascending"):
        tessera.compile(path, shape_buckets={"seq": (8, 4)})
    with pytest.raises(tessera.InvalidError, match="one dynamic dimension"):
        tessera.compile(path, shape_buckets={"seq": (4,), "batch": (2,)})
    with pytest.raises(tessera.InvalidError, match="below the largest bucket"):
        tessera.compile(path, shape_buckets={"seq": (4, 8)}, dim_max=6)
    with pytest.raises(tessera.InvalidError, match="goes with shape_buckets"):
        tessera.compile(path, dim_max=6)
    with pytest.raises(tessera.Error, match="dynamic dimension left is 'seq'"):
        tessera.compile(path, shape_buckets={"length": (4,)})
    assert resnet.dims == []
    with pytest.raises(tessera.InvalidError, match="compiled without shape_buckets"):
        resnet.set_dim("batch", 2)


def test_dynamic_sequence_with_a_sized_batch(models_dir: Path) -> None:
    """bert_small has a batch and a sequence dimension: dims sizes the
    batch, and the library serves every sequence length up to 16."""
    path = models_dir / "bert_small.onnx"
    with tessera.compile(path, shape_buckets={"sequence": (8, 16)}, dims={"batch": 1}, threads=1) as m:
        assert [d.name for d in m.dims] == ["sequence"]
        rng = np.random.default_rng(6)
        for n in (5, 16):
            feeds = {"input_ids": rng.integers(0, 100, (1, n)).astype(np.int64), "attention_mask": np.ones((1, n), np.int64)}
            got = m.run(**feeds)
            for t, want in zip(m.outputs, _ort_outputs(path, feeds)):
                assert got[t.name].shape == want.shape, (n, t.name)
                assert _rel_error(got[t.name], want) < 1e-4, (n, t.name)
