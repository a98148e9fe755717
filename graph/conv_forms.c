/*
 * conv_forms.c — one conv2d_nhwc workload as the graph compiler runs it in
 * each of its forms (direct, Winograd F(2x2, 3x3), F(4x4, 3x3)), so that
 * `tessera tune --workload ... --winograd` can tune the forms' tasks and
 * `tessera bench --workload` time them against the direct kernel and the
 * vendor libraries: the same stages, fusion and transformed-weight layout
 * as in a compiled model (graph/winograd.c).
 *
 * The graph is the ONNX form (an NCHW input, OIHW weights, a Conv with one
 * pixel of padding) with channels-last inputs and outputs, so that after
 * the layout pass nothing but the conv's own tasks runs: the direct conv,
 * or the input transform, the batched product over the weights transformed
 * once at compile time, and the output transform.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why conv2d_nhwc with these keys has no Winograd form; NULL when it has. */
static const char *not_eligible(const ts_conv_form_spec *c) {
  if (c->kh != 3 || c->kw != 3) return "its kernel is not 3x3";
  if (c->stride != 1) return "its stride is not 1";
  if (c->dilation != 1) return "it is dilated";
  if (c->pad < 0 || c->pad > 2)
    return "its padding is more than two pixels on a side";
  if (c->groups != 1) return "it is grouped";
  if (c->weight_block) return "its weights are blocked (weight_block)";
  if (!c->float32) return "it is not float32";
  if (c->ci < 32 || c->co < 32)
    return "it has fewer than 32 input or output channels (the transforms "
           "would cost more than the product saves)";
  return NULL;
}

static int set_ints(ts_graph *g, gr_node *n, const char *name, int k,
                    const int64_t *v) {
  int64_t *copy = ts_arena_alloc(g->arena, sizeof(int64_t) * (size_t)k);
  if (!copy) return TS_ENOMEM;
  memcpy(copy, v, sizeof(int64_t) * (size_t)k);
  gr_node_set_attr(
      g, n,
      (gr_attr){.name = name, .kind = GR_ATTR_INTS, .n = k, .ints = copy});
  return TS_OK;
}

/* The ONNX graph of the conv: x [n, ci, h, w], OIHW weights from hwio. */
static ts_graph *conv_graph(const ts_conv_form_spec *c, const float *hwio) {
  ts_graph *g = ts_graph_new("conv_forms");
  if (!g) return NULL;
  int64_t kk = c->kh * c->kw, nw = c->co * c->ci * kk;
  float *oihw = malloc(sizeof(float) * (size_t)nw);
  int x = oihw ? gr_value_add(g, "x", TS_FLOAT32, 4,
                              (int64_t[]){c->n, c->ci, c->h, c->w})
               : -1;
  int *ins = x >= 0 ? ts_arena_alloc(g->arena, sizeof(int)) : NULL;
  int *outs = ins ? ts_arena_alloc(g->arena, sizeof(int)) : NULL;
  if (!outs) goto fail;
  for (int64_t o = 0; o < c->co; o++)
    for (int64_t i = 0; i < c->ci; i++)
      for (int64_t k = 0; k < kk; k++)
        oihw[(o * c->ci + i) * kk + k] =
            hwio ? hwio[(k * c->ci + i) * c->co + o]
                 : (float)(((o * 31 + i * 7 + k * 3) % 29) - 14) / 64.0f;
  g->values[x].is_input = true;
  g->values[x].layout = "NCHW";
  ins[0] = x;
  g->inputs = ins;
  g->n_inputs = 1;
  int w = gr_const_add(g, "w", TS_FLOAT32, 4,
                       (int64_t[]){c->co, c->ci, c->kh, c->kw}, oihw);
  int y = w >= 0 ? gr_value_add(g, "y", TS_FLOAT32, -1, NULL) : -1;
  gr_node *conv =
      y >= 0 ? gr_node_add(g, "Conv", "conv", (int[]){x, w}, 2, &y, 1) : NULL;
  int64_t p = c->pad, st = c->stride, d = c->dilation;
  if (!conv || set_ints(g, conv, "pads", 4, (int64_t[]){p, p, p, p}) ||
      set_ints(g, conv, "kernel_shape", 2, (int64_t[]){c->kh, c->kw}) ||
      set_ints(g, conv, "strides", 2, (int64_t[]){st, st}) ||
      set_ints(g, conv, "dilations", 2, (int64_t[]){d, d}))
    goto fail;
  outs[0] = y;
  g->outputs = outs;
  g->n_outputs = 1;
  free(oihw);
  return g;
fail:
  free(oihw);
  ts_graph_free(g);
  return NULL;
}

int ts_conv_form_graph(const ts_conv_form_spec *c, const float *hwio, int m,
                       ts_graph **out, ts_error *err) {
  *out = NULL;
  if (m != 0 && m != 2 && m != 4)
    return TS_ERR(err, TS_EINVAL,
                  "conv forms: tile %d (0 direct, 2 F(2x2), 4 F(4x4))", m);
  if (!m && (c->groups != 1 || c->weight_block || !c->float32))
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "conv forms: the direct form takes float32 convs of one "
                  "group with HWIO weights");
  const char *why = m ? not_eligible(c) : NULL;
  if (why)
    return TS_ERR(err, TS_EUNSUPPORTED, "conv forms: no Winograd form: %s",
                  why);
  ts_graph *g = conv_graph(c, hwio);
  if (!g) return TS_ERR(err, TS_ENOMEM, "conv forms: out of memory");
  int rc = ts_graph_set_io_layout(g, "nhwc", "nhwc", err);
  ts_graph_set_winograd(g, m != 0);
  ts_graph_set_winograd_tile(g, m);
  g->winograd_any = true; /* the form asked for, whatever the image size */
  if (!rc) rc = ts_graph_run_passes(g, NULL, err);
  if (!rc && m && ts_graph_count_op(g, "WinogradInput") == 0) {
    bool rewritten = false;
    for (int i = 0; i < g->n_nodes && !rewritten; i++)
      rewritten = g->nodes[i].kind == TS_GRAPH_CALL &&
                  !strncmp(g->nodes[i].name, "fused_winograd", 14);
    if (!rewritten)
      rc = TS_ERR(err, TS_EUNSUPPORTED,
                  "conv forms: the winograd pass left the conv direct");
  }
  if (rc) {
    ts_graph_free(g);
    return rc;
  }
  *out = g;
  return TS_OK;
}

const char *ts_conv_form_why_not(const ts_conv_form_spec *c) {
  return not_eligible(c);
}
