#!/usr/bin/python3
"""Writes ONNX models with random weights for tessera's graph tests and docs.

Models: ResNet-50, MobileNet-V2, BERT-base (12 layers, sequence 128, in the
style of a PyTorch export: Shape/Gather/Unsqueeze/Concat/Reshape chains,
layer normalisation spelled out as ReduceMean/Sub/Pow/Sqrt/Div, GELU as
Erf, symbolic batch and sequence dimensions, weights as external data) and
a CSRNet-like dilated-convolution network. `--small` writes reduced versions
of each (same operators and structure, a few layers and small widths) that
the tests run in seconds.

Needs numpy and the onnx package (Debian: python3-numpy, python3-onnx; onnx
1.12 writes opsets up to 17).

usage: gen_models.py --out DIR [--small] [--bad] [--models resnet50,bert,...] [--seed N]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


class Builder:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.inits = []
        self.count = 0

    def name(self, base):
        self.count += 1
        return "%s_%d" % (base, self.count)

    def const(self, base, array):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def weight(self, base, shape, fan_in):
        w = self.rng.standard_normal(shape).astype(np.float32)
        return self.const(base, w * np.float32(np.sqrt(1.0 / fan_in)))

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(
            helper.make_node(op_type, inputs, outs, name=self.name(op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    # -- layers --
    def conv(self, x, cin, cout, k, stride=1, pad=None, group=1, dilation=1,
             bias=False, auto_pad=None):
        w = self.weight("conv_w", (cout, cin // group, k, k), cin // group * k * k)
        ins = [x, w]
        if bias:
            ins.append(self.const("conv_b", self.rng.uniform(-0.1, 0.1, cout).astype(np.float32)))
        attrs = dict(kernel_shape=[k, k], strides=[stride, stride],
                     dilations=[dilation, dilation], group=group)
        if auto_pad:
            attrs["auto_pad"] = auto_pad
        else:
            p = (k // 2) * dilation if pad is None else pad
            attrs["pads"] = [p, p, p, p]
        return self.op("Conv", ins, **attrs)

    def bn(self, x, c):
        r = self.rng
        return self.op("BatchNormalization", [
            x,
            self.const("bn_scale", r.uniform(0.5, 1.0, c).astype(np.float32)),
            self.const("bn_bias", r.uniform(-0.1, 0.1, c).astype(np.float32)),
            self.const("bn_mean", r.uniform(-0.1, 0.1, c).astype(np.float32)),
            self.const("bn_var", r.uniform(0.5, 1.5, c).astype(np.float32)),
        ], epsilon=1e-5)

    def relu(self, x):
        return self.op("Relu", [x])

    def relu6(self, x):
        lo = self.const("clip_min", np.array(0.0, np.float32))
        hi = self.const("clip_max", np.array(6.0, np.float32))
        return self.op("Clip", [x, lo, hi])

    def linear(self, x, cin, cout):
        """A classifier as PyTorch exports nn.Linear on 2-D input: Gemm, transB."""
        w = self.weight("fc_w", (cout, cin), cin)
        b = self.const("fc_b", self.rng.uniform(-0.1, 0.1, cout).astype(np.float32))
        return self.op("Gemm", [x, w, b], alpha=1.0, beta=1.0, transB=1)


def save(model_graph, path, external=False, opset=OPSET):
    model = helper.make_model(model_graph, producer_name="tessera-gen_models",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    if external:
        loc = os.path.basename(path) + ".data"
        if os.path.exists(os.path.join(os.path.dirname(path), loc)):
            os.remove(os.path.join(os.path.dirname(path), loc))
        onnx.save_model(model, path, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=loc,
                        size_threshold=1024)
    else:
        onnx.save_model(model, path)


def tensor_input(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def resnet50(rng, small):
    b = Builder(rng)
    size, classes = (32, 10) if small else (224, 1000)
    blocks = [1, 1, 1, 1] if small else [3, 4, 6, 3]
    widths = [8, 16, 32, 64] if small else [64, 128, 256, 512]
    stem = widths[0]
    x = b.relu(b.bn(b.conv("data", 3, stem, 7, stride=2, pad=3), stem))
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = stem
    for stage, (n, w) in enumerate(zip(blocks, widths)):
        for i in range(n):
            stride = 2 if (i == 0 and stage > 0) else 1
            cout = w * 4
            y = b.relu(b.bn(b.conv(x, cin, w, 1), w))
            y = b.relu(b.bn(b.conv(y, w, w, 3, stride=stride), w))
            y = b.bn(b.conv(y, w, cout, 1), cout)
            if i == 0:
                sc = b.bn(b.conv(x, cin, cout, 1, stride=stride), cout)
            else:
                sc = x
            x = b.relu(b.op("Add", [y, sc]))
            cin = cout
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x], axis=1)
    out = b.linear(x, cin, classes)
    g = helper.make_graph(b.nodes, "resnet50", [tensor_input("data", TensorProto.FLOAT, [1, 3, size, size])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, classes])], b.inits)
    return g, False


def mobilenet_v2(rng, small):
    b = Builder(rng)
    size, classes = (32, 10) if small else (224, 1000)
    cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    div = 4 if small else 1
    first, last = 32 // div, 1280 // div
    x = b.relu6(b.bn(b.conv("input", 3, first, 3, stride=2), first))
    cin = first
    for t, c, n, s in cfg:
        c //= div
        for i in range(1 if small else n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = x
            if t != 1:
                y = b.relu6(b.bn(b.conv(y, cin, hidden, 1), hidden))
            y = b.relu6(b.bn(b.conv(y, hidden, hidden, 3, stride=stride, group=hidden), hidden))
            y = b.bn(b.conv(y, hidden, c, 1), c)
            if stride == 1 and cin == c:
                y = b.op("Add", [x, y])
            x = y
            cin = c
    x = b.relu6(b.bn(b.conv(x, cin, last, 1), last))
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x], axis=1)
    out = b.linear(x, last, classes)
    g = helper.make_graph(b.nodes, "mobilenet_v2", [tensor_input("input", TensorProto.FLOAT, [1, 3, size, size])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, classes])], b.inits)
    return g, False


def bert(rng, small):
    b = Builder(rng)
    layers, hidden, heads, ffn, vocab, max_pos = (
        (2, 64, 4, 128, 100, 32) if small else (12, 768, 12, 3072, 30522, 512))
    head = hidden // heads
    f32 = np.float32

    def i64(v):
        return b.const("c", np.array(v, np.int64))

    def layer_norm(x):
        # as PyTorch (opset < 17) spells nn.LayerNorm
        mean = b.op("ReduceMean", [x], axes=[-1], keepdims=1)
        d = b.op("Sub", [x, mean])
        var = b.op("ReduceMean", [b.op("Pow", [d, b.const("two", np.array(2.0, f32))])], axes=[-1], keepdims=1)
        std = b.op("Sqrt", [b.op("Add", [var, b.const("eps", np.array(1e-12, f32))])])
        y = b.op("Div", [d, std])
        y = b.op("Mul", [y, b.const("ln_g", rng.uniform(0.8, 1.2, hidden).astype(f32))])
        return b.op("Add", [y, b.const("ln_b", rng.uniform(-0.1, 0.1, hidden).astype(f32))])

    def dense(x, cin, cout):
        y = b.op("MatMul", [x, b.weight("w", (cin, cout), cin)])
        return b.op("Add", [b.const("b", rng.uniform(-0.1, 0.1, cout).astype(f32)), y])

    def dims(x):
        """batch and sequence of x as 1-element tensors, the export's way."""
        s = b.op("Shape", [x])
        bt = b.op("Unsqueeze", [b.op("Gather", [s, i64(0)], axis=0), i64([0])])
        sq = b.op("Unsqueeze", [b.op("Gather", [s, i64(1)], axis=0), i64([0])])
        return bt, sq

    def split_heads(x, perm):
        bt, sq = dims(x)
        shape = b.op("Concat", [bt, sq, i64([heads]), i64([head])], axis=0)
        return b.op("Transpose", [b.op("Reshape", [x, shape])], perm=perm)

    ids, mask = "input_ids", "attention_mask"
    word = b.weight("word_emb", (vocab, hidden), 1)
    pos_table = b.weight("pos_emb", (max_pos, hidden), 1)
    type_row = b.weight("type_emb", (1, hidden), 1)
    x = b.op("Gather", [word, ids], axis=0)
    _, sq = dims(x)
    pos = b.op("Slice", [pos_table, i64([0]), sq, i64([0])])
    x = b.op("Add", [b.op("Add", [x, pos]), type_row])
    x = layer_norm(x)
    m = b.op("Cast", [b.op("Unsqueeze", [mask, i64([1, 2])])], to=TensorProto.FLOAT)
    m = b.op("Mul", [b.op("Sub", [b.const("one", np.array(1.0, f32)), m]),
                     b.const("neg", np.array(-10000.0, f32))])
    for _ in range(layers):
        q = split_heads(dense(x, hidden, hidden), [0, 2, 1, 3])
        k = split_heads(dense(x, hidden, hidden), [0, 2, 3, 1])
        v = split_heads(dense(x, hidden, hidden), [0, 2, 1, 3])
        s = b.op("Div", [b.op("MatMul", [q, k]), b.const("scale", np.array(np.sqrt(head), f32))])
        p = b.op("Softmax", [b.op("Add", [s, m])], axis=-1)
        c = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        bt, sq = dims(x)
        c = b.op("Reshape", [c, b.op("Concat", [bt, sq, i64([hidden])], axis=0)])
        a = b.op("Dropout", [dense(c, hidden, hidden)])
        x = layer_norm(b.op("Add", [a, x]))
        h = dense(x, hidden, ffn)
        gelu = b.op("Mul", [b.op("Mul", [h, b.op("Add", [
            b.op("Erf", [b.op("Div", [h, b.const("sqrt2", np.array(1.4142135, f32))])]),
            b.const("one", np.array(1.0, f32))])]), b.const("half", np.array(0.5, f32))])
        x = layer_norm(b.op("Add", [dense(gelu, ffn, hidden), x]))
    first = b.op("Gather", [x, i64(0)], axis=1)
    pooled = b.op("Tanh", [b.linear(first, hidden, hidden)])
    out_x = b.op("Identity", [x])
    g = helper.make_graph(
        b.nodes, "bert",
        [tensor_input(ids, TensorProto.INT64, ["batch", "sequence"]),
         tensor_input(mask, TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info(out_x, TensorProto.FLOAT, ["batch", "sequence", hidden]),
         helper.make_tensor_value_info(pooled, TensorProto.FLOAT, ["batch", hidden])],
        b.inits)
    return g, True


def csrnet(rng, small):
    b = Builder(rng)
    size = 32 if small else 224
    div = 8 if small else 1
    front = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512]
    back = [512, 512, 512, 256, 128, 64]
    if small:
        front = [64, "M", 128, "M", 256, "M", 512]
        back = [512, 256, 64]
    x, cin = "image", 3
    first = True
    for v in front:
        if v == "M":
            x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
            continue
        c = v // div
        # the first conv states its padding as SAME_UPPER, the rest explicitly
        x = b.relu(b.conv(x, cin, c, 3, bias=True, auto_pad="SAME_UPPER" if first else None))
        first = False
        cin = c
    for v in back:
        c = v // div
        x = b.relu(b.conv(x, cin, c, 3, dilation=2, bias=True))
        cin = c
    x = b.conv(x, cin, 1, 1, bias=True)
    w = b.weight("up_w", (1, 1, 4, 4), 16)
    x = b.op("ConvTranspose", [x, w], kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1])
    x = b.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
             count_include_pad=0)
    out_hw = size // 8 * 2
    g = helper.make_graph(b.nodes, "csrnet", [tensor_input("image", TensorProto.FLOAT, [1, 3, size, size])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 1, out_hw, out_hw])], b.inits)
    return g, False


def bad_models(out):
    """Small malformed models for the importer's error tests."""
    f32 = TensorProto.FLOAT
    x = tensor_input("x", f32, [1, 4])
    y = helper.make_tensor_value_info("y", f32, [1, 4])
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")

    def model(nodes, inputs=(x,), inits=(w,), opset=OPSET, name="bad"):
        g = helper.make_graph(list(nodes), name, list(inputs), [y], list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m

    def write(m, fname):
        path = os.path.join(out, fname)
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        print(path)

    mm = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    write(model([helper.make_node("FooBar", ["x"], ["y"], name="mystery")]), "unknown_op.onnx")
    write(model([mm], opset=12), "opset12.onnx")
    write(model([mm], opset=22), "opset22.onnx")
    w3 = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    write(model([mm], inits=(w3,)), "bad_shapes.onnx")
    dyn = tensor_input("x", f32, ["batch", 4])
    write(model([mm], inputs=(dyn,)), "dynamic.onnx")
    huge = TensorProto(name="w", data_type=f32, dims=[1 << 30, 1 << 30])
    write(model([mm], inits=(huge,)), "absurd.onnx")
    short = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    short.raw_data = short.raw_data[:20]
    write(model([mm], inits=(short,)), "short_raw.onnx")
    ext = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "missing.bin"), ("offset", "0"), ("length", "64")):
        e = ext.external_data.add()
        e.key, e.value = k, v
    write(model([mm], inits=(ext,)), "missing_external.onnx")
    esc = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    esc.ClearField("raw_data")
    esc.data_location = TensorProto.EXTERNAL
    e = esc.external_data.add()
    e.key, e.value = "location", "../../etc/passwd"
    write(model([mm], inits=(esc,)), "escaping_external.onnx")
    good = model([mm])
    data = good.SerializeToString()
    write(good, "good.onnx")
    path = os.path.join(out, "truncated.onnx")
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    print(path)
    path = os.path.join(out, "corrupt.onnx")
    with open(path, "wb") as f:
        f.write(bytes([0xFF] * 8) + data[8:])
    print(path)


def ops(rng, small):
    """One of each operator the four networks do not use, at opset 17:
    LayerNormalization, Softmax on a middle axis, MaxPool and AveragePool
    with ceil_mode / count_include_pad, a grouped, dilated ConvTranspose with
    asymmetric pads and output_padding, Slice with a negative step, Squeeze,
    Transpose, Sigmoid, Tanh, Exp, Neg, ReduceSum, ReduceMax, Concat; and on
    an int64 input, Gather (int32/int64, negative and scalar indices), Cast
    (float32, float16, int32, int64, bool) and an integer Transpose."""
    b = Builder(rng)
    f32 = np.float32

    def i64(v):
        return b.const("c", np.array(v, np.int64))

    x = "x"
    a = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    c = b.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
             count_include_pad=1)
    y = b.op("Concat", [a, c], axis=1)                                  # [1, 8, 5, 5]
    ct = b.op("ConvTranspose", [y, b.weight("ct_w", (8, 2, 3, 3), 18),
                                b.const("ct_b", rng.uniform(-0.1, 0.1, 4).astype(f32))],
              group=2, strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 1],
              dilations=[1, 2])                                       # [1, 4, 11, 13]
    ct = b.op("Relu", [ct])
    y = b.op("Sigmoid", [b.conv(y, 8, 8, 3, stride=1, group=2, bias=True)])
    y = b.op("Softmax", [y], axis=1)
    t = b.op("Transpose", [y], perm=[0, 2, 3, 1])                      # [1, 5, 5, 8]
    t = b.op("LayerNormalization", [t, b.const("g", rng.uniform(0.5, 1.5, 8).astype(f32)),
                                     b.const("bb", rng.uniform(-0.5, 0.5, 8).astype(f32))],
             axis=-1, epsilon=1e-5)
    t = b.op("Slice", [t, i64([4]), i64([-10]), i64([2]), i64([-2])])  # [1, 5, 3, 8]
    s = b.op("ReduceSum", [b.op("Exp", [b.op("Neg", [t])]), i64([3])], keepdims=1)
    m = b.op("ReduceMax", [b.op("Tanh", [t])], axes=[1], keepdims=0)   # [1, 3, 8]
    s = b.op("Squeeze", [s, i64([3])])                                 # [1, 5, 3]
    out = b.op("MatMul", [s, m])                                       # [1, 5, 8]
    # data movement on an integer input: gathers (int32 and int64 indices,
    # negative ones, a scalar index), casts between float32, float16, int32,
    # int64 and bool, an integer transpose, a three-way Concat, a Slice
    ids = "ids"                                                        # int64 [2, 3] in [0, 100)
    table = b.const("table", rng.uniform(-2, 2, (100, 8)).astype(f32))
    e = b.op("Gather", [table, b.op("Cast", [ids], to=TensorProto.INT32)])  # [2, 3, 8]
    e = b.op("Gather", [e, i64([-1, 0, 2])], axis=1)                   # [2, 3, 8]
    h = b.op("Cast", [b.op("Cast", [e], to=TensorProto.FLOAT16)], to=TensorProto.FLOAT)
    k = b.op("Cast", [b.op("Mul", [e, b.const("ten", np.array(10, f32))])], to=TensorProto.INT32)
    k = b.op("Cast", [k], to=TensorProto.FLOAT)
    cc = b.op("Concat", [h, k, e], axis=2)                              # [2, 3, 24]
    cc = b.op("Slice", [cc, i64([20]), i64([-100]), i64([-1]), i64([-3])])  # [2, 3, 7]
    tid = b.op("Cast", [b.op("Transpose", [ids], perm=[1, 0])], to=TensorProto.FLOAT)  # [3, 2]
    big = b.op("Cast", [b.op("Mul", [tid, b.const("inv64", np.array(1 / 64, f32))])],
               to=TensorProto.INT32)                                  # 1 from 64 on
    mask = b.op("Cast", [b.op("Cast", [big], to=TensorProto.BOOL)], to=TensorProto.FLOAT)
    mask = b.op("Mul", [b.op("Sub", [b.const("one", np.array(1, f32)), mask]),
                        b.const("big", np.array(-100, f32))])          # [3, 2]
    row = b.op("Gather", [e, b.const("c", np.array(1, np.int64))], axis=0)  # [3, 8]
    g = helper.make_graph(b.nodes, "ops", [tensor_input("x", TensorProto.FLOAT, [1, 4, 10, 10]),
                                           tensor_input("ids", TensorProto.INT64, [2, 3])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 5, 8]),
                           helper.make_tensor_value_info(ct, TensorProto.FLOAT, [1, 4, 11, 13]),
                           helper.make_tensor_value_info(cc, TensorProto.FLOAT, [2, 3, 7]),
                           helper.make_tensor_value_info(mask, TensorProto.FLOAT, [3, 2]),
                           helper.make_tensor_value_info(row, TensorProto.FLOAT, [3, 8])],
                          b.inits)
    return g, False


MODELS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2, "bert": bert, "csrnet": csrnet,
          "ops": ops}
OPSETS = {"ops": 17}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder to write the models to")
    ap.add_argument("--small", action="store_true", help="the small test versions")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bad", action="store_true",
                    help="also write small malformed models (error tests)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.bad:
        bad_models(args.out)
    for name in args.models.split(","):
        if name not in MODELS:
            sys.exit("gen_models: unknown model '%s' (have %s)" % (name, ", ".join(MODELS)))
        rng = np.random.RandomState(args.seed)
        graph, external = MODELS[name](rng, args.small)
        path = os.path.join(args.out, name + ("_small" if args.small else "") + ".onnx")
        save(graph, path, external, OPSETS.get(name, OPSET))
        print(path)


if __name__ == "__main__":
    main()
