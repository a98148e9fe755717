#!/usr/bin/env python3
"""Runs the ONNX node conformance cases through tessera and reports which pass.

The onnx Python wheel ships, under onnx/backend/test/data/node, one folder
per case: model.onnx (usually one node) and test_data_set_0 with the
inputs and the expected outputs as TensorProto files. For each case this
script writes the inputs as an .npz, runs `tessera graph run` (with
--compile: `tessera compile`, then `tessera run` on the library), and
compares every output with the expected one (|got - want| <= atol + rtol *
|want|, NaN where NaN is expected). A case is

  pass         every output within tolerance
  mismatch     an output differs (the largest error is printed)
  unsupported  tessera refused the model with a message (an operator, an
               opset, an attribute or a dtype it does not handle)
  error        tessera failed otherwise (a crash, a timeout, no output)
  skipped      inputs or outputs that are not tensors (sequences, maps,
               optionals), or no test data

Needs numpy and onnx (Debian's python3-onnx parses the files); the cases
come from any onnx wheel, e.g.

  python3 -m venv /tmp/onnxdata && /tmp/onnxdata/bin/pip install onnx==1.15.0
  scripts/onnx_conformance.py build/tessera \\
      --data /tmp/onnxdata/lib/python3.11/site-packages/onnx/backend/test/data/node

  [--filter REGEX] [--compile] [--json FILE] [--rtol 1e-3] [--atol 1e-5]
  [--timeout 60] [--no-freeze] [-v]

Many cases feed a node's parameters (axes, pads, a target shape, repeats,
a Resize's scales) as graph inputs, where real models have constants; the
shapes then depend on input data, which a compiler of static shapes
refuses. By default such integer inputs (not a node's first), a Resize's
parameters and the scales and zero points of QuantizeLinear and
DequantizeLinear are made initializers holding the case's values
(--no-freeze keeps them as inputs).

It prints one line per case that does not pass (with -v every case), then
the counts per outcome, and exits 0 (it is a report, not a test).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import onnx
from onnx import numpy_helper


def load_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def save_npz(path, arrays):
    """np.savez without its keyword arguments (an input called 'like' is
    taken by numpy's array-function dispatch)."""
    with zipfile.ZipFile(path, "w") as z:
        for name, a in arrays.items():
            with z.open(name + ".npy", "w") as f:
                np.lib.format.write_array(f, np.asarray(a), allow_pickle=False)


class Unreadable(Exception):
    pass


def load_data(path):
    try:
        return load_tensor(path)
    except Exception as e:  # a dtype this onnx does not know
        raise Unreadable("%s: %s" % (os.path.basename(path), e)) from e


def tensor_io(model):
    """Names of the graph's non-initializer inputs and its outputs, or None
    when one is not a tensor."""
    inits = {i.name for i in model.graph.initializer}
    ins = [i for i in model.graph.input if i.name not in inits]
    for v in list(ins) + list(model.graph.output):
        if v.type.WhichOneof("value") != "tensor_type":
            return None, None
    return [i.name for i in ins], [o.name for o in model.graph.output]


def classify(stderr):
    """A refusal with a message (an operator, opset, attribute, dtype, or a
    shape that depends on input data, which these cases often feed as a
    graph input where models have a constant) or another failure."""
    s = stderr.lower()
    if "not supported" in s or "unsupported" in s or "opsets" in s or \
            "no kernel" in s or "not a kernel" in s or "wants " in s or \
            "depends on run-time data" in s or "is not a constant" in s or \
            "non-constant" in s or "other than" in s:
        return "unsupported"
    return "error"


def run_case(args, case, work):
    model_path = os.path.join(case, "model.onnx")
    data = os.path.join(case, "test_data_set_0")
    if not os.path.isdir(data):
        return "skipped", "no test data"
    try:
        model = onnx.load(model_path, load_external_data=False)
    except Exception as e:  # a model this onnx cannot parse
        return "skipped", "onnx cannot load it: %s" % e
    ins, outs = tensor_io(model)
    if ins is None:
        return "skipped", "a sequence, map or optional value"
    elem = [v.type.tensor_type.elem_type for v in
            list(model.graph.input) + list(model.graph.output)]
    if any(e == 16 or e > 16 for e in elem):
        return "skipped", "bfloat16 or float8 values (numpy has no such dtype)"
    if 8 in elem:
        return "skipped", "string values"
    feeds = {}
    for k, name in enumerate(ins):
        p = os.path.join(data, "input_%d.pb" % k)
        if not os.path.exists(p):
            return "skipped", "input %d missing" % k
        feeds[name] = load_data(p)
    want = []
    for k in range(len(outs)):
        p = os.path.join(data, "output_%d.pb" % k)
        if not os.path.exists(p):
            return "skipped", "output %d missing" % k
        want.append(load_data(p))
    if not args.no_freeze:
        # parameters fed as graph inputs (axes, pads, shapes, repeats, a
        # Resize's scales) are constants in real models: make them so
        params = set()
        for node in model.graph.node:
            for k, name in enumerate(node.input):
                if name in feeds and k > 0 and (
                        feeds[name].dtype.kind in "iu" or
                        node.op_type in ("Resize", "QuantizeLinear", "DequantizeLinear")):
                    params.add(name)
        if params:
            keep = [i for i in model.graph.input if i.name not in params]
            del model.graph.input[:]
            model.graph.input.extend(keep)
            for name in sorted(params):
                model.graph.initializer.append(numpy_helper.from_array(feeds.pop(name), name))
            model_path = os.path.join(work, "model.onnx")
            onnx.save(model, model_path)
    in_path = os.path.join(work, "in.npz")
    out_path = os.path.join(work, "out.npz")
    if os.path.exists(out_path):
        os.remove(out_path)
    save_npz(in_path, feeds)
    if args.compile:
        lib = os.path.join(work, "m.so")
        cmds = [[args.tessera, "compile", model_path, "-o", lib],
                [args.tessera, "run", lib, "--inputs", in_path, "--outputs", out_path]]
    else:
        cmds = [[args.tessera, "graph", "run", model_path, "--inputs", in_path,
                 "--outputs", out_path]]
    for cmd in cmds:
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return "error", "timeout after %d s" % args.timeout
        if r.returncode != 0:
            msg = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
            return classify(r.stderr), msg[:200]
    if not os.path.exists(out_path):
        return "error", "no outputs written"
    got = np.load(out_path)
    if len(got.files) != len(want):
        return "mismatch", "%d outputs, %d expected" % (len(got.files), len(want))
    worst = ""
    for name, w in zip(outs, want):
        g = got[name] if name in got.files else None
        if g is None:
            return "mismatch", "output '%s' missing" % name
        if g.shape != w.shape:
            return "mismatch", "output '%s' has shape %s, expected %s" % (name, g.shape, w.shape)
        if w.dtype.kind in "fc":
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            nan = np.isnan(w64)
            if np.any(np.isnan(g64) != nan):
                return "mismatch", "output '%s': NaN where a number is expected or the reverse" % name
            diff = np.abs(np.where(nan, 0, g64 - w64))
            bad = diff > args.atol + args.rtol * np.abs(np.where(nan, 0, w64))
            if np.any(bad):
                return "mismatch", "output '%s': largest error %.3g" % (name, float(diff.max()))
        elif not np.array_equal(g.astype(w.dtype) if g.dtype != w.dtype else g, w):
            return "mismatch", "output '%s': values differ" % name
        elif g.dtype != w.dtype:
            worst = "(dtype %s, expected %s)" % (g.dtype, w.dtype)
    return "pass", worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tessera")
    ap.add_argument("--data", required=True, help="the onnx wheel's backend/test/data/node")
    ap.add_argument("--filter", default="", help="only the cases whose folder matches")
    ap.add_argument("--compile", action="store_true", help="compile and run the library")
    ap.add_argument("--json", help="write every case's outcome here")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--no-freeze", action="store_true",
                    help="keep integer parameters (axes, pads, shapes, ...) and a "
                         "Resize's scales as graph inputs, as the cases give them")
    ap.add_argument("-v", action="store_true", help="print passing cases too")
    args = ap.parse_args()
    cases = sorted(d for d in os.listdir(args.data)
                   if os.path.isdir(os.path.join(args.data, d)) and re.search(args.filter, d))
    counts, results = {}, {}
    with tempfile.TemporaryDirectory(prefix="conformance") as work:
        for i, c in enumerate(cases):
            try:
                outcome, why = run_case(args, os.path.join(args.data, c), work)
            except Unreadable as e:
                outcome, why = "skipped", "unreadable test data (%s)" % e
            counts[outcome] = counts.get(outcome, 0) + 1
            results[c] = {"outcome": outcome, "detail": why}
            if outcome != "pass" or args.v:
                print("%-60s %-11s %s" % (c, outcome, why), flush=True)
            if (i + 1) % 100 == 0:
                print("# %d of %d cases" % (i + 1, len(cases)), file=sys.stderr, flush=True)
    total = len(cases)
    print("\n%d cases: %s" % (total, ", ".join(
        "%s %d" % (k, counts.get(k, 0)) for k in
        ("pass", "mismatch", "unsupported", "error", "skipped"))))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"counts": counts, "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
