/*
 * printer.c — the canonical text form of functions, statements and
 * expressions (grammar in docs/ir.md). Output is stable: the same IR always
 * prints the same bytes. Names are scope-aware: a var or buffer whose name is
 * already visible, is reserved (keyword, dtype or intrinsic name) or is not an
 * identifier is printed under a sanitized name with a numeric suffix, so the
 * text parses back to the same structure (print(parse(print(f))) ==
 * print(f)). Expressions get the fewest parentheses that parse back to the
 * same tree, and floats the shortest digits that read back to the same value.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Longest name the printer emits; the parser accepts at least this much. */
#define MAX_NAME 255

/* ---- names ---- */

static const char *const keywords[] = {
    "func",     "attrs",     "strides", "scope",    "align",      "for",
    "in",       "range",     "serial",  "parallel", "vectorized", "unrolled",
    "thread",   "annotate",  "block",   "where",    "reads",      "writes",
    "alloc",    "init",      "spatial", "reduce",   "opaque",     "if",
    "else",     "evaluate",  "let",     "allocate", "true",       "false",
    "floordiv", "floormod",  "min",     "max",      "select",     "cast",
    "ramp",     "broadcast", "call",    "inf",      "nan",
};

bool ts_text_name_is_reserved(const char *name) {
  if (!name) return false;
  for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
    if (strcmp(keywords[i], name) == 0) return true;
  if (ts_intrinsic_lookup(name)) return true;
  ts_dtype t;
  return ts_dtype_parse(name, strlen(name), &t) == TS_OK;
}

static bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_ident_char(char c) {
  return is_ident_start(c) || (c >= '0' && c <= '9');
}

/* Whether s is a syntactically valid identifier the parser accepts. */
static bool is_identifier(const char *s) {
  if (!s || !is_ident_start(s[0])) return false;
  size_t n = 0;
  for (; s[n]; n++)
    if (!is_ident_char(s[n])) return false;
  return n <= MAX_NAME;
}

typedef struct name_entry {
  const void *node; /* the var or buffer */
  const char *name; /* its printed name */
} name_entry;

typedef struct printer {
  strbuf out;
  int indent;
  name_entry *names; /* visible definitions, innermost last */
  int n_names, cap_names;
  ts_arena *scratch; /* printed names */
  int depth;         /* levels open (TS_TIR_MAX_DEPTH's counting) */
  unsigned long oom; /* ts_alloc_failures() at the start */
} printer;

static void printer_init(printer *p) {
  memset(p, 0, sizeof *p);
  sb_init(&p->out);
  p->oom = ts_alloc_failures();
  p->scratch = ts_arena_create();
}

/* The text, or NULL when memory ran out while it was printed. */
static char *printer_finish(printer *p) {
  free(p->names);
  ts_arena_destroy(p->scratch);
  char *text = sb_take(&p->out);
  if (text && ts_alloc_failures() != p->oom) {
    free(text);
    text = NULL;
  }
  return text;
}

/* Writes a valid identifier for `raw` into out: invalid characters become
 * '_', a leading digit gets a '_' prefix, empty names become `fallback`,
 * overlong names are cut. Valid names pass through unchanged. */
static void sanitize(const char *raw, const char *fallback,
                     char out[MAX_NAME + 1]) {
  if (!raw || !raw[0]) raw = fallback;
  size_t n = 0;
  if (!is_ident_start(raw[0])) out[n++] = '_';
  for (size_t i = 0; raw[i] && n < MAX_NAME; i++)
    out[n++] = is_ident_char(raw[i]) ? raw[i] : '_';
  out[n] = 0;
}

static bool name_taken(const printer *p, const char *name) {
  if (ts_text_name_is_reserved(name)) return true;
  for (int i = 0; i < p->n_names; i++)
    if (strcmp(p->names[i].name, name) == 0) return true;
  return false;
}

/* The name printed when the scratch arena has no memory for one (the
 * failure is counted, so the text is dropped: printer_finish). */
#define OOM_NAME "_"

/* Makes `node` visible under a fresh name derived from raw; returns it. */
static const char *define(printer *p, const void *node, const char *raw,
                          const char *fallback) {
  char base[MAX_NAME + 1], cand[MAX_NAME + 1];
  sanitize(raw, fallback, base);
  memcpy(cand, base, sizeof cand);
  for (long k = 1; name_taken(p, cand); k++) {
    char suffix[24];
    int sl = snprintf(suffix, sizeof suffix, "_%ld", k);
    size_t keep = strlen(base);
    if (keep + (size_t)sl > MAX_NAME) keep = MAX_NAME - (size_t)sl;
    memcpy(cand, base, keep);
    memcpy(cand + keep, suffix, (size_t)sl + 1);
  }
  if (p->n_names == p->cap_names) {
    int cap = p->cap_names ? p->cap_names * 2 : 32;
    name_entry *ne = ts_realloc(p->names, sizeof *ne * (size_t)cap);
    if (!ne) return OOM_NAME; /* counted */
    p->names = ne;
    p->cap_names = cap;
  }
  const char *name = ts_arena_strdup(p->scratch, cand);
  if (!name) return OOM_NAME;
  p->names[p->n_names++] = (name_entry){node, name};
  return name;
}

/* The printed name of a var or buffer; one not defined in the printed text
 * (a free var, or the statement printed alone) keeps its sanitized name. */
static const char *name_of(printer *p, const void *node, const char *raw,
                           const char *fallback) {
  for (int i = p->n_names - 1; i >= 0; i--)
    if (p->names[i].node == node) return p->names[i].name;
  char buf[MAX_NAME + 1];
  sanitize(raw, fallback, buf);
  const char *name = ts_arena_strdup(p->scratch, buf);
  return name ? name : OOM_NAME;
}

static const char *raw_var_name(const ts_expr *v) {
  return v && v->kind == TS_EXPR_VAR ? v->u.var.name : NULL;
}
static const char *var_name(printer *p, const ts_expr *v) {
  return name_of(p, v, raw_var_name(v), "v");
}
static const char *buffer_name(printer *p, const ts_buffer *b) {
  return b ? name_of(p, b, b->name, "buf") : "<null>";
}

/* ---- small pieces ---- */

static void put_string(strbuf *sb, const char *s) {
  sb_putc(sb, '"');
  for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
    switch (*c) {
    case '"': sb_puts(sb, "\\\""); break;
    case '\\': sb_puts(sb, "\\\\"); break;
    case '\n': sb_puts(sb, "\\n"); break;
    case '\t': sb_puts(sb, "\\t"); break;
    default:
      if (*c < 0x20 || *c >= 0x7f)
        sb_printf(sb, "\\x%02x", *c);
      else
        sb_putc(sb, (char)*c);
    }
  }
  sb_putc(sb, '"');
}

/* A function or block name: bare when it is an identifier, else quoted. */
static void put_label(strbuf *sb, const char *name) {
  if (is_identifier(name))
    sb_puts(sb, name);
  else
    put_string(sb, name);
}

static void put_dtype(strbuf *sb, ts_dtype t) {
  char buf[32];
  sb_puts(sb, ts_dtype_str(t, buf));
}

static void put_indent(printer *p) {
  for (int i = 0; i < p->indent; i++) sb_puts(&p->out, "  ");
}

static void put_ann_value(strbuf *sb, const ts_annotation *a) {
  switch (a->kind) {
  case TS_ANN_INT: sb_printf(sb, "%lld", (long long)a->i); break;
  case TS_ANN_FLOAT: {
    char buf[64];
    format_float(buf, sizeof buf, a->f, TS_FLOAT64);
    sb_puts(sb, buf);
    /* Keep it a float when read back. */
    if (!strpbrk(buf, ".eEn")) sb_puts(sb, ".0");
    break;
  }
  case TS_ANN_STRING: put_string(sb, a->s); break;
  }
}

/* ` {"key": value, ...}` */
static void put_annotations(strbuf *sb, const ann_list *l) {
  sb_puts(sb, " {");
  for (int i = 0; i < l->n; i++) {
    if (i) sb_puts(sb, ", ");
    put_string(sb, l->items[i].key);
    sb_puts(sb, ": ");
    put_ann_value(sb, &l->items[i]);
  }
  sb_putc(sb, '}');
}

static void put_buffer_type(strbuf *sb, const ts_buffer *b) {
  put_dtype(sb, b->dtype);
  sb_putc(sb, '[');
  for (int i = 0; i < b->ndim; i++)
    sb_printf(sb, "%s%lld", i ? ", " : "", (long long)b->shape[i]);
  sb_putc(sb, ']');
  if (b->has_strides) {
    sb_puts(sb, " strides [");
    for (int i = 0; i < b->ndim; i++)
      sb_printf(sb, "%s%lld", i ? ", " : "", (long long)b->strides[i]);
    sb_putc(sb, ']');
  }
  if (b->scope && strcmp(b->scope, "global") != 0) {
    sb_puts(sb, " scope ");
    put_string(sb, b->scope);
  }
  if (b->align != TS_DEFAULT_ALIGN) sb_printf(sb, " align %d", b->align);
}

/* ---- expressions ---- */

/* Binding strength: 1 `||`, 2 `&&`, 3 comparisons, 4 `+ -`, 5 `* / %`,
 * 6 unary (`!x`, negative index literals), 7 primaries. */
static int precedence(const ts_expr *e) {
  switch (e->kind) {
  case TS_EXPR_OR: return 1;
  case TS_EXPR_AND: return 2;
  case TS_EXPR_EQ:
  case TS_EXPR_NE:
  case TS_EXPR_LT:
  case TS_EXPR_LE:
  case TS_EXPR_GT:
  case TS_EXPR_GE: return 3;
  case TS_EXPR_ADD:
  case TS_EXPR_SUB: return 4;
  case TS_EXPR_MUL:
  case TS_EXPR_DIV:
  case TS_EXPR_MOD: return 5;
  case TS_EXPR_NOT: return 6;
  case TS_EXPR_INT:
    return ts_dtype_eq(e->dtype, TS_INDEX) && e->u.int_value < 0 ? 6 : 7;
  default: return 7;
  }
}

static const char *infix_op(ts_expr_kind k) {
  switch (k) {
  case TS_EXPR_ADD: return "+";
  case TS_EXPR_SUB: return "-";
  case TS_EXPR_MUL: return "*";
  case TS_EXPR_DIV: return "/";
  case TS_EXPR_MOD: return "%";
  case TS_EXPR_EQ: return "==";
  case TS_EXPR_NE: return "!=";
  case TS_EXPR_LT: return "<";
  case TS_EXPR_LE: return "<=";
  case TS_EXPR_GT: return ">";
  case TS_EXPR_GE: return ">=";
  case TS_EXPR_AND: return "&&";
  case TS_EXPR_OR: return "||";
  default: return NULL;
  }
}

/* Whether a call can be printed as `name(args)`: a built-in intrinsic whose
 * arguments pass the parser's checks and whose type follows from them. */
static bool short_call(const ts_expr *e) {
  const ts_intrinsic_info *info = ts_intrinsic_lookup(e->u.call.name);
  if (!info || info->rule == TS_INTRIN_EXPLICIT) return false;
  int n = e->u.call.n_args;
  ts_expr **args = e->u.call.args;
  if (info->n_args >= 0 && n != info->n_args) return false;
  for (int i = 0; i < n; i++)
    if (!args[i] || (info->float_only && !ts_dtype_is_float(args[i]->dtype)))
      return false;
  if (info->rule == TS_INTRIN_SAME_AS_ARG0)
    return n >= 1 && ts_dtype_eq(e->dtype, args[0]->dtype);
  /* if_then_else(cond, a, b) */
  return n == 3 && ts_dtype_is_bool(args[0]->dtype) &&
         ts_dtype_eq(args[1]->dtype, args[2]->dtype) &&
         ts_dtype_eq(e->dtype, args[1]->dtype);
}

static void print_expr(printer *p, const ts_expr *e, int need);

static void print_args(printer *p, ts_expr *const *args, int n, bool comma) {
  for (int i = 0; i < n; i++) {
    if (i || comma) sb_puts(&p->out, ", ");
    print_expr(p, args[i], 0);
  }
}

static void print_indices(printer *p, const ts_buffer *b, ts_expr *const *idx,
                          int n) {
  sb_puts(&p->out, buffer_name(p, b));
  sb_putc(&p->out, '[');
  print_args(p, idx, n, false);
  sb_putc(&p->out, ']');
}

static void print_int(printer *p, const ts_expr *e) {
  strbuf *sb = &p->out;
  int64_t v = e->u.int_value;
  if (ts_dtype_eq(e->dtype, TS_INDEX)) {
    sb_printf(sb, "%lld", (long long)v);
    return;
  }
  if (ts_dtype_eq(e->dtype, TS_BOOL)) {
    sb_puts(sb, v ? "true" : "false");
    return;
  }
  put_dtype(sb, e->dtype);
  if (e->dtype.code == TS_DT_UINT || e->dtype.code == TS_DT_HANDLE)
    sb_printf(sb, "(%llu)", (unsigned long long)v);
  else
    sb_printf(sb, "(%lld)", (long long)v);
}

static void print_expr_node(printer *p, const ts_expr *e, int need);

/* Prints e, in parentheses when it binds looser than `need`; a tree deeper
 * than TS_TIR_MAX_DEPTH (which nothing parsed or verified has) is cut with
 * a marker instead of overflowing the stack. */
static void print_expr(printer *p, const ts_expr *e, int need) {
  if (p->depth >= TS_TIR_MAX_DEPTH) {
    sb_printf(&p->out, "<nested deeper than %d levels>", TS_TIR_MAX_DEPTH);
    return;
  }
  p->depth++;
  print_expr_node(p, e, need);
  p->depth--;
}

static void print_expr_node(printer *p, const ts_expr *e, int need) {
  strbuf *sb = &p->out;
  if (!e) {
    sb_puts(sb, "<null>");
    return;
  }
  bool paren = precedence(e) < need;
  if (paren) sb_putc(sb, '(');
  const char *op = infix_op((ts_expr_kind)e->kind);
  if (op) {
    int prec = precedence(e);
    /* Left-associative; comparisons do not chain. */
    print_expr(p, e->u.op.a, ts_expr_is_compare(e->kind) ? prec + 1 : prec);
    sb_printf(sb, " %s ", op);
    print_expr(p, e->u.op.b, prec + 1);
    if (paren) sb_putc(sb, ')');
    return;
  }
  switch (e->kind) {
  case TS_EXPR_INT: print_int(p, e); break;
  case TS_EXPR_FLOAT: {
    char buf[64];
    format_float(buf, sizeof buf, e->u.float_value, e->dtype);
    put_dtype(sb, e->dtype);
    sb_printf(sb, "(%s)", buf);
    break;
  }
  case TS_EXPR_VAR: sb_puts(sb, var_name(p, e)); break;
  case TS_EXPR_FLOORDIV:
  case TS_EXPR_FLOORMOD:
  case TS_EXPR_MIN:
  case TS_EXPR_MAX:
    sb_puts(sb, ts_expr_kind_name((ts_expr_kind)e->kind));
    sb_putc(sb, '(');
    print_expr(p, e->u.op.a, 0);
    sb_puts(sb, ", ");
    print_expr(p, e->u.op.b, 0);
    sb_putc(sb, ')');
    break;
  case TS_EXPR_NOT:
    sb_putc(sb, '!');
    print_expr(p, e->u.op.a, 6);
    break;
  case TS_EXPR_SELECT:
    sb_puts(sb, "select(");
    print_expr(p, e->u.op.a, 0);
    sb_puts(sb, ", ");
    print_expr(p, e->u.op.b, 0);
    sb_puts(sb, ", ");
    print_expr(p, e->u.op.c, 0);
    sb_putc(sb, ')');
    break;
  case TS_EXPR_CAST:
    sb_puts(sb, "cast(");
    put_dtype(sb, e->dtype);
    sb_puts(sb, ", ");
    print_expr(p, e->u.op.a, 0);
    sb_putc(sb, ')');
    break;
  case TS_EXPR_LOAD:
    print_indices(p, e->u.load.buffer, e->u.load.indices, e->u.load.n_indices);
    break;
  case TS_EXPR_ADDRESS_OF:
    sb_putc(sb, '&');
    print_indices(p, e->u.load.buffer, e->u.load.indices, e->u.load.n_indices);
    break;
  case TS_EXPR_RAMP:
    sb_puts(sb, "ramp(");
    print_expr(p, e->u.op.a, 0);
    sb_puts(sb, ", ");
    print_expr(p, e->u.op.b, 0);
    sb_printf(sb, ", %d)", e->dtype.lanes);
    break;
  case TS_EXPR_BROADCAST:
    sb_puts(sb, "broadcast(");
    print_expr(p, e->u.op.a, 0);
    sb_printf(sb, ", %d)", e->dtype.lanes);
    break;
  case TS_EXPR_CALL:
    if (short_call(e)) {
      sb_puts(sb, e->u.call.name);
      sb_putc(sb, '(');
      print_args(p, e->u.call.args, e->u.call.n_args, false);
    } else {
      sb_puts(sb, "call<");
      put_dtype(sb, e->dtype);
      sb_puts(sb, ">(");
      put_string(sb, e->u.call.name);
      print_args(p, e->u.call.args, e->u.call.n_args, true);
    }
    sb_putc(sb, ')');
    break;
  case TS_EXPR_LET: {
    /* The value is printed outside the var's scope (a fresh name never
     * shadows, so it prints the same either way). */
    int mark = p->n_names;
    sb_puts(sb, "(let ");
    sb_puts(sb, define(p, e->u.let.var, raw_var_name(e->u.let.var), "v"));
    sb_puts(sb, " = ");
    print_expr(p, e->u.let.value, 0);
    sb_puts(sb, " in ");
    print_expr(p, e->u.let.body, 0);
    sb_putc(sb, ')');
    p->n_names = mark;
    break;
  }
  default: sb_printf(sb, "<expr kind %d>", e->kind); break;
  }
  if (paren) sb_putc(sb, ')');
}

/* `EXTENT` when min is the zero of extent's type, else `MIN +: EXTENT`. */
static void print_range(printer *p, ts_expr *min, ts_expr *extent) {
  if (!(min && extent && min->kind == TS_EXPR_INT && min->u.int_value == 0 &&
        ts_dtype_eq(min->dtype, extent->dtype))) {
    print_expr(p, min, 0);
    sb_puts(&p->out, " +: ");
  }
  print_expr(p, extent, 0);
}

static void print_regions(printer *p, const char *what, const ts_region *r,
                          int n) {
  strbuf *sb = &p->out;
  put_indent(p);
  sb_printf(sb, "%s(", what);
  for (int i = 0; i < n; i++) {
    if (i) sb_puts(sb, ", ");
    sb_puts(sb, buffer_name(p, r[i].buffer));
    sb_putc(sb, '[');
    for (int d = 0; d < r[i].ndim; d++) {
      if (d) sb_puts(sb, ", ");
      ts_expr *ext = r[i].ranges[d].extent;
      int64_t one;
      if (ext && ts_dtype_eq(ext->dtype, TS_INDEX) &&
          ts_expr_is_const_int(ext, &one) && one == 1)
        print_expr(p, r[i].ranges[d].min, 0);
      else {
        print_expr(p, r[i].ranges[d].min, 0);
        sb_puts(sb, " +: ");
        print_expr(p, ext, 0);
      }
    }
    sb_putc(sb, ']');
  }
  sb_puts(sb, ")\n");
}

/* ---- statements ---- */

static void print_stmt(printer *p, const ts_stmt *s);

/* ` {\n STMTS }\n` around a body printed one level deeper. */
static void print_braced(printer *p, const ts_stmt *body) {
  sb_puts(&p->out, " {\n");
  p->indent++;
  print_stmt(p, body);
  p->indent--;
  put_indent(p);
  sb_puts(&p->out, "}\n");
}

static void print_block_realize(printer *p, const ts_stmt *s) {
  strbuf *sb = &p->out;
  const ts_block *b = s->u.realize.block;
  int mark = p->n_names;
  put_indent(p);
  sb_puts(sb, "block ");
  put_label(sb, b->name);
  sb_putc(sb, '(');
  /* Domains, values and the predicate are in the enclosing scope; they
   * print the same either way because fresh names never shadow. */
  for (int i = 0; i < b->n_iters; i++) {
    const iter_var *iv = &b->iters[i];
    if (i) sb_puts(sb, ", ");
    sb_puts(sb, define(p, iv->var, raw_var_name(iv->var), "v"));
    sb_printf(sb, ": %s(", ts_iter_kind_name((ts_iter_kind)iv->kind));
    print_range(p, iv->dom.min, iv->dom.extent);
    sb_puts(sb, ") = ");
    print_expr(p, i < s->u.realize.n_values ? s->u.realize.values[i] : NULL, 0);
  }
  sb_putc(sb, ')');
  if (s->u.realize.predicate) {
    sb_puts(sb, " where ");
    print_expr(p, s->u.realize.predicate, 0);
  }
  sb_puts(sb, " {\n");
  p->indent++;
  /* Allocations are visible in the whole block, regions included. */
  for (int i = 0; i < b->n_allocs; i++)
    define(p, b->allocs[i], b->allocs[i]->name, "buf");
  print_regions(p, "reads", b->reads, b->n_reads);
  print_regions(p, "writes", b->writes, b->n_writes);
  for (int i = 0; i < b->n_allocs; i++) {
    put_indent(p);
    sb_printf(sb, "alloc %s: ", buffer_name(p, b->allocs[i]));
    put_buffer_type(sb, b->allocs[i]);
    sb_putc(sb, '\n');
  }
  if (b->anns.n) {
    put_indent(p);
    sb_puts(sb, "annotate");
    put_annotations(sb, &b->anns);
    sb_putc(sb, '\n');
  }
  if (b->init) {
    put_indent(p);
    sb_puts(sb, "init");
    print_braced(p, b->init);
  }
  print_stmt(p, b->body);
  p->indent--;
  put_indent(p);
  sb_puts(sb, "}\n");
  p->n_names = mark;
}

static void print_stmt_node(printer *p, const ts_stmt *s);

/* Prints s (cut with a marker beyond TS_TIR_MAX_DEPTH, as print_expr). */
static void print_stmt(printer *p, const ts_stmt *s) {
  if (p->depth >= TS_TIR_MAX_DEPTH) {
    put_indent(p);
    sb_printf(&p->out, "# nested deeper than %d levels\n", TS_TIR_MAX_DEPTH);
    return;
  }
  p->depth++;
  print_stmt_node(p, s);
  p->depth--;
}

static void print_stmt_node(printer *p, const ts_stmt *s) {
  strbuf *sb = &p->out;
  if (!s) return;
  int mark = p->n_names;
  switch (s->kind) {
  case TS_STMT_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) print_stmt(p, s->u.seq.items[i]);
    return;
  case TS_STMT_FOR: {
    put_indent(p);
    sb_puts(sb, "for ");
    sb_puts(sb, define(p, s->u.loop.var, raw_var_name(s->u.loop.var), "v"));
    sb_puts(sb, " in range(");
    print_range(p, s->u.loop.min, s->u.loop.extent);
    sb_putc(sb, ')');
    switch ((ts_for_kind)s->u.loop.kind) {
    case TS_FOR_SERIAL: break;
    case TS_FOR_PARALLEL: sb_puts(sb, " parallel"); break;
    case TS_FOR_VECTORIZED: sb_puts(sb, " vectorized"); break;
    case TS_FOR_UNROLLED: sb_puts(sb, " unrolled"); break;
    case TS_FOR_THREAD:
      sb_puts(sb, " thread(");
      put_string(sb, s->u.loop.thread_tag);
      sb_putc(sb, ')');
      break;
    }
    if (s->u.loop.anns.n) {
      sb_puts(sb, " annotate");
      put_annotations(sb, &s->u.loop.anns);
    }
    print_braced(p, s->u.loop.body);
    break;
  }
  case TS_STMT_BLOCK_REALIZE: print_block_realize(p, s); break;
  case TS_STMT_STORE:
    put_indent(p);
    print_indices(p, s->u.store.buffer, s->u.store.indices,
                  s->u.store.n_indices);
    sb_puts(sb, " = ");
    print_expr(p, s->u.store.value, 0);
    sb_putc(sb, '\n');
    break;
  case TS_STMT_IF:
    put_indent(p);
    sb_puts(sb, "if ");
    print_expr(p, s->u.cond.cond, 0);
    sb_puts(sb, " {\n");
    p->indent++;
    print_stmt(p, s->u.cond.then_s);
    p->indent--;
    put_indent(p);
    if (s->u.cond.else_s) {
      sb_puts(sb, "} else");
      print_braced(p, s->u.cond.else_s);
    } else {
      sb_puts(sb, "}\n");
    }
    break;
  case TS_STMT_EVALUATE:
    put_indent(p);
    sb_puts(sb, "evaluate ");
    print_expr(p, s->u.eval.value, 0);
    sb_putc(sb, '\n');
    break;
  case TS_STMT_LET:
    put_indent(p);
    sb_puts(sb, "let ");
    sb_puts(sb, define(p, s->u.let.var, raw_var_name(s->u.let.var), "v"));
    sb_puts(sb, " = ");
    print_expr(p, s->u.let.value, 0);
    print_braced(p, s->u.let.body);
    break;
  case TS_STMT_ALLOCATE: {
    const ts_buffer *b = s->u.alloc.buffer;
    put_indent(p);
    sb_printf(sb, "allocate %s: ", define(p, b, b->name, "buf"));
    put_buffer_type(sb, b);
    print_braced(p, s->u.alloc.body);
    break;
  }
  default:
    put_indent(p);
    sb_printf(sb, "<stmt kind %d>\n", s->kind);
    break;
  }
  p->n_names = mark;
}

/* ---- entry points ---- */

char *ts_func_print(const ts_func *f) {
  printer p;
  printer_init(&p);
  strbuf *sb = &p.out;
  sb_puts(sb, "func ");
  put_label(sb, f->name);
  sb_putc(sb, '(');
  for (int i = 0; i < f->n_params; i++) {
    const ts_buffer *b = f->params[i];
    if (i) sb_puts(sb, ", ");
    sb_printf(sb, "%s: ", define(&p, b, b->name, "buf"));
    put_buffer_type(sb, b);
  }
  sb_putc(sb, ')');
  if (f->attrs.n) {
    sb_puts(sb, " attrs");
    put_annotations(sb, &f->attrs);
  }
  print_braced(&p, f->body);
  return printer_finish(&p);
}

char *ts_stmt_print(const ts_stmt *s) {
  printer p;
  printer_init(&p);
  print_stmt(&p, s);
  return printer_finish(&p);
}

char *ts_expr_print(const ts_expr *e) {
  printer p;
  printer_init(&p);
  print_expr(&p, e, 0);
  return printer_finish(&p);
}
