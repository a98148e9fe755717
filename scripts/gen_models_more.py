#!/usr/bin/python3
"""Writes more ONNX networks with random weights, of families the zoo of
gen_models.py does not have, for checking the graph compiler on models it
was not built around:

  convnext      a ConvNeXt-T-like classifier (depthwise 7x7 convs, channels-
                last LayerNormalization between Transposes, 4-D MatMuls as
                PyTorch exports nn.Linear on NHWC, GELU as Erf, a per-channel
                layer scale; the downsampling layers' LayerNorm over channels
                in NCHW spelled out as ReduceMean/Sub/Pow/Sqrt/Div);
  vit           a ViT-B/16-like encoder (a 16x16 stride-16 patch conv, a
                class token Concat, 197 tokens: a sequence no power of two
                divides, 6 layers of 768, the class token's logits);
  efficientnet  an EfficientNet-B0-like classifier (SiLU as x * Sigmoid(x),
                depthwise 3x3 and 5x5 convs of stride 1 and 2, squeeze-and-
                excitation, a segmentation-style LogSoftmax over the channel
                axis of an NCHW map as a second output);
  shufflenet    ShuffleNet-V2-like (Split, Concat, the channel shuffle);
  densenet      DenseNet-121-like (a Concat per layer);
  speech        two LSTM layers over feature frames (bidirectional; then
                peepholes and a given initial state), per-frame LogSoftmax;
  textgru       an embedding, a reverse GRU (linear_before_reset), a
                bidirectional GRU with clip and its own activations, a ReLU
                RNN, a dense layer on the last states;
  llama         a LLaMA-like decoder (RMSNorm, rotary embedding, grouped-
                query attention, a causal mask, SwiGLU);
  wav2vec       a wav2vec2-like audio encoder (strided 1-D convs, GroupNorm
                as InstanceNormalization, a grouped positional conv of
                kernel 128, post-LayerNorm transformer layers);
  resnext       a ResNeXt-50 (32x4d)-like classifier (grouped 3x3 convs);
  swin          Swin-Transformer-like blocks (7x7 window attention through
                6-D Reshape/Transpose, shifted windows by Slice + Concat
                rolls, a relative-position bias);
  inception     an Inception-v3-like classifier (branches joined by Concat,
                1x7 / 7x1 and 1x3 / 3x1 convs, valid-padded stride-2 grid
                reductions, 3x3 average pools);
  r3d           a ResNet3D-18-like video classifier (3x3x3 convs over
                16 frames of 112x112, 5-D batch norms);
  c3d           a C3D-like video classifier (3x3x3 convs, 5-D max pools);
  deeplab       a DeepLabV3-like segmenter (a dilated ResNet-50-like
                backbone, atrous pyramid pooling with dilations 6 to 18,
                bilinear Resizes);
  vgg           a VGG-16-like classifier (13 3x3 convs, three dense layers,
                the first 25088 -> 4096; a batch of 2);
  squeezenet    a SqueezeNet-1.1-like classifier (Fire modules' Concats,
                ceil_mode max pools, a conv classifier, a Softmax);
  whisper       a Whisper-base-like audio encoder (1-D convs with GELU over
                a log-mel spectrogram, sinusoidal positions, 1500 frames of
                pre-LayerNorm attention).

All opset 17; `--small` writes reduced versions (same operators and
structure, few layers, small widths) that run in seconds.

usage: gen_models_more.py --out DIR [--small] [--models convnext,vit,...] [--seed N]
"""
import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_models import Builder, _rename_outputs, resnet_head, resnet_stem, save, tensor_input  # noqa: E402

F32 = np.float32


def _layer_norm(b, rng, x, c, axis=-1):
    return b.op("LayerNormalization", [
        x, b.const("ln_g", rng.uniform(0.8, 1.2, c).astype(F32)),
        b.const("ln_b", rng.uniform(-0.1, 0.1, c).astype(F32))], axis=axis, epsilon=1e-6)


def _dense(b, rng, x, cin, cout):
    y = b.op("MatMul", [x, b.weight("w", (cin, cout), cin)])
    return b.op("Add", [y, b.const("b", rng.uniform(-0.1, 0.1, cout).astype(F32))])


def _gelu(b, x):
    """GELU as PyTorch exports it: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    e = b.op("Erf", [b.op("Div", [x, b.f32(np.sqrt(2.0))])])
    return b.op("Mul", [b.op("Mul", [x, b.op("Add", [e, b.f32(1.0)])]), b.f32(0.5)])


def _attend_and_mlp(b, rng, x, scores, v, tokens, hidden):
    """The rest of a pre-LayerNorm transformer layer from its attention
    scores [1, heads, tokens, tokens] and values [1, heads, tokens, hd]:
    softmax, the heads joined, the output projection and residual, then
    the GELU MLP of 4 x hidden and its residual."""
    p = b.op("Softmax", [scores], axis=-1)
    c = b.op("Reshape", [b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3]),
                         b.i64([1, tokens, hidden])])
    x = b.op("Add", [x, _dense(b, rng, c, hidden, hidden)])
    m = _dense(b, rng, _gelu(b, _dense(b, rng, _layer_norm(b, rng, x, hidden), hidden, 4 * hidden)),
               4 * hidden, hidden)
    return b.op("Add", [x, m])


def _channel_norm(b, rng, x, c):
    """LayerNorm over the channels of an NCHW map, spelled out."""
    m = b.op("ReduceMean", [x], axes=[1], keepdims=1)
    d = b.op("Sub", [x, m])
    v = b.op("ReduceMean", [b.op("Pow", [d, b.f32(2.0)])], axes=[1], keepdims=1)
    y = b.op("Div", [d, b.op("Sqrt", [b.op("Add", [v, b.f32(1e-6)])])])
    g = b.const("cn_g", rng.uniform(0.8, 1.2, (c, 1, 1)).astype(F32))
    be = b.const("cn_b", rng.uniform(-0.1, 0.1, (c, 1, 1)).astype(F32))
    return b.op("Add", [b.op("Mul", [y, g]), be])


def convnext(rng, small):
    size, classes = (32, 10) if small else (224, 1000)
    depths = [1, 1, 2, 1] if small else [3, 3, 9, 3]
    dims = [16, 32, 48, 64] if small else [96, 192, 384, 768]
    b = Builder(rng)
    x = b.conv("input", 3, dims[0], 4, stride=4, pad=0, bias=True)
    x = b.op("Transpose", [_layer_norm(b, rng, b.op("Transpose", [x], perm=[0, 2, 3, 1]), dims[0])],
             perm=[0, 3, 1, 2])
    for stage, (depth, c) in enumerate(zip(depths, dims)):
        if stage > 0:
            x = _channel_norm(b, rng, x, dims[stage - 1])
            x = b.conv(x, dims[stage - 1], c, 2, stride=2, pad=0, bias=True)
        for _ in range(depth):
            y = b.conv(x, c, c, 7, group=c, bias=True)
            y = _layer_norm(b, rng, b.op("Transpose", [y], perm=[0, 2, 3, 1]), c)
            y = _dense(b, rng, _gelu(b, _dense(b, rng, y, c, 4 * c)), 4 * c, c)
            y = b.op("Mul", [y, b.const("gamma", rng.uniform(0.1, 0.5, c).astype(F32))])
            x = b.op("Add", [x, b.op("Transpose", [y], perm=[0, 3, 1, 2])])
    x = b.op("ReduceMean", [x], axes=[2, 3], keepdims=0)
    out = _dense(b, rng, _layer_norm(b, rng, x, dims[-1]), dims[-1], classes)
    outs = _rename_outputs(b, [(out, "logits", [1, classes])])
    g = helper.make_graph(b.nodes, "convnext",
                          [tensor_input("input", TensorProto.FLOAT, [1, 3, size, size])], outs, b.inits)
    return g, not small


def vit(rng, small):
    size, patch, layers, hidden, heads, classes = (
        (32, 8, 2, 64, 4, 10) if small else (224, 16, 6, 768, 12, 1000))
    tokens = (size // patch) ** 2 + 1
    hd = hidden // heads
    b = Builder(rng)
    i64 = b.i64
    x = b.conv("input", 3, hidden, patch, stride=patch, pad=0, bias=True)
    x = b.op("Transpose", [b.op("Reshape", [x, i64([1, hidden, tokens - 1])])], perm=[0, 2, 1])
    cls = b.const("cls", rng.standard_normal((1, 1, hidden)).astype(F32) * F32(0.02))
    x = b.op("Concat", [cls, x], axis=1)
    x = b.op("Add", [x, b.const("pos", rng.standard_normal((1, tokens, hidden)).astype(F32) * F32(0.02))])

    def heads_of(t, perm):
        return b.op("Transpose", [b.op("Reshape", [t, i64([1, tokens, heads, hd])])], perm=perm)

    for _ in range(layers):
        h = _layer_norm(b, rng, x, hidden)
        q = heads_of(_dense(b, rng, h, hidden, hidden), [0, 2, 1, 3])
        k = heads_of(_dense(b, rng, h, hidden, hidden), [0, 2, 3, 1])
        v = heads_of(_dense(b, rng, h, hidden, hidden), [0, 2, 1, 3])
        s = b.op("Mul", [b.op("MatMul", [q, k]), b.f32(1.0 / np.sqrt(hd))])
        x = _attend_and_mlp(b, rng, x, s, v, tokens, hidden)
    x = _layer_norm(b, rng, x, hidden)
    first = b.op("Gather", [x, i64(0)], axis=1)
    out = _dense(b, rng, first, hidden, classes)
    outs = _rename_outputs(b, [(out, "logits", [1, classes])])
    g = helper.make_graph(b.nodes, "vit", [tensor_input("input", TensorProto.FLOAT, [1, 3, size, size])],
                          outs, b.inits)
    return g, not small


def efficientnet(rng, small):
    size, classes, div = (64, 10, 4) if small else (224, 1000, 1)
    # expansion, channels, repeats, stride, kernel (EfficientNet-B0)
    cfg = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3),
           (6, 112, 3, 1, 5), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]
    b = Builder(rng, {"input": rng.uniform(-1, 1, (1, 3, size, size)).astype(F32)})

    def silu(x):
        return b.op("Mul", [x, b.op("Sigmoid", [x])])

    def conv_bn(x, cin, cout, k=1, s=1, group=1, act=True):
        y = b.bn(b.conv(x, cin, cout, k, stride=s, group=group), cout)
        return silu(y) if act else y

    def fc(x, cin, cout, std=1.0):
        n = cin * float(np.mean(np.square(b.values[x], dtype=np.float64))) / std ** 2
        w = b.weight("conv_w", (cout, cin, 1, 1), n)
        bias = b.const("conv_b", rng.uniform(-0.1, 0.1, cout).astype(F32))
        return b.op("Conv", [x, w, bias], kernel_shape=[1, 1], strides=[1, 1], pads=[0, 0, 0, 0])

    stem = 32 // div
    x = conv_bn("input", 3, stem, 3, 2)
    cin = stem
    seg = None
    for e, c, n, s, k in cfg:
        c = max(8, c // div)
        for i in range(1 if small else n):
            stride = s if i == 0 else 1
            hidden = cin * e
            y = conv_bn(x, cin, hidden, 1) if e != 1 else x
            y = conv_bn(y, hidden, hidden, k, stride, group=hidden)
            sq = max(1, cin // 4)
            p = silu(fc(b.op("GlobalAveragePool", [y]), hidden, sq))
            y = b.op("Mul", [y, b.op("Sigmoid", [fc(p, sq, hidden, std=2.0)])])
            y = conv_bn(y, hidden, c, 1, act=False)
            x = b.op("Add", [x, y]) if stride == 1 and cin == c else y
            cin = c
        if seg is None and c == max(8, 40 // div):
            # a segmentation-style head on the stride-8 map: per-pixel class
            # scores, LogSoftmax over the channel axis
            seg = b.op("LogSoftmax", [fc(x, c, 21)], axis=1)
    head = 1280 // div
    x = conv_bn(x, cin, head, 1)
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    w = b.weight("fc_w", (classes, head), head)
    out = b.op("Gemm", [x, w, b.const("fc_b", rng.uniform(-0.1, 0.1, classes).astype(F32))],
               alpha=1.0, beta=1.0, transB=1)
    seg_hw = size // 8
    outs = _rename_outputs(b, [(out, "logits", [1, classes]), (seg, "seg", [1, 21, seg_hw, seg_hw])])
    g = helper.make_graph(b.nodes, "efficientnet",
                          [tensor_input("input", TensorProto.FLOAT, [1, 3, size, size])], outs, b.inits)
    return g, False


def shufflenet(rng, small):
    """ShuffleNet-V2-1.0x-like: channel split (Split), branch convs, Concat
    and the channel shuffle as PyTorch exports it (Reshape to [n, 2, c/2, h,
    w], Transpose, Reshape back)."""
    size, classes, div = (64, 10, 4) if small else (224, 1000, 1)
    stages, repeats = [116 // div * 2 // 2, 232 // div, 464 // div], [1, 1, 1] if small else [4, 8, 4]
    b = Builder(rng, {"input": rng.uniform(-1, 1, (1, 3, size, size)).astype(F32)})

    def cbr(x, cin, cout, k=1, s=1, group=1, act=True):
        y = b.bn(b.conv(x, cin, cout, k, stride=s, group=group), cout)
        return b.relu(y) if act else y

    def shuffle(x, c, hw):
        y = b.op("Reshape", [x, b.i64([1, 2, c // 2, hw, hw])])
        y = b.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
        return b.op("Reshape", [y, b.i64([1, c, hw, hw])])

    x = cbr("input", 3, 24, 3, 2)
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin, hw = 24, size // 4
    for c, n in zip(stages, repeats):
        c -= c % 2
        for i in range(n):
            half = c // 2
            if i == 0:
                hw //= 2
                l = cbr(cbr(x, cin, cin, 3, 2, group=cin, act=False), cin, half)
                r = cbr(x, cin, half)
                r = cbr(cbr(r, half, half, 3, 2, group=half, act=False), half, half)
            else:
                l, r = b.op("Split", [x, b.i64([half, half])], n_out=2, axis=1)
                r = cbr(cbr(cbr(r, half, half), half, half, 3, 1, group=half, act=False), half, half)
            x = shuffle(b.op("Concat", [l, r], axis=1), c, hw)
            cin = c
    x = cbr(x, cin, 1024 // div)
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    out = b.linear(x, 1024 // div, classes)
    outs = _rename_outputs(b, [(out, "logits", [1, classes])])
    g = helper.make_graph(b.nodes, "shufflenet",
                          [tensor_input("input", TensorProto.FLOAT, [1, 3, size, size])], outs, b.inits)
    return g, False


def densenet(rng, small):
    """DenseNet-121-like: dense blocks whose layers each Concat their input
    with 32 new channels (BN, ReLU, 1x1 conv to 128, BN, ReLU, 3x3 conv),
    transitions of BN, ReLU, 1x1 conv and 2x2 AveragePool."""
    size, classes = (64, 10) if small else (224, 1000)
    blocks, growth = ([2, 2, 2, 2], 8) if small else ([6, 12, 24, 16], 32)
    b = Builder(rng, {"input": rng.uniform(-1, 1, (1, 3, size, size)).astype(F32)})

    def br(x, c):
        return b.relu(b.bn(x, c))

    c = 2 * growth
    x = br(b.conv("input", 3, c, 7, stride=2, pad=3), c)
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for i, n in enumerate(blocks):
        for _ in range(n):
            y = b.conv(br(x, c), c, 4 * growth, 1)
            y = b.conv(br(y, 4 * growth), 4 * growth, growth, 3)
            x = b.op("Concat", [x, y], axis=1)
            c += growth
        if i < len(blocks) - 1:
            x = b.conv(br(x, c), c, c // 2, 1)
            x = b.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
            c //= 2
    x = b.op("Flatten", [b.op("GlobalAveragePool", [br(x, c)])], axis=1)
    out = b.linear(x, c, classes)
    outs = _rename_outputs(b, [(out, "logits", [1, classes])])
    g = helper.make_graph(b.nodes, "densenet",
                          [tensor_input("input", TensorProto.FLOAT, [1, 3, size, size])], outs, b.inits)
    return g, False


def _rnn_weights(b, rng, nd, gates, cin, hidden):
    """W, R and B of a recurrent node (uniform in +-1/sqrt(hidden), as
    PyTorch initializes them)."""
    k = 1.0 / np.sqrt(hidden)
    u = lambda *shape: rng.uniform(-k, k, shape).astype(F32)  # noqa: E731
    return [b.const("rnn_w", u(nd, gates * hidden, cin)),
            b.const("rnn_r", u(nd, gates * hidden, hidden)),
            b.const("rnn_b", u(nd, 2 * gates * hidden))]


def speech(rng, small):
    """A speech-recognizer-like network: two LSTM layers over feature
    frames (the first bidirectional, the second with peepholes and a given
    initial state), a per-frame classifier with LogSoftmax, and the second
    layer's last cell state as a second output."""
    t, f, h, classes = (12, 16, 24, 10) if small else (100, 80, 256, 29)
    b = Builder(rng)
    x = b.op("Transpose", ["feats"], perm=[1, 0, 2])  # [T, 1, F]
    y = b.op("LSTM", [x] + _rnn_weights(b, rng, 2, 4, f, h), hidden_size=h,
             direction="bidirectional")
    y = b.op("Transpose", [y], perm=[0, 2, 1, 3])  # [T, 1, 2, H]
    y = b.op("Reshape", [y, b.i64([t, 1, 2 * h])])
    state = lambda: b.const("rnn_s", rng.uniform(-0.5, 0.5, (1, 1, h)).astype(F32))  # noqa: E731
    y2, _, c2 = b.op("LSTM", [y] + _rnn_weights(b, rng, 1, 4, 2 * h, h) + [
        "", state(), state(), b.const("rnn_p", rng.uniform(-0.2, 0.2, (1, 3 * h)).astype(F32))],
        n_out=3, hidden_size=h)
    y2 = b.op("Reshape", [y2, b.i64([t, h])])
    logits = b.op("Add", [b.op("MatMul", [y2, b.weight("w", (h, classes), h)]),
                          b.const("b", rng.uniform(-0.1, 0.1, classes).astype(F32))])
    out = b.op("LogSoftmax", [logits], axis=-1)
    c2 = b.op("Reshape", [c2, b.i64([1, h])])
    outs = _rename_outputs(b, [(out, "logprobs", [t, classes]), (c2, "state", [1, h])])
    g = helper.make_graph(b.nodes, "speech", [tensor_input("feats", TensorProto.FLOAT, [1, t, f])],
                          outs, b.inits)
    return g, False


def textgru(rng, small):
    """A text classifier over token ids: an embedding, a reverse GRU with
    linear_before_reset (as PyTorch exports it),
    a bidirectional GRU with clipping and its own activations per direction,
    a plain RNN with ReLU, and a dense layer on the last states."""
    v, e, t, h, classes = (120, 16, 9, 20, 5) if small else (10000, 256, 64, 512, 2)
    b = Builder(rng)
    emb = b.op("Gather", [b.const("emb", rng.uniform(-1, 1, (v, e)).astype(F32)), "ids"])  # [1, T, E]
    x = b.op("Transpose", [emb], perm=[1, 0, 2])  # [T, 1, E]
    y = b.op("GRU", [x] + _rnn_weights(b, rng, 1, 3, e, h), hidden_size=h,
             direction="reverse", linear_before_reset=1)  # [T, 1, 1, H]
    y = b.op("Reshape", [y, b.i64([t, 1, h])])
    _, hb = b.op("GRU", [y] + _rnn_weights(b, rng, 2, 3, h, h), n_out=2, hidden_size=h,
                 direction="bidirectional", clip=5.0,
                 activations=["Sigmoid", "Tanh", "Sigmoid", "Softsign"])  # [2, 1, H]
    hb = b.op("Reshape", [b.op("Transpose", [hb], perm=[1, 0, 2]), b.i64([1, 2 * h])])
    _, hr = b.op("RNN", [y] + _rnn_weights(b, rng, 1, 1, h, h), n_out=2, hidden_size=h,
                 activations=["Relu"])
    hr = b.op("Reshape", [hr, b.i64([1, h])])
    z = b.op("Concat", [hb, hr], axis=1)
    out = b.op("Add", [b.op("MatMul", [z, b.weight("w", (3 * h, classes), 3 * h)]),
                       b.const("b", rng.uniform(-0.1, 0.1, classes).astype(F32))])
    outs = _rename_outputs(b, [(out, "logits", [1, classes])])
    g = helper.make_graph(b.nodes, "textgru", [tensor_input("ids", TensorProto.INT64, [1, t])],
                          outs, b.inits)
    return g, False


def _rms_norm(b, rng, x, c):
    """RMSNorm as Hugging Face's LLaMA exports it: x * rsqrt(mean(x^2) + eps)
    * weight, the rsqrt as Reciprocal(Sqrt(.))."""
    v = b.op("ReduceMean", [b.op("Pow", [x, b.f32(2.0)])], axes=[-1], keepdims=1)
    r = b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [v, b.f32(1e-6)])])])
    return b.op("Mul", [b.const("rms_w", rng.uniform(0.8, 1.2, c).astype(F32)), b.op("Mul", [x, r])])


def llama(rng, small):
    """A LLaMA-like decoder over a prompt: token embedding, RMSNorm, rotary
    position embedding (rotate_half as two Slices, Neg and a Concat),
    grouped-query attention (4 query heads per key/value head, the
    key/value heads repeated by Unsqueeze/Expand/Reshape), a causal mask
    added to the scores, a SwiGLU MLP (SiLU as x * Sigmoid(x)), no biases,
    the logits of every position."""
    vocab, t, layers, hidden, heads, kv, inter = (
        (100, 9, 2, 64, 4, 1, 128) if small else (8000, 64, 4, 768, 12, 3, 2048))
    hd, rep = hidden // heads, heads // kv
    b = Builder(rng)
    i64 = b.i64
    x = b.op("Gather", [b.const("emb", rng.uniform(-0.5, 0.5, (vocab, hidden)).astype(F32)), "ids"])
    inv = 1.0 / (10000.0 ** (np.arange(0, hd, 2) / hd))
    ang = np.outer(np.arange(t), inv)
    ang = np.concatenate([ang, ang], axis=1)  # [T, hd]
    cos = b.const("cos", np.cos(ang).astype(F32).reshape(1, 1, t, hd))
    sin = b.const("sin", np.sin(ang).astype(F32).reshape(1, 1, t, hd))
    mask = np.triu(np.full((t, t), np.finfo(np.float32).min, np.float32), 1)
    mask = b.const("causal", mask.reshape(1, 1, t, t))

    def rotary(q):
        x1 = b.op("Slice", [q, i64([0]), i64([hd // 2]), i64([3])])
        x2 = b.op("Slice", [q, i64([hd // 2]), i64([hd]), i64([3])])
        rot = b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)
        return b.op("Add", [b.op("Mul", [q, cos]), b.op("Mul", [rot, sin])])

    def proj(h, cin, cout):
        return b.op("MatMul", [h, b.weight("w", (cin, cout), cin)])

    def split_heads(h, n):
        return b.op("Transpose", [b.op("Reshape", [h, i64([1, t, n, hd])])], perm=[0, 2, 1, 3])

    def repeat_kv(h):  # [1, kv, T, hd] -> [1, heads, T, hd]
        u = b.op("Unsqueeze", [h, i64([2])])
        e = b.op("Expand", [u, i64([1, kv, rep, t, hd])])
        return b.op("Reshape", [e, i64([1, heads, t, hd])])

    for _ in range(layers):
        h = _rms_norm(b, rng, x, hidden)
        q = rotary(split_heads(proj(h, hidden, hidden), heads))
        k = repeat_kv(rotary(split_heads(proj(h, hidden, kv * hd), kv)))
        v = repeat_kv(split_heads(proj(h, hidden, kv * hd), kv))
        s = b.op("Div", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                         b.f32(np.sqrt(hd))])
        p = b.op("Softmax", [b.op("Add", [s, mask])], axis=-1)
        c = b.op("Reshape", [b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3]),
                             i64([1, t, hidden])])
        x = b.op("Add", [x, proj(c, hidden, hidden)])
        h = _rms_norm(b, rng, x, hidden)
        g = proj(h, hidden, inter)
        act = b.op("Mul", [g, b.op("Sigmoid", [g])])
        x = b.op("Add", [x, proj(b.op("Mul", [act, proj(h, hidden, inter)]), inter, hidden)])
    out = proj(_rms_norm(b, rng, x, hidden), hidden, vocab)
    outs = _rename_outputs(b, [(out, "logits", [1, t, vocab])])
    g = helper.make_graph(b.nodes, "llama", [tensor_input("ids", TensorProto.INT64, [1, t])],
                          outs, b.inits)
    return g, not small


def _conv1d(b, x, cin, cout, k, stride=1, pad=0, group=1, bias=False):
    w = b.weight("conv_w", (cout, cin // group, k), cin // group * k)
    ins = [x, w]
    if bias:
        ins.append(b.const("conv_b", b.rng.uniform(-0.1, 0.1, cout).astype(F32)))
    return b.op("Conv", ins, kernel_shape=[k], strides=[stride], pads=[pad, pad], group=group)


def wav2vec(rng, small):
    """A wav2vec2-like audio encoder over a raw waveform: seven strided 1-D
    convs (the first followed by GroupNorm with one group per channel, as
    PyTorch exports it: Reshape, InstanceNormalization, Reshape, Mul, Add),
    GELU between them, a feature projection, a grouped positional conv of
    kernel 128 (its last frame dropped), and transformer layers with
    LayerNorm after each block; the hidden states of every frame."""
    samples, ch, hidden, heads, layers, pos_k, pos_g = (
        (1600, 32, 64, 4, 1, 16, 4) if small else (16000, 512, 768, 12, 4, 128, 16))
    hd = hidden // heads
    b = Builder(rng)
    i64 = b.i64
    x = b.op("Unsqueeze", ["audio", i64([1])])  # [1, 1, S]
    specs = [(10, 5)] + [(3, 2)] * 4 + [(2, 2)] * 2
    cin, n = 1, samples
    for i, (k, s) in enumerate(specs):
        x = _conv1d(b, x, cin, ch, k, s)
        n = (n - k) // s + 1
        if i == 0:
            r = b.op("Reshape", [x, i64([1, ch, -1])])
            r = b.op("InstanceNormalization", [
                r, b.const("in_s", np.ones(ch, F32)), b.const("in_b", np.zeros(ch, F32))], epsilon=1e-5)
            r = b.op("Reshape", [r, i64([1, ch, n])])
            x = b.op("Add", [b.op("Mul", [r, b.const("gn_g", rng.uniform(0.8, 1.2, (ch, 1)).astype(F32))]),
                             b.const("gn_b", rng.uniform(-0.1, 0.1, (ch, 1)).astype(F32))])
        x = _gelu(b, x)
        cin = ch
    frames = n
    x = b.op("Transpose", [x], perm=[0, 2, 1])  # [1, T, C]
    x = _dense(b, rng, _layer_norm(b, rng, x, ch), ch, hidden)
    p = _conv1d(b, b.op("Transpose", [x], perm=[0, 2, 1]), hidden, hidden, pos_k, 1, pos_k // 2,
                group=pos_g, bias=True)  # [1, H, T + 1]
    p = b.op("Slice", [p, i64([0]), i64([frames]), i64([2])])
    x = b.op("Add", [x, b.op("Transpose", [_gelu(b, p)], perm=[0, 2, 1])])
    x = _layer_norm(b, rng, x, hidden)

    def heads_of(t, perm):
        return b.op("Transpose", [b.op("Reshape", [t, i64([1, frames, heads, hd])])], perm=perm)

    for _ in range(layers):
        q = heads_of(_dense(b, rng, x, hidden, hidden), [0, 2, 1, 3])
        k = heads_of(_dense(b, rng, x, hidden, hidden), [0, 2, 3, 1])
        v = heads_of(_dense(b, rng, x, hidden, hidden), [0, 2, 1, 3])
        a = b.op("Softmax", [b.op("MatMul", [b.op("Mul", [q, b.f32(1.0 / np.sqrt(hd))]), k])], axis=-1)
        c = b.op("Reshape", [b.op("Transpose", [b.op("MatMul", [a, v])], perm=[0, 2, 1, 3]),
                             i64([1, frames, hidden])])
        x = _layer_norm(b, rng, b.op("Add", [x, _dense(b, rng, c, hidden, hidden)]), hidden)
        m = _dense(b, rng, _gelu(b, _dense(b, rng, x, hidden, 4 * hidden)), 4 * hidden, hidden)
        x = _layer_norm(b, rng, b.op("Add", [x, m]), hidden)
    outs = _rename_outputs(b, [(x, "hidden", [1, frames, hidden])])
    g = helper.make_graph(b.nodes, "wav2vec", [tensor_input("audio", TensorProto.FLOAT, [1, samples])],
                          outs, b.inits)
    return g, not small


def resnext(rng, small):
    """A ResNeXt-50 (32x4d)-like classifier: ResNet-50's bottlenecks with
    the 3x3 conv grouped (32 groups of 4 to 32 channels; 4 groups when
    small), batch norms folded by the compiler."""
    b = Builder(rng)
    size, classes, groups = (32, 10, 4) if small else (224, 1000, 32)
    blocks = [1, 1, 1, 1] if small else [3, 4, 6, 3]
    widths = [16, 32, 64, 128] if small else [128, 256, 512, 1024]
    stem = 16 if small else 64
    x = resnet_stem(b, stem)
    cin = stem
    for stage, (n, w) in enumerate(zip(blocks, widths)):
        cout = 2 * w
        for i in range(n):
            stride = 2 if (i == 0 and stage > 0) else 1
            y = b.relu(b.bn(b.conv(x, cin, w, 1), w))
            y = b.relu(b.bn(b.conv(y, w, w, 3, stride=stride, group=groups), w))
            y = b.bn(b.conv(y, w, cout, 1), cout)
            sc = b.bn(b.conv(x, cin, cout, 1, stride=stride), cout) if i == 0 else x
            x = b.relu(b.op("Add", [y, sc]))
            cin = cout
    return resnet_head(b, x, cin, classes, "resnext", size), False


def swin(rng, small):
    """Swin-Transformer-like blocks: window attention over 7x7 windows
    (Reshape to 6-D, Transpose, Reshape), every other block on windows
    shifted by a roll (torch.roll exports as Slice + Concat per axis), a
    learned relative-position bias per head, Q/K/V split by Gather."""
    H, C, heads, win, depth = (14, 32, 2, 7, 2) if small else (56, 96, 3, 7, 4)
    nw, hd = H // win, C // heads
    b = Builder(rng)
    i64 = b.i64

    def roll(x, s):
        for ax in (1, 2):
            a = b.op("Slice", [x, i64([H - s]), i64([H]), i64([ax])])
            c = b.op("Slice", [x, i64([0]), i64([H - s]), i64([ax])])
            x = b.op("Concat", [a, c], axis=ax)
        return x

    x = b.op("Reshape", ["x", i64([1, H * H, C])])
    for d in range(depth):
        shift = win // 2 if d % 2 else 0
        h = b.op("Reshape", [_layer_norm(b, rng, x, C), i64([1, H, H, C])])
        if shift:
            h = roll(h, H - shift)
        h = b.op("Reshape", [h, i64([1, nw, win, nw, win, C])])
        h = b.op("Reshape", [b.op("Transpose", [h], perm=[0, 1, 3, 2, 4, 5]), i64([nw * nw, win * win, C])])
        qkv = b.op("Reshape", [_dense(b, rng, h, C, 3 * C), i64([nw * nw, win * win, 3, heads, hd])])
        qkv = b.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
        q, k, v = (b.op("Gather", [qkv, i64(i)], axis=0) for i in range(3))
        s = b.op("MatMul", [b.op("Mul", [q, b.f32(hd ** -0.5)]), b.op("Transpose", [k], perm=[0, 1, 3, 2])])
        bias = rng.uniform(-1, 1, (heads, win * win, win * win)).astype(F32)
        p = b.op("Softmax", [b.op("Add", [s, b.const("relbias", bias)])], axis=-1)
        o = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        o = _dense(b, rng, b.op("Reshape", [o, i64([nw * nw, win * win, C])]), C, C)
        o = b.op("Reshape", [o, i64([1, nw, nw, win, win, C])])
        o = b.op("Reshape", [b.op("Transpose", [o], perm=[0, 1, 3, 2, 4, 5]), i64([1, H, H, C])])
        if shift:
            o = roll(o, shift)
        x = b.op("Add", [x, b.op("Reshape", [o, i64([1, H * H, C])])])
        m = _dense(b, rng, _gelu(b, _dense(b, rng, _layer_norm(b, rng, x, C), C, 4 * C)), 4 * C, C)
        x = b.op("Add", [x, m])
    outs = _rename_outputs(b, [(x, "features", [1, H * H, C])])
    g = helper.make_graph(b.nodes, "swin", [tensor_input("x", TensorProto.FLOAT, [1, H, H, C])],
                          outs, b.inits)
    return g, False


def _conv_kxk(b, x, cin, cout, kh, kw, stride=1, ph=None, pw=None):
    """Conv (no bias) of a kh x kw kernel, "same" pads unless given, then
    batch norm and relu, as torchvision's BasicConv2d."""
    ph = kh // 2 if ph is None else ph
    pw = kw // 2 if pw is None else pw
    w = b.weight("conv_w", (cout, cin, kh, kw), cin * kh * kw)
    y = b.op("Conv", [x, w], kernel_shape=[kh, kw], strides=[stride, stride], pads=[ph, pw, ph, pw])
    return b.relu(b.bn(y, cout))


def inception(rng, small):
    """An Inception-v3-like classifier: a valid-padded stem, blocks of
    parallel branches (1x1; 5x5; double 3x3; 3x3 average pool then 1x1)
    joined by Concat, factorised 1x7 / 7x1 and 1x3 / 3x1 convs, grid
    reductions by stride-2 convs beside a max pool; 299x299 input."""
    b = Builder(rng)
    size, classes, w = (75, 10, 8) if small else (299, 1000, 32)
    n_a, n_b, n_c = (1, 1, 1) if small else (3, 4, 2)

    def cbr(x, cin, cout, kh, kw=None, stride=1, pad=True):
        kw = kh if kw is None else kw
        return _conv_kxk(b, x, cin, cout, kh, kw, stride,
                         *((None, None) if pad else (0, 0)))

    def avg(x):
        return b.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                    count_include_pad=1)

    def maxp(x):
        return b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])

    x = cbr("data", 3, w, 3, stride=2, pad=False)
    x = cbr(x, w, w, 3, pad=False)
    x = maxp(cbr(x, w, 2 * w, 3))
    x = maxp(cbr(cbr(x, 2 * w, 80 * w // 32, 1), 80 * w // 32, 6 * w, 3, pad=False))
    c = 6 * w
    for i in range(n_a):  # 35x35
        pf = w if i == 0 else 2 * w
        b1 = cbr(x, c, 2 * w, 1)
        b5 = cbr(cbr(x, c, 3 * w // 2, 1), 3 * w // 2, 2 * w, 5)
        b3 = cbr(cbr(cbr(x, c, 2 * w, 1), 2 * w, 3 * w, 3), 3 * w, 3 * w, 3)
        bp = cbr(avg(x), c, pf, 1)
        x = b.op("Concat", [b1, b5, b3, bp], axis=1)
        c = 2 * w + 2 * w + 3 * w + pf
    # grid reduction to 17x17
    r3 = cbr(x, c, 12 * w, 3, stride=2, pad=False)
    rd = cbr(cbr(cbr(x, c, 2 * w, 1), 2 * w, 3 * w, 3), 3 * w, 3 * w, 3, stride=2, pad=False)
    x = b.op("Concat", [r3, rd, maxp(x)], axis=1)
    c = 12 * w + 3 * w + c
    m = 4 * w
    for _ in range(n_b):  # 17x17, factorised 7x7
        b1 = cbr(x, c, 6 * w, 1)
        b7 = cbr(cbr(cbr(x, c, m, 1), m, m, 1, 7), m, 6 * w, 7, 1)
        bd = x
        bd = cbr(bd, c, m, 1)
        bd = cbr(cbr(cbr(cbr(bd, m, m, 7, 1), m, m, 1, 7), m, m, 7, 1), m, 6 * w, 1, 7)
        bp = cbr(avg(x), c, 6 * w, 1)
        x = b.op("Concat", [b1, b7, bd, bp], axis=1)
        c = 24 * w
    # grid reduction to 8x8
    r3 = cbr(cbr(x, c, 6 * w, 1), 6 * w, 10 * w, 3, stride=2, pad=False)
    r7 = cbr(cbr(cbr(cbr(x, c, 6 * w, 1), 6 * w, 6 * w, 1, 7), 6 * w, 6 * w, 7, 1), 6 * w, 6 * w, 3,
             stride=2, pad=False)
    x = b.op("Concat", [r3, r7, maxp(x)], axis=1)
    c = 16 * w + c
    for _ in range(n_c):  # 8x8, branches split into 1x3 and 3x1
        b1 = cbr(x, c, 10 * w, 1)
        t = cbr(x, c, 12 * w, 1)
        b3 = b.op("Concat", [cbr(t, 12 * w, 12 * w, 1, 3), cbr(t, 12 * w, 12 * w, 3, 1)], axis=1)
        t = cbr(cbr(x, c, 14 * w, 1), 14 * w, 12 * w, 3)
        bd = b.op("Concat", [cbr(t, 12 * w, 12 * w, 1, 3), cbr(t, 12 * w, 12 * w, 3, 1)], axis=1)
        bp = cbr(avg(x), c, 6 * w, 1)
        x = b.op("Concat", [b1, b3, bd, bp], axis=1)
        c = 10 * w + 24 * w + 24 * w + 6 * w
    return resnet_head(b, x, c, classes, "inception", size), False


def r3d(rng, small):
    """A ResNet3D-18-like video classifier (torchvision's r3d_18): a 3x7x7
    stem of stride (1, 2, 2), basic blocks of 3x3x3 convs, stride-2
    downsampling in time and space with 1x1x1 shortcuts, batch norms on
    5-D maps, a global average pool; 16 frames of 112x112."""
    b = Builder(rng)
    T, S, classes = (4, 32, 10) if small else (16, 112, 400)
    widths = [8, 16, 32, 64] if small else [64, 128, 256, 512]

    def conv3(x, cin, cout, k, stride, pad):
        w = b.weight("conv_w", (cout, cin) + tuple(k), cin * int(np.prod(k)))
        return b.op("Conv", [x, w], kernel_shape=list(k), strides=list(stride), pads=list(pad) * 2)

    x = b.relu(b.bn(conv3("data", 3, widths[0], (3, 7, 7), (1, 2, 2), (1, 3, 3)), widths[0]))
    cin = widths[0]
    for stage, cout in enumerate(widths):
        for i in range(2):
            s = 2 if (i == 0 and stage > 0) else 1
            y = b.relu(b.bn(conv3(x, cin, cout, (3, 3, 3), (s, s, s), (1, 1, 1)), cout))
            y = b.bn(conv3(y, cout, cout, (3, 3, 3), (1, 1, 1), (1, 1, 1)), cout)
            sc = x
            if s != 1 or cin != cout:
                sc = b.bn(conv3(x, cin, cout, (1, 1, 1), (s, s, s), (0, 0, 0)), cout)
            x = b.relu(b.op("Add", [y, sc]))
            cin = cout
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    out = b.linear(x, cin, classes)
    g = helper.make_graph(b.nodes, "r3d", [tensor_input("data", TensorProto.FLOAT, [1, 3, T, S, S])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, classes])], b.inits)
    return g, False


def c3d(rng, small):
    """A C3D-like video classifier: 3x3x3 convs with biases and ReLUs,
    5-D max pools of (1, 2, 2) then (2, 2, 2), 16 frames of 112x112."""
    b = Builder(rng)
    T, S, classes = (16, 32, 10) if small else (16, 112, 101)
    widths = [8, 16, 32, 32, 32] if small else [64, 128, 256, 512, 512]

    def conv3(x, cin, cout):
        w = b.weight("conv_w", (cout, cin, 3, 3, 3), cin * 27)
        bias = b.const("conv_b", rng.uniform(-0.1, 0.1, cout).astype(F32))
        return b.relu(b.op("Conv", [x, w, bias], kernel_shape=[3, 3, 3], pads=[1] * 6))

    x, cin = "data", 3
    for i, c in enumerate(widths):
        x, cin = conv3(x, cin, c), c
        if i >= 2:
            x = conv3(x, cin, c)
        k = [1, 2, 2] if i == 0 else [2, 2, 2]
        x = b.op("MaxPool", [x], kernel_shape=k, strides=k)
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    out = b.linear(x, cin, classes)
    g = helper.make_graph(b.nodes, "c3d", [tensor_input("data", TensorProto.FLOAT, [1, 3, T, S, S])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, classes])], b.inits)
    return g, False


def deeplab(rng, small):
    """A DeepLabV3-like segmenter: a ResNet-50-like backbone with output
    stride 16 (its last stage dilated by 2 instead of strided), atrous
    spatial pyramid pooling (a 1x1 conv, 3x3 convs of dilation 6, 12 and
    18, a global pooling branch brought back by Resize), a Concat, the
    classifier, and a bilinear Resize of the logits to the input size
    (half_pixel, as PyTorch's align_corners=False exports)."""
    b = Builder(rng)
    size, classes = (64, 5) if small else (384, 21)
    blocks = [1, 1, 1, 1] if small else [3, 4, 6, 3]
    widths = [8, 16, 32, 64] if small else [64, 128, 256, 512]
    stem, aspp = (16, 16) if small else (64, 256)
    x = resnet_stem(b, stem)
    cin = stem
    for stage, (n, w) in enumerate(zip(blocks, widths)):
        cout = 4 * w
        for i in range(n):
            stride = 2 if (i == 0 and stage in (1, 2)) else 1
            dil = 2 if stage == 3 else 1
            y = b.relu(b.bn(b.conv(x, cin, w, 1), w))
            y = b.relu(b.bn(b.conv(y, w, w, 3, stride=stride, dilation=dil), w))
            y = b.bn(b.conv(y, w, cout, 1), cout)
            sc = b.bn(b.conv(x, cin, cout, 1, stride=stride), cout) if i == 0 else x
            x = b.relu(b.op("Add", [y, sc]))
            cin = cout
    f = size // 16
    branches = [b.relu(b.bn(b.conv(x, cin, aspp, 1), aspp))]
    for rate in (6, 12, 18):
        branches.append(b.relu(b.bn(b.conv(x, cin, aspp, 3, dilation=rate), aspp)))
    g = b.relu(b.bn(b.conv(b.op("GlobalAveragePool", [x]), cin, aspp, 1), aspp))
    branches.append(b.op("Resize", [g, "", "", b.i64([1, aspp, f, f])], mode="linear",
                         coordinate_transformation_mode="half_pixel"))
    y = b.op("Concat", branches, axis=1)
    y = b.relu(b.bn(b.conv(y, 5 * aspp, aspp, 1), aspp))
    y = b.relu(b.bn(b.conv(y, aspp, aspp, 3), aspp))
    y = b.conv(y, aspp, classes, 1, bias=True)
    y = b.op("Resize", [y, "", b.f32([1.0, 1.0, 16.0, 16.0])], mode="linear",
             coordinate_transformation_mode="half_pixel")
    outs = _rename_outputs(b, [(y, "logits", [1, classes, size, size])])
    gr = helper.make_graph(b.nodes, "deeplab", [tensor_input("data", TensorProto.FLOAT, [1, 3, size, size])],
                           outs, b.inits)
    return gr, False


def vgg(rng, small):
    """A VGG-16-like classifier: 13 3x3 convs with biases and ReLUs in five
    stages of 64 to 512 channels, 2x2 max pools, then three dense layers
    (PyTorch's Linear as Gemm with transB), the first of 25088 inputs to
    4096; a batch of 2 images of 224x224, so that the dense layers are
    products rather than vector products."""
    b = Builder(rng)
    size, classes, fc = (32, 10, 64) if small else (224, 1000, 4096)
    stages = ([8], [16], [32, 32], [32, 32], [32, 32]) if small else \
        ([64, 64], [128, 128], [256, 256, 256], [512, 512, 512], [512, 512, 512])
    x, cin = "data", 3
    for widths in stages:
        for c in widths:
            x, cin = b.relu(b.conv(x, cin, c, 3, bias=True)), c
        x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    flat = cin * (size // 32) ** 2
    x = b.op("Flatten", [x], axis=1)
    x = b.relu(b.linear(x, flat, fc))
    x = b.relu(b.linear(x, fc, fc))
    out = b.linear(x, fc, classes)
    g = helper.make_graph(b.nodes, "vgg", [tensor_input("data", TensorProto.FLOAT, [2, 3, size, size])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, [2, classes])], b.inits)
    return g, not small


def squeezenet(rng, small):
    """A SqueezeNet-1.1-like classifier: Fire modules (a 1x1 squeeze conv,
    then 1x1 and 3x3 expand convs joined by Concat), max pools with
    ceil_mode (111 -> 55 -> 27 -> 13), a 1x1 conv classifier, a global
    average pool and a Softmax over the classes."""
    b = Builder(rng)
    size, classes = (63, 10) if small else (224, 1000)
    fires = [(16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192), (64, 256), (64, 256)]
    if small:
        fires = [(4, 8), (4, 8), (8, 16), (8, 16)]
    pool_after = (1, 3) if small else (1, 3)

    def pool(x):
        return b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    x = pool(b.relu(b.conv("data", 3, 64 if not small else 8, 3, stride=2, pad=0, bias=True)))
    cin = 64 if not small else 8
    for i, (sq, ex) in enumerate(fires):
        q = b.relu(b.conv(x, cin, sq, 1, bias=True))
        e1 = b.relu(b.conv(q, sq, ex, 1, bias=True))
        e3 = b.relu(b.conv(q, sq, ex, 3, bias=True))
        x, cin = b.op("Concat", [e1, e3], axis=1), 2 * ex
        if i in pool_after:
            x = pool(x)
    x = b.relu(b.conv(x, cin, classes, 1, bias=True))
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    out = b.op("Softmax", [x], axis=1)
    g = helper.make_graph(b.nodes, "squeezenet", [tensor_input("data", TensorProto.FLOAT, [1, 3, size, size])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, classes])], b.inits)
    return g, False


def whisper(rng, small):
    """A Whisper-base-like audio encoder over a log-mel spectrogram [1, 80,
    3000]: two 1-D convs with GELU (the second of stride 2, to 1500
    frames), sinusoidal positions added, pre-LayerNorm transformer layers
    whose attention scales Q and K each by hd^-0.25 (as Whisper's export
    does), a final LayerNorm."""
    b = Builder(rng)
    mels, frames, layers, hidden, heads = (8, 64, 1, 32, 4) if small else (80, 3000, 4, 512, 8)
    hd = hidden // heads
    t = frames // 2
    i64 = b.i64
    x = _gelu(b, _conv1d(b, "mel", mels, hidden, 3, pad=1, bias=True))
    x = _gelu(b, _conv1d(b, x, hidden, hidden, 3, stride=2, pad=1, bias=True))
    x = b.op("Transpose", [x], perm=[0, 2, 1])
    pos = np.arange(t)[:, None] / np.power(10000.0, np.arange(0, hidden, 2)[None, :] / hidden)
    table = np.concatenate([np.sin(pos), np.cos(pos)], axis=1).astype(F32)[None]
    x = b.op("Add", [x, b.const("pos", table)])
    scale = b.f32(float(hd) ** -0.25)

    def heads_of(v, perm):
        return b.op("Transpose", [b.op("Reshape", [v, i64([1, t, heads, hd])])], perm=perm)

    for _ in range(layers):
        h = _layer_norm(b, rng, x, hidden)
        q = heads_of(b.op("Mul", [_dense(b, rng, h, hidden, hidden), scale]), [0, 2, 1, 3])
        k = heads_of(b.op("Mul", [b.op("MatMul", [h, b.weight("wk", (hidden, hidden), hidden)]), scale]),
                     [0, 2, 3, 1])
        v = heads_of(_dense(b, rng, h, hidden, hidden), [0, 2, 1, 3])
        x = _attend_and_mlp(b, rng, x, b.op("MatMul", [q, k]), v, t, hidden)
    x = _layer_norm(b, rng, x, hidden)
    outs = _rename_outputs(b, [(x, "features", [1, t, hidden])])
    g = helper.make_graph(b.nodes, "whisper", [tensor_input("mel", TensorProto.FLOAT, [1, mels, frames])],
                          outs, b.inits)
    return g, not small


MODELS = {"convnext": convnext, "vit": vit, "efficientnet": efficientnet,
          "shufflenet": shufflenet, "densenet": densenet, "speech": speech,
          "textgru": textgru, "llama": llama, "wav2vec": wav2vec,
          "resnext": resnext, "swin": swin, "inception": inception, "r3d": r3d,
          "c3d": c3d, "deeplab": deeplab, "vgg": vgg,
          "squeezenet": squeezenet, "whisper": whisper}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder to write the models to")
    ap.add_argument("--small", action="store_true", help="the small test versions")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated, of %s" % ", ".join(MODELS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models.split(","):
        if name not in MODELS:
            sys.exit("gen_models_more: unknown model '%s' (have %s)" % (name, ", ".join(MODELS)))
        graph, external = MODELS[name](np.random.RandomState(args.seed), args.small)
        path = os.path.join(args.out, name + ("_small" if args.small else "") + ".onnx")
        save(graph, path, external, 17)
        print(path)


if __name__ == "__main__":
    main()
