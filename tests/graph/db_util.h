/*
 * db_util.h — seeded tuning records for the graph tests that weigh a
 * pass's candidates by the database (PET, the block pass).
 */
#ifndef TS_TESTS_GRAPH_DB_UTIL_H
#define TS_TESTS_GRAPH_DB_UTIL_H

#include "codegen/codegen.h"
#include "db/db.h"
#include "graph/graph.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One record per task on this host's target ("llvm"): slow_s seconds for
 * a task whose first node's name contains `slow`, 10 us for the others.
 * With keep, a task measured before keeps its record. */
static inline void fill_task_records(ts_db *db, const ts_graph_task *t, int n,
                                     const char *slow, double slow_s,
                                     bool keep) {
  assert_true(n > 0);
  ts_error err;
  ts_target *tg;
  assert_int_equal(ts_target_parse("llvm", &tg, &err), TS_OK);
  for (int i = 0; i < n; i++) {
    if (keep) {
      ts_db_record rec;
      memset(&rec, 0, sizeof rec);
      bool known =
          ts_db_best_by_func(db, t[i].func, ts_target_str(tg), &rec) == TS_OK;
      ts_db_record_clear(&rec);
      if (known) continue;
    }
    int64_t wid;
    assert_int_equal(ts_db_commit_workload(db, t[i].func, NULL, &wid), TS_OK);
    double secs = strstr(t[i].first_node, slow) ? slow_s : 1e-5;
    ts_db_measurement m = {.workload_id = wid,
                           .target = ts_target_str(tg),
                           .trace_json =
                               "{\"version\": 1, \"instructions\": []}",
                           .run_secs = &secs,
                           .n_run_secs = 1,
                           .status = TS_DB_STATUS_OK};
    if (ts_db_commit_record(db, &m, NULL))
      fail_msg("commit: %s", ts_db_errmsg(db));
  }
  ts_target_free(tg);
}

/* A new empty database NAME_PID.db in the build directory (path filled). */
static inline ts_db *fresh_db(const char *name, char *path, size_t size) {
  snprintf(path, size, "%s/%s_%d.db", TS_BINARY_DIR, name, (int)getpid());
  unlink(path);
  ts_db *db;
  ts_error err;
  ts_db_options dbo = ts_db_defaults();
  assert_int_equal(ts_db_open(path, &dbo, &db, &err), TS_OK);
  return db;
}

#endif
