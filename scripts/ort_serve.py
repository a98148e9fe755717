#!/usr/bin/env python3
"""onnxruntime as the baseline of `tessera bench --model`, driven over a pipe.

`tessera bench --model model.so --onnx MODEL.onnx` starts this script with
the project's virtual environment's Python (onnxruntime and numpy from
PyPI; scripts/install-deps.sh creates it) and times onnxruntime in rounds
interleaved with its own, so both run on the same machine state:

  ort_serve.py MODEL.onnx --threads K --inputs IN.npz --outputs OUT.npz

The session is made with K intra-op threads, one inter-op thread,
sequential execution and every graph optimization (onnxruntime as users
run it). It runs the model once on the arrays of IN.npz (matched to the
model's inputs by name), writes the outputs to OUT.npz, prints
`ready <version>` and then answers each line read on stdin:

  run N   ->  `time S`: the seconds of N back-to-back runs
  quit    ->  exits 0

A failure prints `error <message>` and exits 1. Without onnxruntime it
prints `error onnxruntime is not installed` and exits 77.
"""
import argparse
import sys
import time


def reply(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--outputs", required=True)
    args = ap.parse_args()
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError:
        reply("error onnxruntime is not installed")
        return 77
    try:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(args.model, opts, providers=["CPUExecutionProvider"])
        arrays = np.load(args.inputs)
        feeds = {}
        for inp in sess.get_inputs():
            if inp.name not in arrays.files:
                reply("error input '%s' is not in %s" % (inp.name, args.inputs))
                return 1
            feeds[inp.name] = arrays[inp.name]
        names = [o.name for o in sess.get_outputs()]
        outs = sess.run(names, feeds)
        np.savez(args.outputs, **dict(zip(names, outs)))
    except Exception as e:  # the message goes back to tessera
        reply("error " + str(e).replace("\n", " "))
        return 1
    reply("ready " + ort.__version__)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            return 0
        if words[0] != "run" or len(words) != 2 or not words[1].isdigit():
            reply("error unknown request '%s'" % line.strip())
            return 1
        n = int(words[1])
        t0 = time.perf_counter()
        for _ in range(n):
            sess.run(names, feeds)
        reply("time %.9f" % (time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
