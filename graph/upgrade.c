/*
 * upgrade.c — operators of opsets 7 to 12 in the form opset 13 gives them,
 * at import, so that every later rule knows one form:
 *   Slice (before 10)   starts, ends, axes attributes -> constant inputs
 *   Pad (before 11)     pads and value attributes -> constant inputs
 *   Clip (before 11)    min and max attributes -> constant inputs
 *   Upsample (7 to 9)   -> Resize(X, "", scales) with the asymmetric
 *                          coordinates and floor rounding it had (scales an
 *                          attribute before 9, an input from 9)
 *   Resize (10)         (X, scales) -> (X, "", scales), asymmetric, floor
 * Softmax and LogSoftmax of opsets before 13 (the input coerced to 2-D at
 * the axis, default 1) need the shapes: lower_more.c rewrites them. The
 * other operators this project handles read their opset-11/12 attribute
 * forms directly (Split's split, Squeeze's and the reductions' axes).
 */
#include "internal.h"

#include <string.h>

/* A constant input from an INTS attribute (absent: -1). */
static int ints_input(ts_graph *g, const gr_node *n, const char *attr) {
  int c = 0;
  const int64_t *v = gr_attr_ints(n, attr, &c);
  if (!v) return -1;
  int64_t len = c;
  return gr_const_add(g, gr_fresh_name(g, attr), TS_INT64, 1, &len, v);
}

/* Gives n the inputs ins (count k), copied into the arena. */
static int set_inputs(ts_graph *g, gr_node *n, const int *ins, int k) {
  int *p = gr_alloc(g, sizeof(int) * (size_t)(k + 1));
  if (!p) return TS_ENOMEM;
  memcpy(p, ins, sizeof(int) * (size_t)k);
  n->inputs = p;
  n->n_inputs = k;
  return TS_OK;
}

static void set_string(ts_graph *g, gr_node *n, const char *name,
                       const char *s) {
  gr_node_set_attr(g, n,
                   (gr_attr){.name = name, .kind = GR_ATTR_STRING, .s = s});
}

int gr_upgrade_node(ts_graph *g, gr_node *n, ts_error *err) {
  const char *op = n->op;
  int opset = g->opset;
  if (!strcmp(op, "Slice") && opset < 10 && n->n_inputs == 1) {
    int ins[4] = {n->inputs[0], ints_input(g, n, "starts"),
                  ints_input(g, n, "ends"), ints_input(g, n, "axes")};
    if (ins[1] < 0 || ins[2] < 0)
      return TS_ERR(err, TS_EINVAL,
                    "node '%s' (Slice, opset %d): needs the "
                    "starts and ends attributes",
                    n->name, opset);
    return set_inputs(g, n, ins, ins[3] >= 0 ? 4 : 3);
  }
  if (!strcmp(op, "Pad") && opset < 11 && n->n_inputs == 1) {
    int ins[3] = {n->inputs[0], ints_input(g, n, "pads"), -1};
    if (ins[1] < 0)
      return TS_ERR(err, TS_EINVAL, "node '%s' (Pad, opset %d): needs pads",
                    n->name, opset);
    float v = (float)gr_attr_float(n, "value", 0);
    if (n->inputs[0] >= 0 && g->values[n->inputs[0]].dtype.code == TS_DT_FLOAT)
      ins[2] =
          gr_const_add(g, gr_fresh_name(g, "value"), TS_FLOAT32, 0, NULL, &v);
    return set_inputs(g, n, ins, ins[2] >= 0 ? 3 : 2);
  }
  if (!strcmp(op, "Clip") && opset < 11 && n->n_inputs == 1) {
    float lim[2] = {(float)gr_attr_float(n, "min", -3.4028234663852886e38),
                    (float)gr_attr_float(n, "max", 3.4028234663852886e38)};
    int ins[3] = {n->inputs[0], -1, -1};
    for (int k = 0; k < 2; k++)
      ins[k + 1] = gr_const_add(g, gr_fresh_name(g, k ? "max" : "min"),
                                TS_FLOAT32, 0, NULL, &lim[k]);
    return set_inputs(g, n, ins, 3);
  }
  bool up = !strcmp(op, "Upsample");
  if (up || (!strcmp(op, "Resize") && opset < 11)) {
    int scales = n->n_inputs > 1 ? n->inputs[1] : -1;
    if (scales < 0) {
      int c = 0;
      const double *f =
          gr_attr_find(n, "scales") ? gr_attr_find(n, "scales")->floats : NULL;
      c = f ? gr_attr_find(n, "scales")->n : 0;
      float fs[TS_MAX_DIMS];
      if (!f || c > TS_MAX_DIMS)
        return TS_ERR(err, TS_EINVAL,
                      "node '%s' (%s, opset %d): needs "
                      "scales",
                      n->name, op, opset);
      for (int i = 0; i < c; i++) fs[i] = (float)f[i];
      int64_t len = c;
      scales =
          gr_const_add(g, gr_fresh_name(g, "scales"), TS_FLOAT32, 1, &len, fs);
    }
    int ins[3] = {n->inputs[0], -1, scales};
    int rc = set_inputs(g, n, ins, 3);
    if (rc) return rc;
    n->op = "Resize";
    set_string(g, n, "coordinate_transformation_mode", "asymmetric");
    set_string(g, n, "nearest_mode", "floor");
    if (!strcmp(gr_attr_string(n, "mode", "nearest"), "bilinear"))
      set_string(g, n, "mode", "linear");
    return g->oom ? TS_ENOMEM : TS_OK;
  }
  return TS_OK;
}
