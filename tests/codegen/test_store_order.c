/*
 * test_store_order.c — a vector wider than the target's registers, stored
 * to an output the kernel never reads, is stored one register at a time in
 * address order (store_register_pieces in codegen/emit_expr.c): LLVM's own
 * split of a wide store may emit the pieces in any order, which costs
 * where rows start off a cache line. An output the kernel also reads (an
 * accumulation in place) keeps its whole-vector stores, and the values
 * match the reference interpreter either way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "check.h"

#define OK(x) assert_int_equal((x), TS_OK)

/* Y = 2 X + 1 over rows of 67 floats (off any cache line from the second
 * row on): two 64-lane steps per row, the second guarded. */
static const char scale_text[] =
    "func rows(X: float32[9, 67], Y: float32[9, 67]) {\n"
    "  block root() {\n"
    "    reads(X[0 +: 9, 0 +: 67])\n"
    "    writes(Y[0 +: 9, 0 +: 67])\n"
    "    for i in range(9) parallel {\n"
    "      for jo in range(2) {\n"
    "        for ji in range(64) vectorized {\n"
    "          block Y(vi: spatial(9) = i, vj: spatial(67) = jo * 64 + ji) "
    "where jo * 64 + ji < 67 {\n"
    "            reads(X[vi, vj])\n"
    "            writes(Y[vi, vj])\n"
    "            Y[vi, vj] = X[vi, vj] * float32(2) + float32(1)\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* S[i, :] = sum over k of X[i, k, :], accumulated in S itself. */
static const char accumulate_text[] =
    "func acc(X: float32[3, 5, 64], S: float32[3, 64]) {\n"
    "  block root() {\n"
    "    reads(X[0 +: 3, 0 +: 5, 0 +: 64])\n"
    "    writes(S[0 +: 3, 0 +: 64])\n"
    "    for i in range(3) {\n"
    "      for k in range(5) {\n"
    "        for j in range(64) vectorized {\n"
    "          block S(vi: spatial(3) = i, vk: reduce(5) = k, vj: "
    "spatial(64) = j) {\n"
    "            reads(S[vi, vj], X[vi, vk, vj])\n"
    "            writes(S[vi, vj])\n"
    "            init {\n"
    "              S[vi, vj] = float32(0)\n"
    "            }\n"
    "            S[vi, vj] = S[vi, vj] + X[vi, vk, vj]\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static ts_build_result build_for(const ts_func *f, const char *target) {
  ts_error err;
  ts_target *t = NULL;
  OK(ts_target_parse(target, &t, &err));
  ts_build_options o = ts_build_defaults();
  o.keep_llvm_ir = true;
  o.keep_asm = true;
  ts_build_result br = {0};
  int rc = ts_build(f, t, &o, &br, &err);
  if (rc) printf("build: %s\n", err.msg);
  OK(rc);
  ts_target_free(t);
  return br;
}

/* Whether every run of consecutive full-register stores
 * `vmovups %zmmN, OFF(...)` in the assembly goes up in address; *stores
 * receives how many stores such runs hold in all. */
static bool zmm_store_runs_ascend(const char *as, int *stores) {
  bool in_run = false, ok = true;
  long last = 0;
  *stores = 0;
  for (const char *line = as; line && *line;) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < 255 ? len : 255), line);
    const char *p = strstr(buf, "vmovups\t%zmm");
    const char *comma = p ? strchr(p, ',') : NULL;
    if (comma && !strchr(comma, '{')) {
      const char *q = comma + 1;
      while (*q == ' ' || *q == '\t') q++;
      long off = *q == '(' ? 0 : strtol(q, NULL, 10);
      if (strchr(q, '(')) {
        if (in_run && off <= last) {
          printf("store at %ld after %ld\n", off, last);
          ok = false;
        }
        in_run = true;
        last = off;
        (*stores)++;
      } else {
        in_run = false;
      }
    } else {
      in_run = false;
    }
    line = eol ? eol + 1 : NULL;
  }
  return ok;
}

/* On AVX-512 the 64-lane row store is four 16-lane stores, in address
 * order; no 64-lane store is left. */
static void test_pieces_in_order(void **state) {
  (void)state;
  ts_func *f = check_parse(scale_text, "rows.tir");
  assert_non_null(f);
  ts_build_result br = build_for(f, "llvm -mcpu=skylake-avx512");
  assert_int_equal(check_count(br.llvm_ir, "store <64 x float>"), 0);
  assert_true(check_count(br.llvm_ir, "store <16 x float>") >= 4);
  int stores = 0;
  assert_true(zmm_store_runs_ascend(br.assembly, &stores));
  assert_true(stores >= 4);
  ts_build_result_clear(&br);
  /* AVX2: eight 8-lane stores */
  br = build_for(f, "llvm -mcpu=x86-64-v3");
  assert_int_equal(check_count(br.llvm_ir, "store <64 x float>"), 0);
  assert_true(check_count(br.llvm_ir, "store <8 x float>") >= 8);
  ts_build_result_clear(&br);
  OK(check_host_run(f, 1, 5));
  OK(check_host_run(f, 2, 6));
  ts_func_free(f);
}

/* An output accumulated in place keeps its whole-vector stores (so LLVM can
 * forward them to the next step's loads), and the sums are right. */
static void test_accumulated_output_whole(void **state) {
  (void)state;
  ts_func *f = check_parse(accumulate_text, "acc.tir");
  assert_non_null(f);
  ts_build_result br = build_for(f, "llvm -mcpu=skylake-avx512");
  assert_int_equal(check_count(br.llvm_ir, "store <16 x float>"), 0);
  ts_build_result_clear(&br);
  OK(check_host_run(f, 1, 7));
  ts_func_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pieces_in_order),
      cmocka_unit_test(test_accumulated_output_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
