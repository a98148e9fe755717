/*
 * alloc.h — the allocation functions the IR, schedules, traces, lowering
 * and code generation allocate through, the per-thread count of failed
 * allocations that lets a public function report TS_ENOMEM for a failure
 * deep below it, and the fault-injection hook a test uses to make the N-th
 * allocation fail.
 *
 * The wrappers behave as malloc, calloc, realloc, strdup and strndup. An
 * allocation that fails (for real or injected) returns NULL and increments
 * the calling thread's failure count (ts_alloc_failures); a public function
 * that cannot see every failure below it directly compares the count before
 * and after its work and returns TS_ENOMEM ("out of memory") when it grew.
 *
 * cJSON allocates through ts_malloc as well (cJSON_InitHooks, set as the
 * library loads), so JSON built or parsed anywhere in tessera is counted
 * and can be made to fail like the rest.
 */
#ifndef TESSERA_TIR_ALLOC_H
#define TESSERA_TIR_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

void *ts_malloc(size_t size);
void *ts_calloc(size_t n, size_t size);
/* As realloc: on failure p is left allocated and unchanged. */
void *ts_realloc(void *p, size_t size);
/* As aligned_alloc (size rounded up to a multiple of align); free with
 * free. */
void *ts_aligned_alloc(size_t align, size_t size);
char *ts_strdup(const char *s);
char *ts_strndup(const char *s, size_t n);

/* The number of allocations that failed on this thread so far (it only
 * grows). */
unsigned long ts_alloc_failures(void);
/* Counts a failure of an allocation made outside the wrappers (a library's
 * own allocator). */
void ts_alloc_note_failure(void);

struct ts_error;
/* What a public function returns after its work: TS_ENOMEM with the
 * message "WHAT: out of memory" when an allocation failed on this thread
 * since `since` (a ts_alloc_failures() value taken before the work, so an
 * error the failure caused further down, such as a lookup that found
 * nothing, is reported as what it is), else rc unchanged. */
int ts_alloc_check(unsigned long since, int rc, struct ts_error *err,
                   const char *what);

struct cJSON;
/* The JSON text of v (compact, or indented when `indent`), or NULL when
 * out of memory: when printing fails, and when an allocation failed on
 * this thread since `failures` (a ts_alloc_failures() value taken before v
 * was built: a cJSON_Add* that failed left a member out, so the text would
 * lie). v stays the caller's; the text is freed with free. */
char *ts_json_print(const struct cJSON *v, unsigned long failures, bool indent);

/* Adds item to the object parent under key (key NULL: to the end of the
 * array parent) as cJSON_AddItemToObject and cJSON_AddItemToArray do, but
 * deletes item when it cannot be added (parent NULL, or no memory for the
 * key) instead of leaving it to leak. */
void ts_json_add(struct cJSON *parent, const char *key, struct cJSON *item);

/* Fault injection, for tests (process-wide; the counters are atomic, so
 * the hook is safe to use while other threads allocate, though then which
 * thread's allocation fails is not determined).
 *   nth > 0: the nth wrapper allocation from now fails (once; those after
 *            it succeed again);
 *   nth == 0: no allocation fails, but allocations are counted;
 *   nth < 0: the hook is off (the default; a wrapper then costs one relaxed
 *            atomic load more than the allocation).
 * Each call restarts the count. */
void ts_alloc_fail_nth(long nth);
/* The wrapper allocations since the last ts_alloc_fail_nth (0 when off). */
long ts_alloc_count(void);
/* Whether the failure armed by ts_alloc_fail_nth(nth > 0) has happened. */
bool ts_alloc_injected(void);
/* Called as the armed allocation fails (a debugger breakpoint's place). */
void ts_alloc_injecting(void);
/* The arena's own allocations (tir/arena.c: its structs and chunks) go
 * through ts_malloc_arena. While the hook is on and a buffer is set here,
 * each one's number in the hook's count is noted in numbers[*n] (up to cap;
 * *n keeps counting past it), so that a walk whose other failures another
 * walk already covers can fail only these. NULL: no notes (the default). */
void *ts_malloc_arena(size_t size);
void ts_alloc_note_arena(long *numbers, long cap, long *n);

#endif /* TESSERA_TIR_ALLOC_H */
