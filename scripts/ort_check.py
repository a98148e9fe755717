#!/usr/bin/env python3
"""Checks tessera's reference executor against onnxruntime on one model.

Writes seeded random inputs for the model's graph inputs (floats uniform in
[-1, 1); integer inputs named like a mask get ones with the last quarter
zero, other integer inputs values in [0, 100)), runs onnxruntime and
`tessera graph run` on them, and prints the largest error of each output
relative to the largest magnitude of onnxruntime's output. Exits 1 when an
output's relative error exceeds --tol (default 1e-4).

Runs in the project's virtual environment (onnxruntime and numpy from PyPI;
scripts/install-deps.sh creates it; started with another Python, the script
re-runs itself there, and exits 77 -- skipped -- when there is none):

  scripts/ort_check.py build/tessera MODEL.onnx \\
      [--input-shape NAME=1x128 ...] [--size SYMBOL=N ...] [--after PASS]
      [--library MODEL.so] [--tol 1e-4] [--work DIR]

--size gives a named dynamic dimension (an ONNX dim_param) a size in every
input that has it; --library runs a library `tessera compile` made (with
`tessera run`, which takes a dynamic size from the inputs) instead of
`tessera graph run`.
"""
import argparse
import os
import subprocess
import sys
import tempfile

SKIP = 77  # the exit code ctest counts as "skipped"

try:
    import numpy as np
    import onnxruntime as ort
except ImportError:
    # Re-run under the project's virtual environment when there is one.
    venv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".venv", "bin", "python")
    if os.path.exists(venv) and not os.environ.get("TS_ORT_CHECK_IN_VENV"):
        os.environ["TS_ORT_CHECK_IN_VENV"] = "1"
        os.execv(venv, [venv] + sys.argv)
    print("ort_check: onnxruntime is not installed (scripts/install-deps.sh makes .venv); skipped")
    sys.exit(SKIP)


def parse_shapes(items):
    shapes = {}
    for item in items or []:
        name, dims = item.rsplit("=", 1)
        shapes[name] = [int(d) for d in dims.replace(",", "x").split("x")]
    return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tessera")
    ap.add_argument("model")
    ap.add_argument("--input-shape", action="append", default=[])
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", help="folder for in.npz/out.npz (default: a temporary one)")
    ap.add_argument("--after", help="run tessera's graph after this pass (default: all)")
    ap.add_argument("--size", action="append", default=[],
                    help="SYMBOL=N: the size of a named dynamic dimension")
    ap.add_argument("--library", help="run this compiled model instead")
    args = ap.parse_args()

    opts = ort.SessionOptions()
    # the reference is the model as written, not onnxruntime's rewrite of it
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(args.model, opts, providers=["CPUExecutionProvider"])
    fixed = parse_shapes(args.input_shape)
    sizes = {k: int(v) for k, v in (x.split("=", 1) for x in args.size)}
    rng = np.random.RandomState(args.seed)
    feeds = {}
    for inp in sess.get_inputs():
        shape = fixed.get(inp.name) or [sizes.get(d, d) for d in inp.shape]
        if any(not isinstance(d, int) for d in shape):
            sys.exit("ort_check: input '%s' has symbolic dimensions %s; give "
                     "--input-shape" % (inp.name, inp.shape))
        if "int" in inp.type:
            if "mask" in inp.name:
                a = np.ones(shape, np.int64)
                a[..., shape[-1] - shape[-1] // 4:] = 0
            else:
                a = rng.randint(0, 100, size=shape).astype(np.int64)
        else:
            a = rng.uniform(-1, 1, size=shape).astype(np.float32)
        feeds[inp.name] = a
    want = sess.run(None, feeds)

    work = args.work or tempfile.mkdtemp(prefix="ort_check")
    os.makedirs(work, exist_ok=True)
    in_path, out_path = os.path.join(work, "in.npz"), os.path.join(work, "out.npz")
    np.savez(in_path, **feeds)
    if args.library:
        cmd = [args.tessera, "run", args.library, "--inputs", in_path,
               "--outputs", out_path]
    else:
        cmd = [args.tessera, "graph", "run", args.model, "--inputs", in_path,
               "--outputs", out_path]
        for s in args.input_shape:
            cmd += ["--input-shape", s]
    if args.after:
        cmd += ["--after", args.after]
    run = subprocess.run(cmd)
    if run.returncode != 0:
        sys.exit("ort_check: %s failed (exit %d)" % (" ".join(cmd[1:3]), run.returncode))
    got = np.load(out_path)
    worst = 0.0
    names = [o.name for o in sess.get_outputs()]
    got_arrays = [got[k] for k in got.files]
    if len(got_arrays) != len(want):
        sys.exit("ort_check: %d outputs from tessera, %d from onnxruntime"
                 % (len(got_arrays), len(want)))
    for name, g, w in zip(names, got_arrays, want):
        if g.shape != w.shape:
            sys.exit("ort_check: output '%s' has shape %s, onnxruntime gives %s"
                     % (name, g.shape, w.shape))
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        both_nan = np.isnan(g64) & np.isnan(w64)
        scale = float(np.max(np.abs(np.where(both_nan, 0, w64)), initial=0)) or 1.0
        diff = np.where(both_nan, 0, np.abs(g64 - w64))
        # a NaN where onnxruntime has a number (or the reverse) is an error
        rel = float(np.max(diff, initial=0)) / scale
        if np.isnan(rel):
            rel = float("inf")
        worst = max(worst, rel)
        print("%s: output %s %s max relative error %.2e" % (
            os.path.basename(args.model), name, list(w.shape), rel))
    if worst > args.tol:
        print("ort_check: FAIL (tolerance %.0e)" % args.tol)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
