/*
 * operators.h — the operator workloads the codegen tests compile: every
 * operator of the library with the options that change its index
 * arithmetic, in every dtype family (the 16-bit floats included, whose
 * conversions depend on the target's instructions).
 */
#ifndef TESSERA_TESTS_CODEGEN_OPERATORS_H
#define TESSERA_TESTS_CODEGEN_OPERATORS_H

static const char *const operator_specs[] = {
    "matmul M=8 N=12 K=16",
    "matmul M=8 N=12 K=16 transpose_a=1",
    "matmul M=8 N=12 K=16 transpose_b=1",
    "matmul M=7 N=5 K=3 transpose_a=1 transpose_b=1 dtype=float64",
    "matmul M=8 N=8 K=32 dtype=bfloat16",
    "matmul M=8 N=8 K=32 dtype=float16",
    "matmul M=8 N=8 K=32 dtype=int8",
    "matmul M=8 N=8 K=32 dtype=uint8",
    "batch_matmul B=2 M=4 N=6 K=8",
    "dense M=4 N=6 K=8",
    "dense M=4 N=6 K=8 bias=0",
    "conv2d_nchw N=1 H=7 W=7 CI=4 CO=6 KH=3 KW=3 stride=2 pad=1",
    "conv2d_nhwc N=2 H=6 W=6 CI=4 CO=4 KH=3 KW=3 pad=1 dilation=2 groups=2",
    "conv2d_nhwc N=1 H=5 W=5 CI=4 CO=8 KH=1 KW=1 dtype=int8",
    "depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 stride=2 pad=1",
    "conv2d_transpose_nchw N=1 H=4 W=4 CI=3 CO=2 KH=3 KW=3 stride=2 pad=1",
    "pool2d_nhwc N=1 H=6 W=6 C=3 KH=3 KW=3 stride=2 pad=1 kind=max",
    "pool2d_nhwc N=1 H=6 W=6 C=3 KH=2 KW=2 stride=2 kind=avg",
    "softmax N=4 D=33",
    "layer_norm N=3 D=20",
    "elementwise op=add shape=3x5",
    "elementwise op=mul shape=4x4 dtype=bfloat16",
    "elementwise op=relu shape=17",
    "elementwise op=gelu shape=2x9",
    "elementwise op=sigmoid shape=10",
    "elementwise op=tanh shape=3x3 dtype=float16",
    "reduce op=sum N=5 D=7",
    "reduce op=max N=5 D=7 dtype=int32",
    "transpose shape=2x3x4 perm=2x0x1",
    "layout_transform N=1 C=32 H=3 W=2 src=NCHW dst=NCHW16c",
    "layout_transform N=2 C=3 H=2 W=2 src=NCHW dst=NHWC",
    "pad shape=3x4 before=1x2 after=2x0",
    "softmax N=3 D=40 dtype=bfloat16",
    "layer_norm N=2 D=24 dtype=float16",
    "layer_norm N=2 D=24 dtype=bfloat16",
    "conv2d_nhwc N=1 H=5 W=5 CI=4 CO=8 KH=3 KW=3 pad=1 dtype=bfloat16",
    "conv2d_nchw N=1 H=5 W=5 CI=4 CO=4 KH=3 KW=3 dtype=float16",
    "depthwise_conv2d_nhwc N=1 H=6 W=6 C=8 KH=3 KW=3 pad=1 dtype=bfloat16",
    "pool2d_nhwc N=1 H=6 W=6 C=8 KH=3 KW=3 stride=2 kind=avg dtype=float16",
    "pool2d_nhwc N=1 H=6 W=6 C=8 KH=2 KW=2 stride=2 kind=max dtype=bfloat16",
    "dense M=4 N=6 K=8 dtype=bfloat16",
    "batch_matmul B=2 M=4 N=6 K=8 dtype=float16",
    "elementwise op=gelu shape=3x7 dtype=bfloat16",
    "elementwise op=sigmoid shape=19 dtype=float16",
    "elementwise op=add shape=33 dtype=float64",
    "reduce op=sum N=3 D=21 dtype=bfloat16",
    "reduce op=max N=3 D=21 dtype=float16",
    "transpose shape=4x6 perm=1x0 dtype=bfloat16",
    "layout_transform N=1 C=16 H=2 W=3 src=NHWC dst=NCHW16c dtype=float16",
    "pad shape=5x3 before=1x1 after=0x2 dtype=bfloat16",
    "conv2d_nhwc N=1 H=7 W=7 CI=8 CO=32 KH=3 KW=3 pad=1 weight_block=16",
};
#define N_OPERATOR_SPECS                                                       \
  ((int)(sizeof operator_specs / sizeof operator_specs[0]))

#endif /* TESSERA_TESTS_CODEGEN_OPERATORS_H */
