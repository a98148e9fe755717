#!/usr/bin/python3
"""Writes ONNX models with random weights for tessera's graph tests and docs.

Models: ResNet-50, ResNet-18 and MobileNet-V2, BERT-base (12 layers, sequence 128, in the
style of a PyTorch export: Shape/Gather/Unsqueeze/Concat/Reshape chains,
layer normalisation spelled out as ReduceMean/Sub/Pow/Sqrt/Div, GELU as
Erf, symbolic batch and sequence dimensions, weights as external data) and
a CSRNet-like dilated-convolution network; `bert_layer` is BERT-base with
one encoder layer, and it and ResNet-18 are written only when asked for
(`--models resnet18,bert_layer`); `unet` is a U-Net-like network of
unpadded ("valid") convolutions; `ops`, `ops2` and `ops3` are operator
test models (opsets 17, 13 and 18); `yolo` (YOLOv8n-like detector),
`mobilenet_v3` (MobileNetV3-Small-like) and `gpt2` (a 4-layer GPT-2-like
decoder), all opset 17, are written only when asked for (the two CNNs' batch-norm
statistics are drawn around those of a random input, evaluated in numpy
as the graph is built). `--small` writes reduced versions
of each (same operators and structure, a few layers and small widths) that
the tests run in seconds.

Needs numpy and the onnx package (Debian: python3-numpy, python3-onnx; onnx
1.12 checks opsets up to 17: a model of a newer opset is written
unchecked); the digits CNN needs scikit-learn's data set
(python3-sklearn).

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

    def __init__(self, rng, values=None):
        self.rng = rng
        self.nodes = []
        self.inits = []
        self.count = 0
        # when given (the graph inputs' sample values), every node is
        # evaluated in numpy as it is added (_evaluate) and batch
        # normalizations take their statistics from what they see
        self.values = values

    def name(self, base):
        self.count += 1
        return "%s_%d" % (base, self.count)

    def const(self, base, array):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        if self.values is not None:
            self.values[n] = np.asarray(array)
        return n

    def i64(self, v):
        return self.const("c", np.array(v, np.int64))

    def f32(self, v):
        return self.const("c", np.array(v, np.float32))

    def weight(self, base, shape, fan_in):
        w = self.rng.standard_normal(shape).astype(np.float32)
        return self.const(base, w * np.float32(np.sqrt(1.0 / fan_in)))

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(
            helper.make_node(op_type, inputs, outs, name=self.name(op_type), **attrs))
        if self.values is not None:
            _evaluate(self.nodes[-1], self.values)
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
        """Batch normalization with random statistics; when evaluating,
        drawn around x's own per-channel mean and variance (as a trained
        network's running statistics are), so that activations stay O(1)
        however deep the network."""
        r = self.rng
        mean, var = 0.0, 1.0
        if self.values is not None:
            v = self.values[x].astype(np.float64)
            axes = (0,) + tuple(range(2, v.ndim))
            mean, var = v.mean(axis=axes), v.var(axis=axes)
            var = np.maximum(var, 1e-2 * var.mean() + 1e-12)
        return self.op("BatchNormalization", [
            x,
            self.const("bn_scale", r.uniform(0.5, 1.0, c).astype(np.float32)),
            self.const("bn_bias", r.uniform(-0.1, 0.1, c).astype(np.float32)),
            self.const("bn_mean", (mean + r.uniform(-0.1, 0.1, c) * np.sqrt(var)).astype(np.float32)),
            self.const("bn_var", (r.uniform(0.5, 1.5, c) * var).astype(np.float32)),
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


def _conv2d(x, w, bias, stride, pads, group, dil):
    """Conv in numpy (NCHW, square kernels): k*k shifted matrix products."""
    n, cin = x.shape[:2]
    cout, cpg, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (xp.shape[2] - dil * (k - 1) - 1) // stride + 1
    ow = (xp.shape[3] - dil * (k - 1) - 1) // stride + 1
    out = np.zeros((n, cout, oh, ow), np.float32)
    for i in range(k):
        for j in range(k):
            xs = xp[:, :, i * dil:i * dil + stride * (oh - 1) + 1:stride,
                    j * dil:j * dil + stride * (ow - 1) + 1:stride]
            if group == 1:
                out += np.einsum("oc,nchw->nohw", w[:, :, i, j], xs, optimize=True)
            elif cpg == 1 and cout == cin:
                out += w[None, :, 0, i, j, None, None] * xs
            else:
                co = cout // group
                for g in range(group):
                    out[:, g * co:(g + 1) * co] += np.einsum(
                        "oc,nchw->nohw", w[g * co:(g + 1) * co, :, i, j],
                        xs[:, g * cpg:(g + 1) * cpg], optimize=True)
    if bias is not None:
        out += bias[None, :, None, None]
    return out


def _evaluate(node, values):
    """Evaluates one node in numpy (the operators the calibrated networks
    use), storing its outputs in values."""
    a = {t.name: helper.get_attribute_value(t) for t in node.attribute}
    x = [values[i] if i else None for i in node.input]
    op = node.op_type
    if op == "Conv":
        s, d = a.get("strides", [1, 1]), a.get("dilations", [1, 1])
        y = _conv2d(x[0], x[1], x[2] if len(x) > 2 else None, s[0], a.get("pads", [0] * 4),
                    a.get("group", 1), d[0])
    elif op == "BatchNormalization":
        sh = (1, -1) + (1,) * (x[0].ndim - 2)
        y = ((x[0] - x[3].reshape(sh)) / np.sqrt(x[4].reshape(sh) + a.get("epsilon", 1e-5))
             * x[1].reshape(sh) + x[2].reshape(sh))
    elif op == "Sigmoid":
        y = 1 / (1 + np.exp(-x[0]))
    elif op == "Relu":
        y = np.maximum(x[0], 0)
    elif op == "HardSigmoid":
        y = np.clip(a.get("alpha", 0.2) * x[0] + a.get("beta", 0.5), 0, 1)
    elif op == "HardSwish":
        y = x[0] * np.clip(x[0] / 6 + 0.5, 0, 1)
    elif op in ("Add", "Mul"):
        y = x[0] + x[1] if op == "Add" else x[0] * x[1]
    elif op == "Concat":
        y = np.concatenate(x, axis=a["axis"])
    elif op == "Split":
        ys = np.split(x[0], np.cumsum(x[1])[:-1], axis=a.get("axis", 0))
        for name, v in zip(node.output, ys):
            values[name] = v.astype(np.float32)
        return
    elif op == "MaxPool":
        k, s, p = a["kernel_shape"][0], a.get("strides", [1, 1])[0], a.get("pads", [0] * 4)
        xp = np.pad(x[0], ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])), constant_values=-np.inf)
        oh, ow = (xp.shape[2] - k) // s + 1, (xp.shape[3] - k) // s + 1
        y = np.max([xp[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]
                    for i in range(k) for j in range(k)], axis=0)
    elif op == "Resize":  # nearest, integer scales (asymmetric, floor)
        y = x[0]
        for ax, sc in enumerate(x[2]):
            y = np.repeat(y, int(sc), axis=ax)
    elif op == "GlobalAveragePool":
        y = x[0].mean(axis=(2, 3), keepdims=True)
    elif op == "Flatten":
        y = x[0].reshape(x[0].shape[0], -1)
    elif op == "Gemm":
        y = x[0] @ (x[1].T if a.get("transB") else x[1]) + x[2]
    elif op == "Reshape":
        y = x[0].reshape(x[1])
    elif op == "Transpose":
        y = np.transpose(x[0], a["perm"])
    elif op == "AveragePool":  # non-overlapping windows, no padding
        k = a["kernel_shape"][0]
        n, c, h, w = x[0].shape
        y = x[0][:, :, :h // k * k, :w // k * k].reshape(n, c, h // k, k, w // k, k).mean(axis=(3, 5))
    elif op == "LogSoftmax":
        d = x[0] - x[0].max(axis=a.get("axis", -1), keepdims=True)
        y = d - np.log(np.exp(d).sum(axis=a.get("axis", -1), keepdims=True))
    else:
        raise NotImplementedError("gen_models: no numpy %s" % op)
    values[node.output[0]] = np.asarray(y, np.float32)


def save(model_graph, path, external=False, opset=OPSET):
    model = helper.make_model(model_graph, producer_name="tessera-gen_models",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    # an onnx package older than the opset (Debian's 1.12 knows opsets up to
    # 17) lacks its operators' schemas (ops3 is opset 18): written unchecked
    if opset <= onnx.defs.onnx_opset_version():
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


def resnet_stem(b, width):
    """7x7 stride-2 conv, batch norm, relu and 3x3 stride-2 max pool."""
    x = b.relu(b.bn(b.conv("data", 3, width, 7, stride=2, pad=3), width))
    return b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])


def resnet_head(b, x, cin, classes, name, size):
    """Global average pool, flatten and the classifier; the whole graph."""
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x], axis=1)
    out = b.linear(x, cin, classes)
    return helper.make_graph(b.nodes, name, [tensor_input("data", TensorProto.FLOAT, [1, 3, size, size])],
                             [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, classes])], b.inits)


def resnet50(rng, small):
    b = Builder(rng)
    size, classes = (32, 10) if small else (224, 1000)
    blocks = [1, 1, 1, 1] if small else [3, 4, 6, 3]
    widths = [8, 16, 32, 64] if small else [64, 128, 256, 512]
    stem = widths[0]
    x = resnet_stem(b, stem)
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
    return resnet_head(b, x, cin, classes, "resnet50", size), False


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


def bert(rng, small, n_layers=None):
    b = Builder(rng)
    layers, hidden, heads, ffn, vocab, max_pos = (
        (2, 64, 4, 128, 100, 32) if small else (12, 768, 12, 3072, 30522, 512))
    if n_layers:
        layers = n_layers
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


def bert_layer(rng, small):
    """BERT-base with one encoder layer (embeddings and pooler included)."""
    g, external = bert(rng, small, n_layers=1)
    g.name = "bert_layer"
    return g, external


def resnet18(rng, small):
    b = Builder(rng)
    size, classes = (32, 10) if small else (224, 1000)
    widths = [8, 16, 32, 64] if small else [64, 128, 256, 512]
    x = resnet_stem(b, widths[0])
    cin = widths[0]
    for stage, w in enumerate(widths):
        for i in range(2):
            stride = 2 if (i == 0 and stage > 0) else 1
            y = b.relu(b.bn(b.conv(x, cin, w, 3, stride=stride), w))
            y = b.bn(b.conv(y, w, w, 3), w)
            sc = b.bn(b.conv(x, cin, w, 1, stride=stride), w) if (stride != 1 or cin != w) else x
            x = b.relu(b.op("Add", [y, sc]))
            cin = w
    return resnet_head(b, x, cin, classes, "resnet18", size), False


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


def unet(rng, small):
    """A U-Net-like network with "valid" 3x3 convolutions (no padding), as
    the original U-Net: two levels, a transposed-conv upsampling, the skip
    connection cropped and concatenated, a 1x1 classifier."""
    b = Builder(rng)
    size = 44 if small else 188
    w1, w2 = (8, 16) if small else (64, 128)

    def double(x, cin, cout):
        x = b.relu(b.conv(x, cin, cout, 3, pad=0, bias=True))
        return b.relu(b.conv(x, cout, cout, 3, pad=0, bias=True))

    skip = double("image", 3, w1)                       # size - 4
    x = b.op("MaxPool", [skip], kernel_shape=[2, 2], strides=[2, 2])
    x = double(x, w1, w2)                               # (size - 4) / 2 - 4
    up_w = b.weight("up_w", (w2, w1, 2, 2), w2 * 4)
    x = b.op("ConvTranspose", [x, up_w], kernel_shape=[2, 2], strides=[2, 2])
    low = ((size - 4) // 2 - 4) * 2
    off = (size - 4 - low) // 2
    crop = b.op("Slice", [skip, b.const("crop_start", np.array([off, off], np.int64)),
                          b.const("crop_end", np.array([off + low, off + low], np.int64)),
                          b.const("crop_axes", np.array([2, 3], np.int64))])
    x = b.op("Concat", [crop, x], axis=1)
    x = double(x, 2 * w1, w1)                           # low - 4
    x = b.conv(x, w1, 2, 1, pad=0, bias=True)
    out_hw = low - 4
    g = helper.make_graph(b.nodes, "unet", [tensor_input("image", TensorProto.FLOAT, [1, 3, size, size])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 2, out_hw, out_hw])],
                          b.inits)
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
    write(model([mm], opset=6), "opset6.onnx")
    write(model([mm], opset=22), "opset22.onnx")
    w3 = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    write(model([mm], inits=(w3,)), "bad_shapes.onnx")
    dyn = tensor_input("x", f32, ["batch", 4])
    write(model([mm], inputs=(dyn,)), "dynamic.onnx")
    # symbolic shapes: a CNN with a dynamic batch, and a strided conv over a
    # dynamic height (whose output height no polynomial gives)
    rng = np.random.RandomState(0)
    wc = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "wc")
    wd = numpy_helper.from_array(rng.standard_normal((256, 10)).astype(np.float32), "wd")
    cnn = helper.make_graph(
        [helper.make_node("Conv", ["x", "wc"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Flatten", ["r"], ["f"]),
         helper.make_node("MatMul", ["f", "wd"], ["y"])],
        "dyn_cnn", [tensor_input("x", f32, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", f32, ["batch", 10])], [wc, wd])
    m = helper.make_model(cnn, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    write(m, "dyn_cnn.onnx")
    strided = helper.make_graph(
        [helper.make_node("Conv", ["x", "wc"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3],
                          strides=[2, 2])],
        "dyn_strided", [tensor_input("x", f32, [1, 3, "height", 16])],
        [helper.make_tensor_value_info("y", f32, [1, 4, "out_height", 8])], [wc])
    m = helper.make_model(strided, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    write(m, "dyn_strided.onnx")
    # padded dynamic sizes: reductions and a softmax along a dynamic
    # sequence (masked), and a concat along it (refused)
    wq = numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "wq")
    seq = helper.make_graph(
        [helper.make_node("MatMul", ["x", "wq"], ["h"]),
         helper.make_node("ReduceMean", ["h"], ["mean"], axes=[1], keepdims=1),
         helper.make_node("ReduceMax", ["x"], ["max"], axes=[1], keepdims=0),
         helper.make_node("Softmax", ["h"], ["p"], axis=1),
         helper.make_node("Sub", ["h", "mean"], ["y"])],
        "dyn_seq", [tensor_input("x", f32, [1, "seq", 8])],
        [helper.make_tensor_value_info("y", f32, [1, "seq", 8]),
         helper.make_tensor_value_info("max", f32, [1, 8]),
         helper.make_tensor_value_info("p", f32, [1, "seq", 8])], [wq])
    m = helper.make_model(seq, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    write(m, "dyn_seq.onnx")
    cat = helper.make_graph(
        [helper.make_node("Concat", ["x", "x"], ["y"], axis=1)],
        "dyn_concat", [tensor_input("x", f32, [1, "seq", 8])],
        [helper.make_tensor_value_info("y", f32, [1, "seq2", 8])])
    m = helper.make_model(cat, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    write(m, "dyn_concat.onnx")
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


def _rename_outputs(b, outs):
    """Gives the graph outputs readable names: outs is [(tensor, name, shape)];
    returns their value infos (float)."""
    names = {t: n for t, n, _ in outs}
    for node in b.nodes:
        for i, o in enumerate(node.output):
            if o in names:
                node.output[i] = names[o]
        for i, o in enumerate(node.input):
            if o in names:
                node.input[i] = names[o]
    return [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for _, n, shape in outs]


def ops2(rng, small):
    """More operators, at opset 13, on x [1, 8, 6, 6] and v [2, 3, 10]:
    elementwise LeakyRelu (alpha 0.1), PRelu (slope [8, 1, 1]), HardSigmoid
    (alpha 0.25, beta 0.4), Elu (alpha 0.7), Selu, Celu (alpha 1.3),
    Softplus, Softsign, Log and Reciprocal (of Abs(x) + 0.5), Floor, Ceil,
    Round, Sign (of x * 7.3 + 0.1), Sin, Cos, ThresholdedRelu (alpha 0.2),
    Not; Min, Max and Sum of three inputs (one broadcast [8, 1, 1]), Mean of
    two, Equal (x against its transpose; Floor against Round), Less, Greater,
    LessOrEqual, GreaterOrEqual, And, Or, Xor, Where (a [1, 1, 6, 1]
    condition), Cast bool to float; Split (axis 1, split input [2, 6]; axis
    2, two equal parts, no split input), Expand ([1, 8, 1, 6] to
    [2, 8, 5, 6]), Tile ([1, 2, 1, 3]), DepthToSpace (blocksize 2, DCR and
    CRD), SpaceToDepth (blocksize 2), InstanceNormalization (epsilon 1e-5),
    Pad (constant 0.5 with a negative pad, reflect, edge; pads and
    constant_value as inputs), ConstantOfShape (1.5), Range (float -0.5,
    1.0, 0.25); ReduceMin, ReduceL1, ReduceL2, ReduceSumSquare,
    ReduceLogSumExp (axes attribute, keepdims 0, 1 and absent); Resize
    with roi, scales and sizes inputs: nearest asymmetric floor (scales
    [1, 1, 2, 2]), nearest half_pixel round_prefer_floor (sizes
    [1, 8, 9, 15]: 3 rows and 3 columns fall exactly on a tie at .5, as
    (i + 0.5) / 1.5 - 0.5 and / 2.5 compute exactly), linear half_pixel
    (scales), linear align_corners (sizes [1, 8, 11, 4]), linear
    pytorch_half_pixel (sizes [1, 8, 3, 13], scales given as ""), cubic
    (a -0.75) half_pixel (scales). Helpers: Abs, Add, Mul, Transpose,
    Slice, Reshape, Concat. (Trilu is from opset 14: in ops3.)"""
    b = Builder(rng)
    f32 = np.float32
    i64, f = b.i64, b.f32

    def tofloat(t):
        return b.op("Cast", [t], to=TensorProto.FLOAT)

    x, v = "x", "v"
    # unary activations; x * 3 reaches both clips of HardSigmoid
    x3 = b.op("Mul", [x, f(3.0)])
    act = b.op("Concat", [
        b.op("LeakyRelu", [x], alpha=0.1),
        b.op("PRelu", [x, b.const("slope", rng.uniform(0.05, 0.5, (8, 1, 1)).astype(f32))]),
        b.op("HardSigmoid", [x3], alpha=0.25, beta=0.4),
        b.op("Elu", [x3], alpha=0.7),
        b.op("Selu", [x]),
        b.op("Celu", [x3], alpha=1.3),
        b.op("Softplus", [x3]),
        b.op("Softsign", [x3])], axis=1)                                # [1, 64, 6, 6]
    pos = b.op("Add", [b.op("Abs", [x]), f(0.5)])                         # in [0.5, 1.5]
    positive = b.op("Greater", [x, f(0.0)])
    math = b.op("Concat", [
        b.op("Log", [pos]),
        b.op("Reciprocal", [pos]),
        b.op("Sin", [x3]),
        b.op("Cos", [x3]),
        b.op("ThresholdedRelu", [x], alpha=0.2),
        tofloat(b.op("Not", [positive]))], axis=1)                       # [1, 48, 6, 6]
    # scaled so that no value is near a tie at .5 or an integer
    sc = b.op("Add", [b.op("Mul", [x, f(7.3)]), f(0.1)])
    floor, rnd = b.op("Floor", [sc]), b.op("Round", [sc])
    rounding = b.op("Concat", [floor, b.op("Ceil", [sc]), rnd, b.op("Sign", [sc])],
                    axis=1)                                              # [1, 32, 6, 6]
    # variadic and comparisons: p is x transposed (equal on the diagonal),
    # q a broadcast constant; every comparison is of exact input values
    p = b.op("Transpose", [x], perm=[0, 1, 3, 2])
    q = b.const("q", rng.uniform(-0.5, 0.5, (8, 1, 1)).astype(f32))
    cond = b.op("Greater", [b.op("Slice", [x, i64([0, 0]), i64([1, 1]), i64([1, 3])]),
                            f(0.0)])                                     # [1, 1, 6, 1]
    arith = b.op("Concat", [
        b.op("Min", [x, p, q]),
        b.op("Max", [x, p, q]),
        b.op("Sum", [x, p, q]),
        b.op("Mean", [x, p]),
        b.op("Where", [cond, x, p])], axis=1)                            # [1, 40, 6, 6]
    lt = b.op("Less", [x, p])
    gt = b.op("Greater", [x, q])
    le = b.op("LessOrEqual", [x, p])
    ge = b.op("GreaterOrEqual", [x, p])
    cmp = b.op("Concat", [tofloat(t) for t in (
        b.op("Equal", [x, p]),
        b.op("Equal", [floor, rnd]),
        lt, gt, le, ge,
        b.op("And", [lt, gt]),
        b.op("Or", [le, gt]),
        b.op("Xor", [ge, gt]))], axis=1)                                 # [1, 72, 6, 6]
    # data movement
    s1, s2 = b.op("Split", [x, i64([2, 6])], n_out=2, axis=1)
    h1, h2 = b.op("Split", [x], n_out=2, axis=2)
    split = b.op("Concat", [b.op("Concat", [s2, s1], axis=1),
                            b.op("Concat", [h2, h1], axis=2)], axis=1)   # [1, 16, 6, 6]
    row = b.op("Slice", [x, i64([2]), i64([3]), i64([2])])              # [1, 8, 1, 6]
    expand = b.op("Expand", [row, i64([2, 8, 5, 6])])
    tile = b.op("Tile", [x, i64([1, 2, 1, 3])])                         # [1, 16, 6, 18]
    d2s = b.op("Concat", [b.op("DepthToSpace", [x], blocksize=2, mode="DCR"),
                          b.op("DepthToSpace", [x], blocksize=2, mode="CRD")],
               axis=1)                                                   # [1, 4, 12, 12]
    s2d = b.op("SpaceToDepth", [x], blocksize=2)                         # [1, 32, 3, 3]
    inorm = b.op("InstanceNormalization", [
        x, b.const("in_scale", rng.uniform(0.5, 1.5, 8).astype(f32)),
        b.const("in_b", rng.uniform(-0.5, 0.5, 8).astype(f32))], epsilon=1e-5)
    ones = b.op("ConstantOfShape", [i64([1, 8, 1, 1])],
                value=helper.make_tensor("value", TensorProto.FLOAT, [1], [1.5]))
    ramp = b.op("Range", [f(-0.5), f(1.0), f(0.25)])                     # [6], exact count
    gen = b.op("Add", [b.op("Add", [x, ones]), ramp])
    norm = b.op("Concat", [inorm, gen], axis=1)                          # [1, 16, 6, 6]
    padc = b.op("Pad", [x, i64([0, 0, 1, -1, 0, 0, 2, 1]), f(0.5)],
                mode="constant")                                         # [1, 8, 9, 6]
    pads = i64([0, 0, 1, 2, 0, 0, 2, 1])
    padre = b.op("Concat", [b.op("Pad", [x, pads], mode="reflect"),
                            b.op("Pad", [x, pads], mode="edge")], axis=1)  # [1, 16, 9, 9]
    # reductions with the axes attribute
    reds = [b.op("ReduceMin", [v], axes=[2], keepdims=0),                # [2, 3]
            b.op("ReduceMin", [v], axes=[0, 1], keepdims=1),             # [1, 1, 10]
            b.op("ReduceL1", [v], axes=[1]),                             # [2, 1, 10]
            b.op("ReduceL2", [v], axes=[0, 2], keepdims=0),              # [3]
            b.op("ReduceSumSquare", [v], axes=[2], keepdims=1),          # [2, 3, 1]
            b.op("ReduceLogSumExp", [v], axes=[-1], keepdims=0),         # [2, 3]
            b.op("ReduceLogSumExp", [v], axes=[0], keepdims=1)]          # [1, 3, 10]
    flat = i64([-1])
    red = b.op("Concat", [b.op("Reshape", [r, flat]) for r in reds], axis=0)  # [81]
    # Resize, opset 13 form: X, roi, scales[, sizes]
    roi = b.const("roi", np.zeros(0, f32))
    noscales = b.const("noscales", np.zeros(0, f32))
    two = f([1.0, 1.0, 2.0, 2.0])
    resize = b.op("Concat", [
        b.op("Resize", [x, roi, two], mode="nearest",
             coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        b.op("Resize", [x, roi, two], mode="linear",
             coordinate_transformation_mode="half_pixel"),
        b.op("Resize", [x, roi, two], mode="cubic", cubic_coeff_a=-0.75,
             coordinate_transformation_mode="half_pixel")], axis=1)      # [1, 24, 12, 12]
    near = b.op("Resize", [x, roi, noscales, i64([1, 8, 9, 15])], mode="nearest",
                coordinate_transformation_mode="half_pixel",
                nearest_mode="round_prefer_floor")
    corners = b.op("Resize", [x, roi, noscales, i64([1, 8, 11, 4])], mode="linear",
                   coordinate_transformation_mode="align_corners")
    torch = b.op("Resize", [x, roi, "", i64([1, 8, 3, 13])], mode="linear",
                 coordinate_transformation_mode="pytorch_half_pixel")
    outs = _rename_outputs(b, [
        (act, "act", [1, 64, 6, 6]), (math, "math", [1, 48, 6, 6]),
        (rounding, "rounding", [1, 32, 6, 6]), (arith, "arith", [1, 40, 6, 6]),
        (cmp, "compare", [1, 72, 6, 6]), (split, "split", [1, 16, 6, 6]),
        (expand, "expand", [2, 8, 5, 6]), (tile, "tile", [1, 16, 6, 18]),
        (d2s, "depth_to_space", [1, 4, 12, 12]), (s2d, "space_to_depth", [1, 32, 3, 3]),
        (norm, "norm_fill", [1, 16, 6, 6]), (padc, "pad_constant", [1, 8, 9, 6]),
        (padre, "pad_reflect_edge", [1, 16, 9, 9]), (red, "reduce", [81]),
        (resize, "resize_scales", [1, 24, 12, 12]),
        (near, "resize_nearest", [1, 8, 9, 15]), (corners, "resize_align", [1, 8, 11, 4]),
        (torch, "resize_pytorch", [1, 8, 3, 13])])
    g = helper.make_graph(b.nodes, "ops2", [tensor_input("x", TensorProto.FLOAT, [1, 8, 6, 6]),
                                            tensor_input("v", TensorProto.FLOAT, [2, 3, 10])],
                          outs, b.inits)
    return g, False


def ops3(rng, small):
    """Operators at opset 18 (their opset-18 forms), on x [1, 8, 6, 6] and
    s [2, 5, 16]: HardSwish, Mish, GroupNormalization (num_groups 4; at
    opset 18 scale and bias have one value per group, shape [4], not per
    channel as from opset 21); Split with num_outputs 3 over 8 channels
    (3, 3, 2) and Split with a split input; ReduceMean, ReduceMax,
    ReduceMin, ReduceSum, ReduceL2, ReduceLogSumExp with axes as an input
    (keepdims 0, 1 and absent), ReduceMax and ReduceMean with axes omitted
    (all axes, noop_with_empty_axes absent); Resize with the axes attribute
    (axes [2, 3], scales [2, 2], linear, half_pixel, roi omitted) and Resize
    nearest with sizes [1, 8, 10, 14] and antialias 0 (coordinate mode,
    nearest_mode and keep_aspect_ratio_policy default); Pad with an axes
    input (constant 0.25 on axes [2, 3]; edge on axis -1, constant_value
    omitted); LayerNormalization and Erf on s, Where with a scalar
    broadcast; Trilu (upper 0) of a constant ones matrix as a GPT-2-style
    causal mask: Cast to bool, Where over scores [1, 6, 6] with -1e4,
    Softmax on the last axis. Helpers: Mul, Greater, Gather, Reshape,
    Concat."""
    b = Builder(rng)
    f32 = np.float32
    i64, f = b.i64, b.f32

    x, s = "x", "s"
    gn = b.op("GroupNormalization", [
        x, b.const("gn_scale", rng.uniform(0.5, 1.5, 4).astype(f32)),
        b.const("gn_bias", rng.uniform(-0.5, 0.5, 4).astype(f32))], num_groups=4, epsilon=1e-5)
    act = b.op("Concat", [b.op("HardSwish", [b.op("Mul", [x, f(4.0)])]),
                          b.op("Mish", [b.op("Mul", [x, f(2.0)])]),
                          gn], axis=1)                                   # [1, 24, 6, 6]
    a, bb, c = b.op("Split", [x], n_out=3, axis=1, num_outputs=3)       # 3, 3, 2 channels
    split = b.op("Concat", [c, a, bb], axis=1)                           # [1, 8, 6, 6]
    sa, sb = b.op("Split", [s, i64([4, 12])], n_out=2, axis=2)
    s_split = b.op("Concat", [sb, sa], axis=2)                           # [2, 5, 16]
    reds = [b.op("ReduceMean", [s, i64([2])], keepdims=1),              # [2, 5, 1]
            b.op("ReduceMax", [s, i64([-1, 0])], keepdims=0),            # [5]
            b.op("ReduceMin", [s, i64([1])], keepdims=0),                # [2, 16]
            b.op("ReduceSum", [s, i64([1])]),                            # [2, 1, 16]
            b.op("ReduceL2", [s, i64([0])], keepdims=0),                 # [5, 16]
            b.op("ReduceLogSumExp", [s, i64([2])], keepdims=0),          # [2, 5]
            b.op("ReduceMax", [s]),                                      # [1, 1, 1]
            b.op("ReduceMean", [s], keepdims=0)]                         # []
    flat = i64([-1])
    red = b.op("Concat", [b.op("Reshape", [r, flat]) for r in reds], axis=0)  # [171]
    lin = b.op("Resize", [x, "", f([2.0, 2.0])], axes=[2, 3], mode="linear",
               coordinate_transformation_mode="half_pixel")             # [1, 8, 12, 12]
    # 10 / 6 and 14 / 6: no output pixel maps to a tie at .5
    near = b.op("Resize", [x, "", "", i64([1, 8, 10, 14])], mode="nearest", antialias=0)
    pad = b.op("Concat", [
        b.op("Pad", [x, i64([1, 2, 0, 1]), f(0.25), i64([2, 3])], mode="constant"),  # [1, 8, 7, 9]
        b.op("Pad", [x, i64([2, 1]), "", i64([-1])], mode="edge")],     # [1, 8, 6, 9]
        axis=2)                                                          # [1, 8, 13, 9]
    ln = b.op("LayerNormalization", [s, b.const("ln_g", rng.uniform(0.5, 1.5, 16).astype(f32)),
                                     b.const("ln_b", rng.uniform(-0.5, 0.5, 16).astype(f32))],
              axis=-1, epsilon=1e-5)
    erf = b.op("Erf", [b.op("Mul", [s, f(1.5)])])
    where = b.op("Where", [b.op("Greater", [s, f(0.0)]), ln, f(-0.5)])
    tr = b.op("Concat", [ln, erf, where], axis=2)                        # [2, 5, 48]
    # a GPT-2-style causal mask
    tril = b.op("Trilu", [b.const("ones", np.ones((6, 6), f32))], upper=0)
    mask = b.op("Cast", [tril], to=TensorProto.BOOL)
    scores = b.op("Mul", [b.op("Gather", [x, i64(0)], axis=1), f(4.0)])  # [1, 6, 6]
    att = b.op("Softmax", [b.op("Where", [mask, scores, f(-1e4)])], axis=-1)
    # Tan, the hyperbolic functions and their inverses (on valid ranges),
    # Shrink; Hardmax, OneHot (negative indices, axis 1), CumSum (forward,
    # exclusive, reverse), EyeLike (folded); LpPool p=1 and p=2;
    # GatherElements (negative indices) in the outputs below
    one_up = b.op("Add", [b.op("Abs", [s]), f(1.0)])
    trig = b.op("Concat", [b.op("Tan", [s]), b.op("Sinh", [s]), b.op("Cosh", [s]),
                           b.op("Asinh", [b.op("Mul", [s, f(3.0)])]), b.op("Acosh", [one_up]),
                           b.op("Atanh", [b.op("Mul", [s, f(0.9)])]),
                           b.op("Shrink", [s], lambd=0.3, bias=0.1)], axis=2)  # [2, 5, 112]
    hot_idx = b.op("Sub", [b.op("Cast", [b.op("Mul", [b.op("Add", [s, f(1.0)]), f(4.0)])],
                                to=TensorProto.INT64), i64(4)])          # [-4, 4)
    hot = b.op("OneHot", [b.op("Gather", [hot_idx, i64(0)], axis=2), i64(16),
                          f([-0.5, 2.0])], axis=1)                       # [2, 16, 5]
    hot = b.op("Transpose", [hot], perm=[0, 2, 1])                      # [2, 5, 16]
    eye = b.op("EyeLike", [b.op("Gather", [s, i64(0)], axis=0)], k=1)   # [5, 16]
    cum = b.op("Add", [b.op("CumSum", [s, i64(2)], exclusive=1),
                       b.op("CumSum", [s, i64(1)], reverse=1)])
    sel = b.op("Concat", [b.op("Add", [b.op("Hardmax", [s], axis=1), eye]), hot,
                          b.op("Mul", [cum, f(0.25)])], axis=2)         # [2, 5, 48]
    lp = b.op("Concat", [b.op("LpPool", [x], kernel_shape=[2, 2], strides=[2, 2], p=2),
                         b.op("LpPool", [x], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 0, 0], p=1)], axis=1)          # [1, 16, 3, 3]
    # Einsum (an attention product, a projection with an ellipsis, a sum
    # with a transpose) in the outputs below
    # classification heads and norms: LogSoftmax, LpNormalization (p 1, 2),
    # GlobalMaxPool; ArgMax / ArgMin (first and last of tied maxima: s
    # concatenated with itself), CastLike, Size (folded), Mod (fmod on
    # floats, the integer form on int32), IsNaN / IsInf (all false here)
    heads = b.op("Concat", [b.op("LogSoftmax", [s], axis=1),
                            b.op("LpNormalization", [s], axis=-1, p=2),
                            b.op("LpNormalization", [s], axis=1, p=1)], axis=2)  # [2, 5, 48]
    gmax = b.op("GlobalMaxPool", [x])                                   # [1, 8, 1, 1]
    ss = b.op("Concat", [s, s], axis=2)                                 # [2, 5, 32]
    args = [b.op("ArgMax", [ss], axis=2, keepdims=0),
            b.op("ArgMax", [ss], axis=2, keepdims=0, select_last_index=1),
            b.op("ArgMin", [ss], axis=-1, keepdims=0),
            b.op("ArgMin", [ss], axis=2, keepdims=0, select_last_index=1),
            b.op("ArgMax", [s], axis=1, keepdims=0)]                    # 4 x [2, 5], [2, 16]
    args = [b.op("Reshape", [b.op("CastLike", [a, s]), i64([-1])]) for a in args]
    size = b.op("CastLike", [b.op("Size", [ss]), s])                     # 320.0
    fm = b.op("Mod", [b.op("Mul", [s, f(5.0)]), f(1.5)], fmod=1)
    si = b.op("Cast", [b.op("Mul", [s, f(40.0)])], to=TensorProto.INT32)
    im = b.op("Mod", [si, b.const("seven", np.array([7, -7] * 8, np.int32))])
    bad = b.op("Or", [b.op("IsNaN", [s]), b.op("IsInf", [s], detect_negative=0)])
    misc = b.op("Concat", [fm, b.op("CastLike", [im, s]), b.op("CastLike", [bad, s])],
                axis=2)                                                 # [2, 5, 48]
    idx = b.op("Concat", args + [b.op("Reshape", [gmax, i64([-1])]),
                                 b.op("Reshape", [size, i64([1])])], axis=0)  # [81]
    outs = _rename_outputs(b, [
        (act, "act", [1, 24, 6, 6]), (split, "split", [1, 8, 6, 6]),
        (s_split, "s_split", [2, 5, 16]), (red, "reduce", [171]),
        (lin, "resize_axes", [1, 8, 12, 12]), (near, "resize_nearest", [1, 8, 10, 14]),
        (pad, "pad_axes", [1, 8, 13, 9]), (tr, "transformer", [2, 5, 48]),
        (att, "causal_softmax", [1, 6, 6]), (heads, "heads", [2, 5, 48]),
        (idx, "arg_size", [81]), (misc, "mod_isnan", [2, 5, 48]),
        (b.op("Einsum", [s, s], equation="bsd,btd->bst"), "einsum_scores", [2, 5, 5]),
        (b.op("Einsum", [s, b.weight("ein_w", (3, 16), 16)], equation="...d,ed->...e"),
         "einsum_proj", [2, 5, 3]),
        (b.op("Einsum", [s], equation="bsd->db"), "einsum_sum", [16, 2]),
        (trig, "trig", [2, 5, 112]), (sel, "hardmax_onehot", [2, 5, 48]),
        (lp, "lp_pool", [1, 16, 3, 3]),
        (b.op("GatherElements", [s, b.const("ge", np.array(
            [[[(3 * i + 5 * j + k) % 32 - 16 for k in range(3)] for j in range(5)]
             for i in range(2)], np.int64))], axis=2), "gather_elements", [2, 5, 3])])
    g = helper.make_graph(b.nodes, "ops3", [tensor_input("x", TensorProto.FLOAT, [1, 8, 6, 6]),
                                            tensor_input("s", TensorProto.FLOAT, [2, 5, 16])],
                          outs, b.inits)
    return g, False


def ops4(rng, small):
    """Gathers and scatters at constant indices and the inverse circular
    functions, at opset 18, on s [2, 5, 16] and x [1, 8, 6, 6]: GatherND
    (rows by pairs of indices, one negative; batch_dims 1 over s);
    ScatterND writing rows (reduction none, a position written twice, the
    last update kept), single elements with reduction add and rows with
    reduction max; ScatterElements along axes 2 and -1 (negative indices,
    reduction mul), a KV-cache-style update of x's channels 2 and 5 by
    ScatterND; Atan, Asin, Acos (on [-1, 1], and Atan on large values).
    The same size full and small."""
    b = Builder(rng)
    f32 = np.float32
    i64, f = b.i64, b.f32
    s, x = "s", "x"
    rows = b.const("gnd_i", np.array([[1, 2], [0, -1], [1, 0]], np.int64))
    gnd = b.op("GatherND", [s, rows])                                   # [3, 16]
    bidx = b.const("gnd_b", np.array([[[4], [0]], [[2], [2]]], np.int64))
    gnd_b = b.op("GatherND", [s, bidx], batch_dims=1)                   # [2, 2, 16]
    upd = b.op("Mul", [b.op("Gather", [s, i64([0])], axis=1), f(3.0)])  # [2, 1, 16]
    upd2 = b.op("Concat", [upd, b.op("Add", [upd, f(1.0)])], axis=1)    # [2, 2, 16]
    sc_rows = b.op("ScatterND", [s, b.const("snd_i", np.array(
        [[[0, 3], [1, 1]], [[0, 3], [1, -5]]], np.int64)),
        b.op("Reshape", [upd2, i64([2, 2, 16])])])                      # [2, 5, 16]
    el = b.const("snd_e", np.array([[0, 1, 2], [1, 4, 15], [0, 1, 2]], np.int64))
    sc_add = b.op("ScatterND", [s, el, f([10.0, -20.0, 0.5])], reduction="add")
    sc_max = b.op("ScatterND", [s, b.const("snd_m", np.array([[1, 2], [0, 0]], np.int64)),
                                b.op("Reshape", [upd, i64([2, 16])])], reduction="max")
    se_idx = b.const("se_i", np.array([[[(i + 3 * j) % 16 - 8 * (j % 2) for i in range(4)]
                                        for j in range(5)] for _ in range(2)], np.int64))
    se_upd = b.op("Slice", [s, i64([0]), i64([4]), i64([2])])           # [2, 5, 4]
    se = b.op("ScatterElements", [s, se_idx, se_upd], axis=2)
    se_mul = b.op("ScatterElements", [s, se_idx, se_upd], axis=-1, reduction="mul")
    # a cache of 8 channels, channels 2 and 5 replaced by the new values
    new = b.op("Mul", [b.op("Slice", [x, i64([0]), i64([2]), i64([1])]), f(-2.0)])
    cache = b.op("ScatterND", [b.op("Transpose", [x], perm=[1, 0, 2, 3]),
                               b.const("kv_i", np.array([[2], [5]], np.int64)),
                               b.op("Transpose", [new], perm=[1, 0, 2, 3])])
    cache = b.op("Transpose", [cache], perm=[1, 0, 2, 3])               # [1, 8, 6, 6]
    unit = b.op("Tanh", [s])
    trig = b.op("Concat", [b.op("Atan", [b.op("Mul", [s, f(40.0)])]), b.op("Atan", [s]),
                           b.op("Asin", [unit]), b.op("Acos", [unit])], axis=2)  # [2, 5, 64]
    scat = b.op("Concat", [sc_rows, sc_add, sc_max, se, se_mul], axis=2)  # [2, 5, 80]
    outs = _rename_outputs(b, [
        (gnd, "gather_nd", [3, 16]), (gnd_b, "gather_nd_batch", [2, 2, 16]),
        (scat, "scatter", [2, 5, 80]), (cache, "cache", [1, 8, 6, 6]),
        (trig, "inverse_trig", [2, 5, 64])])
    g = helper.make_graph(b.nodes, "ops4", [tensor_input("s", TensorProto.FLOAT, [2, 5, 16]),
                                            tensor_input("x", TensorProto.FLOAT, [1, 8, 6, 6])],
                          outs, b.inits)
    return g, False


def _im2col(x):
    """x [N, 8, 8, C] -> the 3x3, pad-1 patches [N*64, 9*C] (ky, kx, c)."""
    n, h, w, c = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    cols = np.stack([xp[:, dy:dy + h, dx:dx + w, :] for dy in range(3) for dx in range(3)],
                    axis=3)
    return cols.reshape(n * h * w, 9 * c)


def _col2im(g, shape):
    n, h, w, c = shape
    g = g.reshape(n, h, w, 9, c)
    out = np.zeros((n, h + 2, w + 2, c), g.dtype)
    for k in range(9):
        dy, dx = divmod(k, 3)
        out[:, dy:dy + h, dx:dx + w, :] += g[:, :, :, k, :]
    return out[:, 1:h + 1, 1:w + 1, :]


def digits(rng, small):
    """A small CNN trained here, in numpy, on the handwritten digits that
    scikit-learn ships (1797 8x8 images, no download): conv 1->16 and 16->32
    (3x3, pad 1, ReLU), 2x2 max pool, a 512->10 classifier. The last 360
    images are the test set, written beside the model as digits_test.npz
    (`image`, 360 samples of [1, 1, 8, 8]) and digits_labels.npz (`labels`);
    digits_calib.npz holds 64 training images for a quantization profile.
    Trained with plain SGD and momentum, 20 epochs, seeded: the same
    weights every time (test accuracy 96 %)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        print("gen_models: no scikit-learn (python3-sklearn): digits skipped",
              file=sys.stderr)
        return None, False
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, :, :, None]   # NHWC
    y = d.target.astype(np.int64)
    xtr, ytr, xte, yte = x[:-360], y[:-360], x[-360:], y[-360:]
    f32 = np.float32
    w1 = (rng.standard_normal((9, 16)) * np.sqrt(2 / 9)).astype(f32)
    b1 = np.zeros(16, f32)
    w2 = (rng.standard_normal((144, 32)) * np.sqrt(2 / 144)).astype(f32)
    b2 = np.zeros(32, f32)
    wf = (rng.standard_normal((512, 10)) * np.sqrt(1 / 512)).astype(f32)
    bf = np.zeros(10, f32)
    params = [w1, b1, w2, b2, wf, bf]
    vel = [np.zeros_like(p) for p in params]

    def forward(xb):
        n = xb.shape[0]
        c1 = _im2col(xb)
        a1 = np.maximum(c1 @ w1 + b1, 0).reshape(n, 8, 8, 16)
        c2 = _im2col(a1)
        z2 = c2 @ w2 + b2
        a2 = np.maximum(z2, 0).reshape(n, 8, 8, 32)
        win = a2.reshape(n, 4, 2, 4, 2, 32)
        p = win.max(axis=(2, 4))                                   # [n, 4, 4, 32]
        flat = p.transpose(0, 3, 1, 2).reshape(n, 512)           # NCHW flatten
        return (c1, a1, c2, z2, a2, win, p, flat), flat @ wf + bf

    for epoch in range(20):  # small or not: a few seconds
        order = rng.permutation(len(xtr))
        lr = 0.1 if epoch < 14 else 0.01
        for i in range(0, len(order), 32):
            idx = order[i:i + 32]
            xb, yb = xtr[idx], ytr[idx]
            n = len(idx)
            (c1, a1, c2, z2, a2, win, p, flat), logits = forward(xb)
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            prob = e / e.sum(axis=1, keepdims=True)
            prob[np.arange(n), yb] -= 1
            gl = prob / n
            gwf, gbf = flat.T @ gl, gl.sum(0)
            gp = (gl @ wf.T).reshape(n, 32, 4, 4).transpose(0, 2, 3, 1)
            mask = win == p[:, :, None, :, None, :]
            ga2 = (mask * gp[:, :, None, :, None, :]).reshape(n * 64, 32)
            gz2 = ga2 * (z2 > 0)
            gw2, gb2 = c2.T @ gz2, gz2.sum(0)
            ga1 = _col2im(gz2 @ w2.T, (n, 8, 8, 16)).reshape(n * 64, 16) * (a1.reshape(-1, 16) > 0)
            gw1, gb1 = c1.T @ ga1, ga1.sum(0)
            for k, g in enumerate([gw1, gb1, gw2, gb2, gwf, gbf]):
                vel[k] = 0.9 * vel[k] - lr * g.astype(f32)
                params[k] += vel[k]
    acc = (forward(xte)[1].argmax(1) == yte).mean()
    print("digits: test accuracy %.2f%% (numpy float32)" % (100 * acc), file=sys.stderr)
    if DIGITS_OUT:
        np.savez(os.path.join(DIGITS_OUT, "digits_test.npz"),
                 image=xte.transpose(0, 3, 1, 2)[:, None].astype(f32))
        np.savez(os.path.join(DIGITS_OUT, "digits_labels.npz"), labels=yte)
        np.savez(os.path.join(DIGITS_OUT, "digits_calib.npz"),
                 image=xtr[:64].transpose(0, 3, 1, 2)[:, None].astype(f32))
    b = Builder(rng)

    def oihw(w, cin, cout):
        return w.reshape(3, 3, cin, cout).transpose(3, 2, 0, 1)

    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    h = b.op("Relu", [b.op("Conv", ["image", b.const("w1", oihw(w1, 1, 16)), b.const("b1", b1)],
                           **conv)])
    h = b.op("Relu", [b.op("Conv", [h, b.const("w2", oihw(w2, 16, 32)), b.const("b2", b2)],
                           **conv)])
    h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("Flatten", [h], axis=1)
    out = b.op("Gemm", [h, b.const("wf", np.ascontiguousarray(wf.T)), b.const("bf", bf)],
               transB=1)
    g = helper.make_graph(b.nodes, "digits", [tensor_input("image", TensorProto.FLOAT, [1, 1, 8, 8])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 10])],
                          b.inits)
    return g, False


def yolo(rng, small):
    """A YOLOv8n-like detector (opset 17, as Ultralytics exports it):
    Conv+BN+SiLU blocks (SiLU as x * Sigmoid(x)), stride-2 downsampling,
    C2f blocks (1x1 conv, Split in halves, a chain of bottlenecks of two
    3x3 conv blocks with a residual Add, Concat, 1x1 conv), SPPF (three
    chained 5x5 MaxPools), a PAN neck (Resize nearest x2 and Concat with
    the backbone, stride-2 convs back down), and per scale the decoupled
    head: a box branch (two 3x3 blocks, 1x1 conv to 64 = 4 x 16 DFL bins)
    and a class branch (two 3x3 blocks, 1x1 conv to 80), concatenated to
    144 channels, reshaped to [1, 144, H*W], the three scales
    concatenated, Split into "boxes" [1, 64, A] and Sigmoid "scores"
    [1, 80, A] (A = 8400 at 640x640; 336 for the small 128x128 version,
    whose widths are divided by 4). Batch-norm statistics are drawn
    around those of a random input (uniform in [-1, 1))."""
    size, div = (128, 4) if small else (640, 1)
    b = Builder(rng, {"images": rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)})
    w1, w2, w3, w4, w5 = [c // div for c in (16, 32, 64, 128, 256)]
    nc, reg = 80, 16
    c_box, c_cls = 64 // div, 80 // div        # max(16, w3 // 4, 4 * reg), max(w3, nc)

    def conv(x, cin, cout, k=1, s=1):
        """Conv + BN + SiLU."""
        y = b.bn(b.conv(x, cin, cout, k, stride=s), cout)
        return b.op("Mul", [y, b.op("Sigmoid", [y])])

    def c2f(x, cin, cout, n, shortcut):
        c = cout // 2
        parts = b.op("Split", [conv(x, cin, 2 * c), b.i64([c, c])], n_out=2, axis=1)
        for _ in range(n):
            t = conv(conv(parts[-1], c, c, 3), c, c, 3)
            parts.append(b.op("Add", [parts[-1], t]) if shortcut else t)
        return conv(b.op("Concat", parts, axis=1), (2 + n) * c, cout)

    def sppf(x, cin, cout):
        ys = [conv(x, cin, cin // 2)]
        for _ in range(3):
            ys.append(b.op("MaxPool", [ys[-1]], kernel_shape=[5, 5], strides=[1, 1],
                           pads=[2, 2, 2, 2]))
        return conv(b.op("Concat", ys, axis=1), cin // 2 * 4, cout)

    def upsample(x):
        return b.op("Resize", [x, "", b.f32([1.0, 1.0, 2.0, 2.0])], mode="nearest",
                    coordinate_transformation_mode="asymmetric", nearest_mode="floor",
                    cubic_coeff_a=-0.75)

    # backbone (depth multiple 0.33: C2f repeats 1, 2, 2, 1)
    x = conv("images", 3, w1, 3, 2)                            # P1/2
    x = c2f(conv(x, w1, w2, 3, 2), w2, w2, 1, True)            # P2/4
    p3 = c2f(conv(x, w2, w3, 3, 2), w3, w3, 2, True)           # P3/8
    p4 = c2f(conv(p3, w3, w4, 3, 2), w4, w4, 2, True)          # P4/16
    p5 = sppf(c2f(conv(p4, w4, w5, 3, 2), w5, w5, 1, True), w5, w5)  # P5/32
    # neck
    n4 = c2f(b.op("Concat", [upsample(p5), p4], axis=1), w5 + w4, w4, 1, False)
    n3 = c2f(b.op("Concat", [upsample(n4), p3], axis=1), w4 + w3, w3, 1, False)
    m4 = c2f(b.op("Concat", [conv(n3, w3, w3, 3, 2), n4], axis=1), w3 + w4, w4, 1, False)
    m5 = c2f(b.op("Concat", [conv(m4, w4, w4, 3, 2), p5], axis=1), w4 + w5, w5, 1, False)
    # detection head
    no = 4 * reg + nc
    flat = []
    for x, c in ((n3, w3), (m4, w4), (m5, w5)):
        box = b.conv(conv(conv(x, c, c_box, 3), c_box, c_box, 3), c_box, 4 * reg, 1, bias=True)
        cls = b.conv(conv(conv(x, c, c_cls, 3), c_cls, c_cls, 3), c_cls, nc, 1, bias=True)
        flat.append(b.op("Reshape", [b.op("Concat", [box, cls], axis=1), b.i64([1, no, -1])]))
    y = b.op("Concat", flat, axis=2)
    boxes, cls = b.op("Split", [y, b.i64([4 * reg, nc])], n_out=2, axis=1)
    scores = b.op("Sigmoid", [cls])
    anchors = sum((size // s) ** 2 for s in (8, 16, 32))
    outs = _rename_outputs(b, [(boxes, "boxes", [1, 4 * reg, anchors]),
                               (scores, "scores", [1, nc, anchors])])
    g = helper.make_graph(b.nodes, "yolo", [tensor_input("images", TensorProto.FLOAT, [1, 3, size, size])],
                          outs, b.inits)
    return g, False


def _make_divisible(v, d=8):
    """Rounds channel counts as torchvision's MobileNetV3 does."""
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


def mobilenet_v3(rng, small):
    """A MobileNetV3-Small-like classifier (opset 17, as torchvision exports
    it): a 3x3 stride-2 stem with HardSwish, the paper's 11 inverted
    residual blocks (1x1 expansion, 3x3 or 5x5 depthwise conv of stride 1
    or 2, ReLU or HardSwish, squeeze-and-excitation of GlobalAveragePool,
    1x1 conv, Relu, 1x1 conv, HardSigmoid, Mul; 1x1 projection with BN,
    residual Add when the shapes match), a 1x1 conv to 576 with HardSwish,
    GlobalAveragePool, Flatten, Gemm to 1024, HardSwish, Gemm to 1000
    "logits". Small: 64x64 input, widths halved, 100 classes. Batch-norm
    statistics are drawn around those of a random input."""
    size, classes, div = (64, 100, 2) if small else (224, 1000, 1)
    b = Builder(rng, {"input": rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)})
    # kernel, expanded, out, squeeze-excite, activation, stride (Table 2)
    cfg = [(3, 16, 16, True, "RE", 2), (3, 72, 24, False, "RE", 2),
           (3, 88, 24, False, "RE", 1), (5, 96, 40, True, "HS", 2),
           (5, 240, 40, True, "HS", 1), (5, 240, 40, True, "HS", 1),
           (5, 120, 48, True, "HS", 1), (5, 144, 48, True, "HS", 1),
           (5, 288, 96, True, "HS", 2), (5, 576, 96, True, "HS", 1),
           (5, 576, 96, True, "HS", 1)]

    def conv_bn(x, cin, cout, k=1, s=1, group=1, act=None):
        y = b.bn(b.conv(x, cin, cout, k, stride=s, group=group), cout)
        if act == "RE":
            return b.relu(y)
        return b.op("HardSwish", [y]) if act == "HS" else y

    # the layers without batch norm after them (squeeze-excite, classifier)
    # see spatial means, far smaller than the features: their weights are
    # scaled by the sample input's mean square as well as the fan-in, so
    # their outputs have a set spread (std 1; std 3 for the excitation,
    # whose HardSigmoid so reaches both its clips)
    def fan_in(x, n, std=1.0):
        return n * float(np.mean(np.square(b.values[x], dtype=np.float64))) / std ** 2

    def fc(x, cin, cout, std=1.0):
        """A biased 1x1 conv on [1, cin, 1, 1]."""
        w = b.weight("conv_w", (cout, cin, 1, 1), fan_in(x, cin, std))
        bias = b.const("conv_b", rng.uniform(-0.1, 0.1, cout).astype(np.float32))
        return b.op("Conv", [x, w, bias], kernel_shape=[1, 1], strides=[1, 1], dilations=[1, 1],
                    group=1, pads=[0, 0, 0, 0])

    def linear(x, cin, cout):
        w = b.weight("fc_w", (cout, cin), fan_in(x, cin))
        bias = b.const("fc_b", rng.uniform(-0.1, 0.1, cout).astype(np.float32))
        return b.op("Gemm", [x, w, bias], alpha=1.0, beta=1.0, transB=1)

    def squeeze_excite(x, c):
        sq = _make_divisible(c // 4)
        p = b.relu(fc(b.op("GlobalAveragePool", [x]), c, sq))
        p = b.op("HardSigmoid", [fc(p, sq, c, std=3.0)], alpha=1.0 / 6, beta=0.5)
        return b.op("Mul", [p, x])

    stem = 16 // div
    x = conv_bn("input", 3, stem, 3, 2, act="HS")
    cin = stem
    for k, exp, out, use_se, act, s in cfg:
        exp, out = exp // div, out // div
        y = x
        if exp != cin:
            y = conv_bn(y, cin, exp, 1, act=act)
        y = conv_bn(y, exp, exp, k, s, group=exp, act=act)
        if use_se:
            y = squeeze_excite(y, exp)
        y = conv_bn(y, exp, out, 1)
        x = b.op("Add", [y, x]) if s == 1 and cin == out else y
        cin = out
    last_conv, last = 576 // div, 1024 // div
    x = conv_bn(x, cin, last_conv, 1, act="HS")
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    x = b.op("HardSwish", [linear(x, last_conv, last)])
    out = linear(x, last, classes)
    outs = _rename_outputs(b, [(out, "logits", [1, classes])])
    g = helper.make_graph(b.nodes, "mobilenet_v3", [tensor_input("input", TensorProto.FLOAT, [1, 3, size, size])],
                          outs, b.inits)
    return g, False


def gpt2(rng, small):
    """A GPT-2-like decoder (opset 17, in the style of a PyTorch export of
    Hugging Face's GPT2LMHeadModel): token and position embedding Gathers,
    per layer LayerNormalization, one MatMul + Add to q, k and v, Split,
    Reshape + Transpose to heads, q k^T / sqrt(head size), a causal mask
    (Trilu of a constant ones matrix, Cast to bool) applied by Where with
    -1e4, Softmax, the output projection and residual Adds, an MLP with
    GELU in its tanh form (Pow, Tanh); a final LayerNormalization and the
    LM head tied to the token embedding (a MatMul with its transpose, a
    constant). Full: 4 layers, hidden 768, 12 heads, vocabulary 8192,
    sequence 64; small: 2 layers, hidden 64, 4 heads, vocabulary 512,
    sequence 16. Weights as external data."""
    b = Builder(rng)
    layers, hidden, heads, vocab, seq, max_pos = (
        (2, 64, 4, 512, 16, 128) if small else (4, 768, 12, 8192, 64, 1024))
    hd = hidden // heads
    f32 = np.float32
    i64, f = b.i64, b.f32

    def layer_norm(x):
        return b.op("LayerNormalization", [
            x, b.const("ln_g", rng.uniform(0.8, 1.2, hidden).astype(f32)),
            b.const("ln_b", rng.uniform(-0.1, 0.1, hidden).astype(f32))], axis=-1, epsilon=1e-5)

    def dense(x, cin, cout):
        y = b.op("MatMul", [x, b.weight("w", (cin, cout), cin)])
        return b.op("Add", [y, b.const("b", rng.uniform(-0.1, 0.1, cout).astype(f32))])

    def to_heads(x, perm):
        return b.op("Transpose", [b.op("Reshape", [x, i64([1, seq, heads, hd])])], perm=perm)

    wte = rng.standard_normal((vocab, hidden)).astype(f32) * f32(np.sqrt(1.0 / hidden))
    x = b.op("Gather", [b.const("wte", wte), "input_ids"], axis=0)
    pos = b.op("Gather", [b.weight("wpe", (max_pos, hidden), 4 * hidden),
                          i64(np.arange(seq).reshape(1, seq))], axis=0)
    x = b.op("Add", [x, pos])
    mask = b.op("Cast", [b.op("Trilu", [b.const("ones", np.ones((seq, seq), f32))], upper=0)],
                to=TensorProto.BOOL)
    for _ in range(layers):
        qkv = dense(layer_norm(x), hidden, 3 * hidden)
        q, k, v = b.op("Split", [qkv, i64([hidden] * 3)], n_out=3, axis=2)
        q, k, v = to_heads(q, [0, 2, 1, 3]), to_heads(k, [0, 2, 3, 1]), to_heads(v, [0, 2, 1, 3])
        s = b.op("Div", [b.op("MatMul", [q, k]), f(np.sqrt(hd))])
        p = b.op("Softmax", [b.op("Where", [mask, s, f(-1e4)])], axis=-1)
        c = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        c = b.op("Reshape", [c, i64([1, seq, hidden])])
        x = b.op("Add", [x, dense(c, hidden, hidden)])
        h = dense(layer_norm(x), hidden, 4 * hidden)
        t = b.op("Add", [h, b.op("Mul", [b.op("Pow", [h, f(3.0)]), f(0.044715)])])
        t = b.op("Tanh", [b.op("Mul", [t, f(np.sqrt(2.0 / np.pi))])])
        gelu = b.op("Mul", [b.op("Mul", [h, f(0.5)]), b.op("Add", [t, f(1.0)])])
        x = b.op("Add", [x, dense(gelu, 4 * hidden, hidden)])
    logits = b.op("MatMul", [layer_norm(x), b.const("wte_t", np.ascontiguousarray(wte.T))])
    outs = _rename_outputs(b, [(logits, "logits", [1, seq, vocab])])
    g = helper.make_graph(b.nodes, "gpt2", [tensor_input("input_ids", TensorProto.INT64, [1, seq])],
                          outs, b.inits)
    return g, True


DIGITS_OUT = None

MODELS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2, "bert": bert, "csrnet": csrnet,
          "ops": ops, "digits": digits, "resnet18": resnet18, "bert_layer": bert_layer,
          "unet": unet, "ops2": ops2, "ops3": ops3, "ops4": ops4, "yolo": yolo,
          "mobilenet_v3": mobilenet_v3, "gpt2": gpt2}
# what --models defaults to (the tests' set); the others on request
DEFAULT_MODELS = ["resnet50", "mobilenet_v2", "bert", "csrnet", "ops", "digits", "unet",
                  "ops2", "ops3", "ops4"]
# each model's opset (OPSET when not listed)
OPSETS = {"ops": 17, "ops2": 13, "ops3": 18, "ops4": 18, "yolo": 17, "mobilenet_v3": 17, "gpt2": 17}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder to write the models to")
    ap.add_argument("--small", action="store_true", help="the small test versions")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma-separated, of %s (default: %s)" % (
                        ", ".join(MODELS), ",".join(DEFAULT_MODELS)))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bad", action="store_true",
                    help="also write small malformed models (error tests)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.bad:
        bad_models(args.out)
    global DIGITS_OUT
    DIGITS_OUT = args.out
    for name in args.models.split(","):
        if name not in MODELS:
            sys.exit("gen_models: unknown model '%s' (have %s)" % (name, ", ".join(MODELS)))
        rng = np.random.RandomState(args.seed)
        graph, external = MODELS[name](rng, args.small)
        if graph is None:
            continue
        path = os.path.join(args.out, name + ("_small" if args.small else "") + ".onnx")
        save(graph, path, external, OPSETS.get(name, OPSET))
        print(path)


if __name__ == "__main__":
    main()
