/*
 * build_cache.c — the process's cache of built kernels. LLVM's optimizer
 * and code generator are most of a build's time, and one process often
 * builds the same kernel more than once: a model's profile run and then
 * its compile, a tuning job's best schedule confirmed after the search,
 * the original of a rewritten subgraph weighed beside its mutants. The
 * cache maps the module as emitted (its LLVM IR text, before any
 * optimization) and the target machine (triple, CPU, features, whether
 * optimized) to the bytes LLVM produced. A hit compares the whole IR
 * text, not only its hash, so it never returns another kernel's code.
 *
 * Bounded: TS_BUILD_CACHE_MB megabytes of IR text and artifact bytes
 * (default 64, fractions allowed; 0 turns the cache off; an entry above a
 * quarter of the limit is not kept), the least recently used entries
 * leaving first. Thread safe.
 *
 * A second level on disk, when TS_BUILD_CACHE_DIR names a folder: every
 * entry is also written there (one file per module, written under a
 * temporary name and renamed into place, so readers in other processes
 * never see half a file), and a miss in memory looks there before
 * building. Several processes may share the folder: a tuning job and the
 * compile after it, the tests of one build. A file holds the whole key
 * (which names the LLVM version and pipeline beside the machine) and is
 * used only when the key matches byte for byte; a damaged or foreign file
 * is a miss. The folder is kept under TS_BUILD_CACHE_DIR_MB megabytes
 * (default 512), the files least recently used leaving first (looked over
 * every 64 files written, or when they add up to an eighth of the limit).
 */
#include "codegen/target_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

typedef struct cache_entry {
  uint64_t hash;
  char *key; /* target machine key, then the IR text */
  size_t key_len;
  ts_artifact *artifact; /* the cache's reference */
  size_t bytes;          /* what the entry holds */
  uint64_t last_use;
  struct cache_entry *next;
} cache_entry;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static cache_entry *cache_head;
static size_t cache_bytes;
static uint64_t cache_clock;
static long long cache_limit = -1; /* bytes; -1: not read yet */
static ts_build_cache_stats cache_stats;
static char *disk_dir;         /* TS_BUILD_CACHE_DIR, or NULL */
static long long disk_limit;   /* bytes */
static unsigned disk_puts;     /* files written since the last trim */
static long long disk_written; /* their bytes */
static unsigned long disk_seq; /* temporary file names */

static double env_mb(const char *name, double dflt) {
  const char *v = getenv(name);
  char *end = NULL;
  double mb = v && *v ? strtod(v, &end) : dflt;
  if (v && *v && (*end || !(mb >= 0) || mb > 1 << 20)) mb = dflt;
  return mb;
}

static size_t limit_locked(void) {
  if (cache_limit < 0) {
    cache_limit = (long long)(env_mb("TS_BUILD_CACHE_MB", 64) * (1 << 20));
    free(disk_dir);
    const char *d = getenv("TS_BUILD_CACHE_DIR");
    disk_dir = d && *d && cache_limit > 0 ? strdup(d) : NULL;
    disk_limit = (long long)(env_mb("TS_BUILD_CACHE_DIR_MB", 512) * (1 << 20));
    disk_puts = 0;
    disk_written = 0;
  }
  return (size_t)cache_limit;
}

/* FNV-1a over the key: only to skip most comparisons */
static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* ---- the disk level ---- */

/* A file: the magic, a header of sizes and launch facts, the key, then
 * the artifact's bytes. */
static const char disk_magic[8] = {'T', 'S', 'K', 'C', 'A', 'C', 'H', '1'};
typedef struct disk_header {
  char magic[8];
  uint64_t key_len, n_bytes;
  uint32_t kind, grid[3], block[3], shared_bytes;
} disk_header;

/* DIR/<two 64-bit hashes of the key>.tsk (callers hold cache_mu) */
static char *disk_path_locked(const char *key, size_t len) {
  uint64_t h2 = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < len; i++)
    h2 = (h2 ^ (unsigned char)key[i]) * 0x100000001b3ull + (h2 >> 29);
  size_t n = strlen(disk_dir) + 48;
  char *p = malloc(n);
  if (p)
    snprintf(p, n, "%s/%016llx%016llx.tsk", disk_dir,
             (unsigned long long)hash_bytes(key, len), (unsigned long long)h2);
  return p;
}

/* Reads (or writes) all n bytes; false at an error or end of file. */
static bool io_all(int fd, void *buf, size_t n, bool writing) {
  char *p = buf;
  while (n) {
    ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= (size_t)r;
  }
  return true;
}

static bool read_all(int fd, void *buf, size_t n) {
  return io_all(fd, buf, n, false);
}

static bool write_all(int fd, const void *buf, size_t n) {
  return io_all(fd, (void *)buf, n, true);
}

/* The artifact stored under key, or NULL (no file, another key, a short
 * or damaged file). */
static ts_artifact *disk_get_locked(const char *key, size_t len) {
  char *path = disk_path_locked(key, len);
  if (!path) return NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ts_artifact *a = NULL;
  char *buf = NULL;
  disk_header h;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) || !read_all(fd, &h, sizeof h) ||
      memcmp(h.magic, disk_magic, sizeof h.magic) || h.key_len != len ||
      h.n_bytes > (uint64_t)st.st_size ||
      (uint64_t)st.st_size != sizeof h + h.key_len + h.n_bytes ||
      h.kind > TS_ARTIFACT_PTX)
    goto out;
  buf = malloc(len + h.n_bytes + 1);
  if (!buf || !read_all(fd, buf, len + h.n_bytes) || memcmp(buf, key, len))
    goto out;
  a = ts_artifact_new((ts_artifact_kind)h.kind, "", NULL, 0, buf + len,
                      h.n_bytes);
  if (a) {
    memcpy(a->grid, h.grid, sizeof a->grid);
    memcpy(a->block, h.block, sizeof a->block);
    a->shared_bytes = h.shared_bytes;
    utimes(path, NULL); /* recently used */
  }
out:
  if (fd >= 0) close(fd);
  free(buf);
  free(path);
  return a;
}

typedef struct disk_file {
  char *name;
  time_t mtime;
  off_t size;
} disk_file;

static int older_first(const void *x, const void *y) {
  const disk_file *a = x, *b = y;
  return (a->mtime > b->mtime) - (a->mtime < b->mtime);
}

/* Removes the least recently used files until the folder holds three
 * quarters of its limit. */
static void disk_trim_locked(void) {
  DIR *d = opendir(disk_dir);
  if (!d) return;
  disk_file *files = NULL;
  size_t n = 0, cap = 0;
  long long total = 0;
  struct dirent *de;
  int dfd = dirfd(d);
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    struct stat st;
    if (l < 5 || strcmp(de->d_name + l - 4, ".tsk") ||
        fstatat(dfd, de->d_name, &st, 0))
      continue;
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 64;
      disk_file *nf = realloc(files, nc * sizeof *nf);
      if (!nf) break;
      files = nf;
      cap = nc;
    }
    files[n] = (disk_file){strdup(de->d_name), st.st_mtime, st.st_size};
    if (!files[n].name) break;
    total += st.st_size;
    n++;
  }
  if (total > disk_limit) {
    qsort(files, n, sizeof *files, older_first);
    for (size_t i = 0; i < n && total > disk_limit / 4 * 3; i++)
      if (!unlinkat(dfd, files[i].name, 0)) total -= files[i].size;
  }
  for (size_t i = 0; i < n; i++) free(files[i].name);
  free(files);
  closedir(d);
}

/* mkdir -p of the cache folder (an error shows at the open after it) */
static void make_dirs(const char *dir) {
  char *p = strdup(dir);
  if (!p) return;
  for (char *q = p + 1; *q; q++)
    if (*q == '/') {
      *q = 0;
      (void)mkdir(p, 0777);
      *q = '/';
    }
  (void)mkdir(p, 0777);
  free(p);
}

static void disk_put_locked(const char *key, size_t len, const ts_artifact *a) {
  char *path = disk_path_locked(key, len);
  size_t tn = strlen(disk_dir) + 64;
  char *tmp = malloc(tn);
  if (!path || !tmp) goto out;
  make_dirs(disk_dir);
  snprintf(tmp, tn, "%s/.tmp.%ld.%lu", disk_dir, (long)getpid(), ++disk_seq);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) goto out;
  disk_header h = {.key_len = len,
                   .n_bytes = a->n_bytes,
                   .kind = (uint32_t)a->kind,
                   .shared_bytes = a->shared_bytes};
  memcpy(h.magic, disk_magic, sizeof h.magic);
  memcpy(h.grid, a->grid, sizeof h.grid);
  memcpy(h.block, a->block, sizeof h.block);
  bool ok = write_all(fd, &h, sizeof h) && write_all(fd, key, len) &&
            write_all(fd, a->bytes, a->n_bytes);
  ok = !close(fd) && ok;
  if (!ok || rename(tmp, path)) unlink(tmp);
  /* the folder is looked over every 64 files, or sooner when they add
   * up to an eighth of its limit */
  if (ok) disk_written += (long long)(sizeof h + len + a->n_bytes);
  if (ok && (++disk_puts >= 64 || disk_written > disk_limit / 8)) {
    disk_puts = 0;
    disk_written = 0;
    disk_trim_locked();
  }
out:
  free(path);
  free(tmp);
}

char *ts_build_cache_key(const char *machine, const char *ir, size_t *len) {
  size_t a = strlen(machine), b = strlen(ir);
  char *k = ts_malloc(a + 1 + b + 1);
  if (!k) return NULL;
  memcpy(k, machine, a);
  k[a] = '\n';
  memcpy(k + a + 1, ir, b + 1);
  *len = a + 1 + b;
  return k;
}

bool ts_build_cache_enabled(void) {
  pthread_mutex_lock(&cache_mu);
  bool on = limit_locked() > 0;
  pthread_mutex_unlock(&cache_mu);
  return on;
}

static void put(char *key, size_t len, ts_artifact *a, bool to_disk);

ts_artifact *ts_build_cache_get(const char *key, size_t len) {
  uint64_t h = hash_bytes(key, len);
  ts_artifact *found = NULL;
  pthread_mutex_lock(&cache_mu);
  for (cache_entry *e = cache_head; e; e = e->next) {
    if (e->hash == h && e->key_len == len && !memcmp(e->key, key, len)) {
      e->last_use = ++cache_clock;
      found = ts_artifact_retain(e->artifact);
      break;
    }
  }
  if (!found && disk_dir && (found = disk_get_locked(key, len))) {
    cache_stats.disk_hits++;
    pthread_mutex_unlock(&cache_mu);
    char *k = malloc(len + 1);
    if (k) {
      memcpy(k, key, len);
      k[len] = 0;
      put(k, len, found, false); /* kept in memory too */
    }
    return found;
  }
  if (found)
    cache_stats.hits++;
  else
    cache_stats.misses++;
  pthread_mutex_unlock(&cache_mu);
  return found;
}

static void evict_locked(size_t limit) {
  while (cache_bytes > limit && cache_head) {
    cache_entry **oldest = &cache_head;
    for (cache_entry **p = &cache_head; *p; p = &(*p)->next)
      if ((*p)->last_use < (*oldest)->last_use) oldest = p;
    cache_entry *e = *oldest;
    *oldest = e->next;
    cache_bytes -= e->bytes;
    ts_artifact_release(e->artifact);
    free(e->key);
    free(e);
  }
}

static void put(char *key, size_t len, ts_artifact *a, bool to_disk) {
  pthread_mutex_lock(&cache_mu);
  size_t limit = limit_locked();
  if (to_disk && disk_dir && limit > 0) disk_put_locked(key, len, a);
  size_t bytes = len + a->n_bytes + sizeof(cache_entry);
  cache_entry *e = bytes <= limit / 4 ? ts_calloc(1, sizeof *e) : NULL;
  if (!e) { /* off, too large for it, or out of memory: not kept */
    pthread_mutex_unlock(&cache_mu);
    free(key);
    return;
  }
  *e = (cache_entry){.hash = hash_bytes(key, len),
                     .key = key,
                     .key_len = len,
                     .artifact = ts_artifact_retain(a),
                     .bytes = bytes,
                     .last_use = ++cache_clock,
                     .next = cache_head};
  cache_head = e;
  cache_bytes += bytes;
  evict_locked(limit);
  pthread_mutex_unlock(&cache_mu);
}

void ts_build_cache_put(char *key, size_t len, ts_artifact *a) {
  put(key, len, a, true);
}

ts_build_cache_stats ts_build_cache_get_stats(void) {
  pthread_mutex_lock(&cache_mu);
  ts_build_cache_stats s = cache_stats;
  s.bytes = cache_bytes;
  for (cache_entry *e = cache_head; e; e = e->next) s.entries++;
  pthread_mutex_unlock(&cache_mu);
  return s;
}

void ts_build_cache_clear(void) {
  pthread_mutex_lock(&cache_mu);
  evict_locked(0);
  cache_stats = (ts_build_cache_stats){0};
  cache_limit = -1; /* read the environment again */
  pthread_mutex_unlock(&cache_mu);
}
