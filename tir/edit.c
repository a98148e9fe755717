/*
 * edit.c — in-place edits of blocks that schedule primitives need beyond
 * the constructors of stmt.c: replacing or dropping one of a block's
 * allocations while keeping the order of the others.
 */
#include "internal.h"

#include <string.h>

bool ts_block_replace_alloc(ts_block *b, const ts_buffer *old,
                            ts_buffer *repl) {
  for (int i = 0; i < b->n_allocs; i++) {
    if (b->allocs[i] != old) continue;
    if (repl) {
      b->allocs[i] = repl;
    } else {
      memmove(&b->allocs[i], &b->allocs[i + 1],
              sizeof b->allocs[0] * (size_t)(b->n_allocs - i - 1));
      b->n_allocs--;
    }
    return true;
  }
  return false;
}
