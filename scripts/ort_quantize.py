#!/usr/bin/env python3
"""Writes onnxruntime's statically quantized version of a model, the
baseline of tessera's quantized compile (docs/quantization.md).

onnxruntime's `quantize_static` with the calibration samples tessera's
profile takes (`CALIB.npz`: per model input, N samples under a leading
axis): QDQ format, uint8 activations and int8 weights (the VNNI pairing),
weights per output channel, min/max calibration unless --calibration says
otherwise (minmax, percentile, entropy: onnxruntime's MinMax, Percentile,
Entropy). The model is pre-processed first (shape inference, graph
optimizations), as onnxruntime recommends.

Runs in the project's virtual environment (onnxruntime and onnx from PyPI):

  .venv/bin/python scripts/ort_quantize.py MODEL.onnx CALIB.npz OUT.onnx \\
      [--calibration minmax|percentile|entropy] [--per-tensor]
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod,
                                      QuantFormat, QuantType, quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process


class Samples(CalibrationDataReader):
    def __init__(self, path):
        z = np.load(path)
        self.names = list(z.files)
        self.arrays = {k: z[k] for k in self.names}
        n = {len(a) for a in self.arrays.values()}
        if len(n) != 1:
            sys.exit("ort_quantize: %s: arrays hold different sample counts" % path)
        self.n = n.pop()
        self.i = 0

    def get_next(self):
        if self.i == self.n:
            return None
        d = {k: a[self.i] for k, a in self.arrays.items()}
        self.i += 1
        return d

    def rewind(self):
        self.i = 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("calib")
    ap.add_argument("out")
    ap.add_argument("--calibration", default="minmax",
                    choices=["minmax", "percentile", "entropy"])
    ap.add_argument("--per-tensor", action="store_true")
    a = ap.parse_args()
    method = {"minmax": CalibrationMethod.MinMax,
              "percentile": CalibrationMethod.Percentile,
              "entropy": CalibrationMethod.Entropy}[a.calibration]
    with tempfile.TemporaryDirectory() as tmp:
        # weights in an external file (BERT) are inlined first: the
        # pre-processing step does not follow them
        whole = os.path.join(tmp, "whole.onnx")
        onnx.save_model(onnx.load(a.model), whole)
        pre = os.path.join(tmp, "pre.onnx")
        quant_pre_process(whole, pre, skip_symbolic_shape=True)
        quantize_static(pre, a.out, Samples(a.calib), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        per_channel=not a.per_tensor, calibrate_method=method)
    print(a.out)


if __name__ == "__main__":
    main()
