#!/usr/bin/env python3
"""tessera against TVM MetaSchedule on the same host, workloads and budget.

usage: tvm-compare.py TESSERA [--trials N[,N...]] [--threads T] [--rounds R]
                      [--workloads NAME,...] [--dir DIR] [--seed S]

Run it with a Python that has TVM's MetaSchedule (PyPI `apache-tvm` 0.27 with
`apache-tvm-ffi` 0.1.14, psutil, cloudpickle and xgboost), e.g. a virtual
environment:

    python3 -m venv tvmenv
    tvmenv/bin/pip install apache-tvm==0.27.0 psutil cloudpickle numpy xgboost
    tvmenv/bin/pip install apache-tvm-ffi==0.1.14
    tvmenv/bin/python scripts/tvm-compare.py build/tessera --trials 200

For each workload (a matmul, a conv and a row reduction of the broad set,
docs/tuning.md) and each budget, it tunes with both tools from scratch,
each with its own wall-clock tuning time, on T threads:

  - tessera: `tessera tune --workload SPEC --trials N --db DIR/...`;
  - TVM: `tune_tir` with the same number of trials (global budget, 64 per
    round, the default evolutionary search and XGBoost model), for
    `llvm -mcpu=<this CPU> -num-cores T`.

Then it times both bests in R interleaved rounds (default 5): a round runs
TVM's compiled function under its time evaluator (a median of 15 repeats of
at least 100 ms) and `tessera bench --workload SPEC --db ... --threads T
--json` (tessera's median of 5), alternating which goes first. The table
gives GFLOP/s (medians over the rounds), tessera / TVM (the median of the
per-round ratios) and both tuning times. Output goes to DIR/tvm-compare.json
too (default ./tvm-compare).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

try:
    import numpy as np
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms
except ImportError as e:  # pragma: no cover - depends on the environment
    sys.stderr.write(
        "tvm-compare: error: this Python has no TVM MetaSchedule (%s); see "
        "the usage in this script's docstring\n" % e)
    sys.exit(2)


# ---- the workloads, each as a tessera spec and a TE definition ----

def te_matmul(m, n, k):
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r),
                   name="C")
    return [a, b, c], 2.0 * m * n * k


def te_conv2d_nhwc(h, w, ci, co, kh, kw, pad):
    data = te.placeholder((1, h, w, ci), name="data")
    weight = te.placeholder((kh, kw, ci, co), name="weight")
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    padded = te.compute(
        (1, h + 2 * pad, w + 2 * pad, ci),
        lambda n, y, x, c: tvm.tirx.if_then_else(
            tvm.tirx.all(y >= pad, y < h + pad, x >= pad, x < w + pad),
            data[n, y - pad, x - pad, c], tvm.tirx.const(0.0, "float32")),
        name="pad")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rc = te.reduce_axis((0, ci), name="rc")
    out = te.compute(
        (1, oh, ow, co),
        lambda n, y, x, f: te.sum(
            padded[n, y + ry, x + rx, rc] * weight[ry, rx, rc, f],
            axis=[ry, rx, rc]),
        name="conv")
    return [data, weight, out], 2.0 * oh * ow * co * ci * kh * kw


def te_softmax(n, d):
    x = te.placeholder((n, d), name="X")
    k1 = te.reduce_axis((0, d), name="k1")
    mx = te.compute((n,), lambda i: te.max(x[i, k1], axis=k1), name="mx")
    e = te.compute((n, d), lambda i, j: te.exp(x[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis((0, d), name="k2")
    s = te.compute((n,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
    y = te.compute((n, d), lambda i, j: e[i, j] / s[i], name="Y")
    return [x, y], 5.0 * n * d  # tessera's count (docs/ops.md)


WORKLOADS = {
    "matmul": ("matmul M=625 N=457 K=307", lambda: te_matmul(625, 457, 307)),
    "conv": ("conv2d_nhwc N=1 H=28 W=28 CI=64 CO=80 KH=3 KW=3 pad=1",
             lambda: te_conv2d_nhwc(28, 28, 64, 80, 3, 3, 1)),
    "softmax": ("softmax N=1051 D=881", lambda: te_softmax(1051, 881)),
}


def host_cpu():
    return tvm.target.codegen.llvm_get_system_cpu()


def tune_tvm(name, trials, threads, workdir, seed):
    tensors, flop = WORKLOADS[name][1]()
    func = te.create_prim_func(tensors).with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": func})
    target = tvm.target.Target({"kind": "llvm", "mcpu": host_cpu(),
                                "num-cores": threads})
    t0 = time.time()
    db = ms.tune_tir(mod, target, workdir, max_trials_global=trials,
                     num_trials_per_iter=64, seed=seed,
                     num_tuning_cores=threads)
    seconds = time.time() - t0
    sch = ms.tir_integration.compile_tir(db, mod, target)
    lib = tvm.compile(sch.mod, target=target).jit()
    dev = tvm.cpu()
    rng = np.random.default_rng(seed)
    args = []
    for t in tensors:
        shape = [int(x) for x in t.shape]
        args.append(tvm.runtime.tensor(
            rng.standard_normal(shape).astype("float32"), dev))
    ev = lib.time_evaluator("main", dev, number=1, repeat=15,
                            min_repeat_ms=100)
    return flop, seconds, lambda: ev(*args).median


def tune_tessera(tessera, name, trials, threads, db, seed):
    spec = WORKLOADS[name][0]
    t0 = time.time()
    r = subprocess.run(
        [tessera, "tune", "--workload", spec, "--trials", str(trials),
         "--db", db, "--job", "cmp", "--threads", str(threads), "--seed",
         str(seed), "--quiet", "--no-summary-measure", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("tvm-compare: tessera tune failed: %s" % r.stderr[-2000:])
    seconds = time.time() - t0

    def timed():
        b = subprocess.run(
            [tessera, "bench", "--workload", spec, "--db", db, "--threads",
             str(threads), "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if b.returncode != 0:
            sys.exit("tvm-compare: tessera bench failed: %s" % b.stderr[-2000:])
        return json.loads(b.stdout)["tessera_gflops"]
    return seconds, timed


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tessera")
    ap.add_argument("--trials", default="200")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--dir", default="tvm-compare")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    names = a.workloads.split(",")
    for n in names:
        if n not in WORKLOADS:
            sys.exit("tvm-compare: unknown workload '%s' (have: %s)" %
                     (n, ", ".join(WORKLOADS)))
    os.makedirs(a.dir, exist_ok=True)
    rows = []
    for trials in [int(x) for x in a.trials.split(",")]:
        for name in names:
            tag = "%s-%d" % (name, trials)
            print("tvm-compare: %s, %d trials: tessera ..." % (name, trials),
                  file=sys.stderr, flush=True)
            db = os.path.join(a.dir, tag + ".db")
            if os.path.exists(db):
                os.remove(db)
            ts_s, ts_time = tune_tessera(a.tessera, name, trials, a.threads,
                                         db, a.seed)
            print("tvm-compare: %s, %d trials: TVM ..." % (name, trials),
                  file=sys.stderr, flush=True)
            flop, tvm_s, tvm_time = tune_tvm(
                name, trials, a.threads, os.path.join(a.dir, tag + "-tvm"),
                a.seed)
            mine, theirs, ratio = [], [], []
            for r in range(a.rounds):
                if r % 2 == 0:
                    g_tvm = flop / tvm_time() * 1e-9
                    g_ts = ts_time()
                else:
                    g_ts = ts_time()
                    g_tvm = flop / tvm_time() * 1e-9
                mine.append(g_ts)
                theirs.append(g_tvm)
                ratio.append(g_ts / g_tvm)
            row = {"workload": WORKLOADS[name][0], "trials": trials,
                   "threads": a.threads,
                   "tessera_gflops": statistics.median(mine),
                   "tvm_gflops": statistics.median(theirs),
                   "ratio": statistics.median(ratio),
                   "ratios": ratio,
                   "tessera_tune_seconds": ts_s, "tvm_tune_seconds": tvm_s}
            rows.append(row)
            print("%-55s %5d  tessera %7.1f  TVM %7.1f GFLOP/s  ratio %.2f  "
                  "tuning %5.0f s / %5.0f s" %
                  (row["workload"], trials, row["tessera_gflops"],
                   row["tvm_gflops"], row["ratio"], ts_s, tvm_s), flush=True)
    with open(os.path.join(a.dir, "tvm-compare.json"), "w") as f:
        json.dump({"tvm": tvm.__version__, "cpu": host_cpu(), "rows": rows},
                  f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
