/* ctl: the nalloc_ctl contract (jemalloc mallctl's) and the names nalloc
 * promises.
 *
 *   ctl            defaults (run with NALLOC_CONF unset)
 *   ctl conf       with NALLOC_CONF=narenas:3,tcache:false,tcache_max:4096,
 *                  dirty_decay_ms:0,abort_conf:false,numa:false,
 *                  narenas_per_node:3,numa_nodes:1 -- the opt.* values
 *                  reflect the configuration
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "check.h"

#define EXPECT_RC(want, ...)                                                \
  do {                                                                      \
    int r_ = nalloc_ctl(__VA_ARGS__);                                       \
    CHECKF(r_ == (want), "nalloc_ctl(%s) = %d (%s), want %d (%s)",          \
           #__VA_ARGS__, r_, strerror(r_), (want), strerror(want));         \
  } while (0)

static char name[128];
static const char *nm(const char *fmt, unsigned i) {
  snprintf(name, sizeof name, fmt, i);
  return name;
}

/* Reads a value of exactly `len` bytes; checks the size contract around it:
 * a wrong *oldlenp is EINVAL, and a write is EPERM when read-only. */
static void read_exact(const char *n, void *out, size_t len, bool readonly) {
  size_t sz = len;
  int r = nalloc_ctl(n, out, &sz, NULL, 0);
  CHECKF(r == 0, "read %s (%zu bytes) -> %d (%s)", n, len, r, strerror(r));
  CHECKF(sz == len, "read %s: *oldlenp became %zu, want %zu", n, sz, len);
  unsigned char big[64];
  sz = len + 1;
  r = nalloc_ctl(n, big, &sz, NULL, 0);
  CHECKF(r == EINVAL, "read %s with oldlen %zu (one too many) -> %d, want "
         "EINVAL", n, len + 1, r);
  if (len > 1) {
    sz = len - 1;
    r = nalloc_ctl(n, big, &sz, NULL, 0);
    CHECKF(r == EINVAL, "read %s with oldlen %zu -> %d, want EINVAL", n,
           len - 1, r);
  }
  if (readonly) {
    memcpy(big, out, len);
    r = nalloc_ctl(n, NULL, NULL, big, len);
    CHECKF(r == EPERM, "write of read-only %s -> %d, want EPERM", n, r);
    sz = len;
    r = nalloc_ctl(n, big, &sz, big, len);
    CHECKF(r == EPERM, "read+write of read-only %s -> %d, want EPERM", n, r);
  }
}

static size_t rd_size(const char *n) {
  size_t v;
  read_exact(n, &v, sizeof v, true);
  return v;
}
static unsigned rd_unsigned(const char *n, bool ro) {
  unsigned v;
  read_exact(n, &v, sizeof v, ro);
  return v;
}
static bool rd_bool(const char *n) {
  bool v;
  read_exact(n, &v, sizeof v, true);
  return v;
}
static ssize_t rd_ssize(const char *n) {
  ssize_t v;
  read_exact(n, &v, sizeof v, true);
  return v;
}

static void test_names_and_errors(void) {
  /* unknown names */
  static const char *unknown[] = {"",
                                  "nosuchname",
                                  "stats",
                                  "stats.",
                                  "stats.allocatedx",
                                  "stats.allocated.x",
                                  "xstats.allocated",
                                  "opt.nosuchopt",
                                  "arena.x.purge",
                                  "arena..purge",
                                  "stats.arenas.-1.allocated",
                                  "numa.node.x.allocated",
                                  "thread.tcache.flushx"};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    size_t v, sz = sizeof v;
    int r = nalloc_ctl(unknown[i], &v, &sz, NULL, 0);
    CHECKF(r == ENOENT, "nalloc_ctl(\"%s\") = %d, want ENOENT", unknown[i], r);
  }

  /* version */
  const char *ver = NULL;
  read_exact("version", &ver, sizeof ver, true);
  CHECK(ver != NULL);
  CHECKF(strcmp(ver, NALLOC_VERSION) == 0, "version \"%s\" != \"%s\"", ver,
         NALLOC_VERSION);

  /* epoch: rw uint64_t; a write refreshes and advances it */
  uint64_t e0, e1, one = 1;
  size_t sz = sizeof e0;
  CHECK_CTL("epoch", &e0, &sz, NULL, 0);
  CHECK_CTL("epoch", NULL, NULL, &one, sizeof one);
  sz = sizeof e1;
  CHECK_CTL("epoch", &e1, &sz, NULL, 0);
  CHECKF(e1 > e0, "epoch did not advance on write: %ju -> %ju", (uintmax_t)e0,
         (uintmax_t)e1);
  EXPECT_RC(EINVAL, "epoch", NULL, NULL, &one, 4);
  EXPECT_RC(EINVAL, "epoch", NULL, NULL, &one, 9);
  sz = 4;
  EXPECT_RC(EINVAL, "epoch", &e1, &sz, NULL, 0);
  /* read + write in one call */
  sz = sizeof e1;
  CHECK_CTL("epoch", &e1, &sz, &one, sizeof one);

  /* a read with oldp set but oldlenp NULL is invalid */
  size_t v;
  int r = nalloc_ctl("stats.allocated", &v, NULL, NULL, 0);
  CHECKF(r == EINVAL, "read with oldlenp == NULL -> %d, want EINVAL", r);
  /* a write with newp NULL but newlen != 0 is invalid */
  r = nalloc_ctl("epoch", NULL, NULL, NULL, 8);
  CHECKF(r == EINVAL || r == 0, "epoch write NULL/8 -> %d", r);

  /* stats */
  ctl_refresh();
  size_t al = rd_size("stats.allocated");
  size_t ac = rd_size("stats.active");
  size_t re = rd_size("stats.resident");
  size_t ma = rd_size("stats.mapped");
  CHECKF(al > 0, "stats.allocated = %zu", al);
  CHECKF(al <= ac, "stats.allocated %zu > stats.active %zu", al, ac);
  CHECKF(ac <= ma, "stats.active %zu > stats.mapped %zu", ac, ma);
  CHECKF(ac <= re, "stats.active %zu > stats.resident %zu", ac, re);
  CHECKF(ac % 4096 == 0, "stats.active %zu not a multiple of the page", ac);

  /* arenas */
  unsigned na = rd_unsigned("arenas.narenas", true);
  CHECKF(na >= 1 && na < 4096, "arenas.narenas = %u", na);
  size_t sum = 0;
  for (unsigned i = 0; i < na; i++)
    sum += rd_size(nm("stats.arenas.%u.allocated", i));
  CHECKF(sum <= al + 4096, "sum of stats.arenas.<i>.allocated %zu > "
         "stats.allocated %zu", sum, al);
  {
    size_t x, xs = sizeof x;
    r = nalloc_ctl(nm("stats.arenas.%u.allocated", na + 7), &x, &xs, NULL, 0);
    CHECKF(r != 0, "stats.arenas.%u.allocated (out of range) succeeded",
           na + 7);
  }

  /* numa */
  unsigned nodes = rd_unsigned("numa.nodes", true);
  CHECKF(nodes >= 1 && nodes <= na, "numa.nodes = %u (narenas %u)", nodes, na);
  size_t nsum = 0;
  for (unsigned i = 0; i < nodes; i++) {
    size_t a = rd_size(nm("numa.node.%u.allocated", i));
    size_t rr = rd_size(nm("numa.node.%u.resident", i));
    (void)rr;
    nsum += a;
  }
  CHECKF(nsum <= al + 4096, "sum of numa.node.<i>.allocated %zu > "
         "stats.allocated %zu", nsum, al);
  {
    size_t x, xs = sizeof x;
    r = nalloc_ctl(nm("numa.node.%u.allocated", nodes), &x, &xs, NULL, 0);
    CHECKF(r != 0, "numa.node.%u.allocated (out of range) succeeded", nodes);
  }
}

static void test_opts(bool conf) {
  unsigned o_narenas = rd_unsigned("opt.narenas", true);
  bool o_tcache = rd_bool("opt.tcache");
  size_t o_tcache_max = rd_size("opt.tcache_max");
  ssize_t o_decay = rd_ssize("opt.dirty_decay_ms");
  bool o_abort_conf = rd_bool("opt.abort_conf");
  bool o_numa = rd_bool("opt.numa");
  unsigned o_npn = rd_unsigned("opt.narenas_per_node", true);
  unsigned o_numa_nodes = rd_unsigned("opt.numa_nodes", true);
  unsigned na = ctl_unsigned("arenas.narenas");
  unsigned nodes = ctl_unsigned("numa.nodes");
  fprintf(stderr,
          "opt: narenas=%u tcache=%d tcache_max=%zu dirty_decay_ms=%zd "
          "abort_conf=%d numa=%d narenas_per_node=%u numa_nodes=%u; "
          "arenas.narenas=%u numa.nodes=%u\n",
          o_narenas, o_tcache, o_tcache_max, o_decay, o_abort_conf, o_numa,
          o_npn, o_numa_nodes, na, nodes);
  if (!conf) {
    CHECK(o_tcache == true);
    CHECK(o_abort_conf == false);
    CHECK(o_numa_nodes == 0);
    CHECKF(o_decay > 0, "default dirty_decay_ms %zd: decay should be on",
           o_decay);
    CHECK(o_tcache_max >= 4096);
  } else {
    CHECKF(o_narenas == 3, "opt.narenas %u, want 3 from NALLOC_CONF", o_narenas);
    CHECK(o_tcache == false);
    CHECKF(o_tcache_max == 4096, "opt.tcache_max %zu", o_tcache_max);
    CHECKF(o_decay == 0, "opt.dirty_decay_ms %zd", o_decay);
    CHECK(o_abort_conf == false);
    CHECK(o_numa == false);
    CHECKF(o_npn == 3, "opt.narenas_per_node %u", o_npn);
    CHECKF(o_numa_nodes == 1, "opt.numa_nodes %u", o_numa_nodes);
    CHECKF(na == 3, "arenas.narenas %u with narenas:3", na);
    CHECKF(nodes == 1, "numa.nodes %u with numa_nodes:1", nodes);
  }
}

struct arena_arg {
  unsigned target;
  size_t grew;
};

static void *arena_thread(void *vp) {
  struct arena_arg *a = vp;
  unsigned cur = get_thread_arena();
  unsigned na = ctl_unsigned("arenas.narenas");
  CHECKF(cur < na, "thread.arena %u >= narenas %u", cur, na);
  set_thread_arena(a->target);
  CHECKF(get_thread_arena() == a->target, "thread.arena is %u after "
         "writing %u", get_thread_arena(), a->target);
  size_t b0 = (ctl_refresh(), ctl_size(nm("stats.arenas.%u.allocated",
                                          a->target)));
  enum { NB = 64 };
  void *v[NB];
  for (int i = 0; i < NB; i++) {
    v[i] = A_MALLOC(64 * KiB);
    CHECK(v[i] != NULL);
    fill_fast(v[i], 64 * KiB, (uint64_t)a->target * 100 + i);
  }
  /* small ones too, flushed out of the cache into the arena */
  void *s[2000];
  for (int i = 0; i < 2000; i++) s[i] = A_MALLOC(48);
  tcache_flush();
  size_t b1 = (ctl_refresh(), ctl_size(nm("stats.arenas.%u.allocated",
                                          a->target)));
  a->grew = b1 - b0;
  CHECKF(b1 >= b0 + NB * 64 * KiB + 2000 * 48,
         "after thread.arena=%u, 4 MiB + 94 KiB allocated moved "
         "stats.arenas.%u.allocated by %zd only", a->target, a->target,
         (ssize_t)(b1 - b0));
  for (int i = 0; i < NB; i++) {
    CHECK(check_fast(v[i], 64 * KiB, (uint64_t)a->target * 100 + i));
    A_FREE(v[i]);
  }
  for (int i = 0; i < 2000; i++) A_FREE(s[i]);
  tcache_flush();
  size_t b2 = (ctl_refresh(), ctl_size(nm("stats.arenas.%u.allocated",
                                          a->target)));
  CHECKF(b2 + NB * 64 * KiB <= b1, "stats.arenas.%u.allocated did not drop "
         "after frees: %zu -> %zu", a->target, b1, b2);
  return NULL;
}

static void test_thread_arena(void) {
  unsigned na = ctl_unsigned("arenas.narenas");
  unsigned cur = get_thread_arena();
  CHECK(cur < na);
  /* out of range */
  unsigned bad = na;
  int r = nalloc_ctl("thread.arena", NULL, NULL, &bad, sizeof bad);
  CHECKF(r == EINVAL, "thread.arena = narenas (%u) -> %d, want EINVAL", na, r);
  bad = 100000;
  r = nalloc_ctl("thread.arena", NULL, NULL, &bad, sizeof bad);
  CHECKF(r == EINVAL, "thread.arena = 100000 -> %d, want EINVAL", r);
  r = nalloc_ctl("thread.arena", NULL, NULL, &cur, 2);
  CHECKF(r == EINVAL, "thread.arena with newlen 2 -> %d, want EINVAL", r);
  CHECK(get_thread_arena() == cur);
  /* read old + write new in one call */
  unsigned old = 12345, nw = na - 1;
  size_t sz = sizeof old;
  CHECK_CTL("thread.arena", &old, &sz, &nw, sizeof nw);
  CHECK(old == cur);
  CHECK(get_thread_arena() == na - 1);
  set_thread_arena(cur);

  /* every arena can be moved to and serves memory */
  for (unsigned i = 0; i < na && i < 16; i++) {
    struct arena_arg a = {i, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, arena_thread, &a) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }
}

static void test_tcache_flush(void) {
  CHECK_CTL("thread.tcache.flush", NULL, NULL, NULL, 0);
  /* small objects: allocated grows by what was asked, and drops again
   * once the frees are flushed out of the cache */
  enum { N = 100000 };
  static void *v[N];
  tcache_flush();
  size_t a0 = stat_allocated();
  for (int i = 0; i < N; i++) {
    v[i] = A_MALLOC(64);
    CHECK(v[i] != NULL);
  }
  size_t a1 = stat_allocated();
  CHECKF(a1 >= a0 + (size_t)N * 64, "stats.allocated grew by %zd after "
         "%d x malloc(64)", (ssize_t)(a1 - a0), N);
  for (int i = 0; i < N; i++) A_FREE(v[i]);
  tcache_flush();
  size_t a2 = stat_allocated();
  CHECKF(a2 + (size_t)N * 64 <= a1, "stats.allocated dropped by %zd after "
         "freeing %d x 64 B and thread.tcache.flush", (ssize_t)(a1 - a2), N);
  /* flush is write-only-ish: reading it makes no sense */
  size_t x, xs = sizeof x;
  int r = nalloc_ctl("thread.tcache.flush", &x, &xs, NULL, 0);
  CHECKF(r == EPERM || r == EINVAL || r == ENOENT,
         "reading thread.tcache.flush -> %d", r);
}

static size_t resident(void) {
  ctl_refresh();
  return ctl_size("stats.resident");
}

static void purge_all(void) {
  unsigned na = ctl_unsigned("arenas.narenas");
  for (unsigned i = 0; i < na; i++) {
    int r = nalloc_ctl(nm("arena.%u.purge", i), NULL, NULL, NULL, 0);
    CHECKF(r == 0, "arena.%u.purge -> %d", i, r);
  }
}

/* mode: 0 arena.<i>.purge, 1 malloc_trim(0), 2 nothing (decay 0 must
 * have purged already) */
static void churn_large(size_t total, size_t bs, int mode) {
  size_t nb = total / bs;
  void **v = A_MALLOC(nb * sizeof *v);
  CHECK(v != NULL);
  for (size_t i = 0; i < nb; i++) {
    v[i] = A_MALLOC(bs);
    CHECK(v[i] != NULL);
    memset(v[i], (int)i, bs);
  }
  size_t r1 = resident();
  size_t ac = ctl_size("stats.active"), live = nb * bs;
  CHECKF(r1 >= live, "stats.resident %zu with %zu bytes live and touched",
         r1, live);
  CHECKF(ac >= live, "stats.active %zu with %zu bytes live", ac, live);
  for (size_t i = 0; i < nb; i++) A_FREE(v[i]);
  A_FREE(v);
  tcache_flush();
  if (mode == 1)
    A_MALLOC_TRIM(0);
  else if (mode == 0)
    purge_all();
  size_t r3 = resident();
  CHECKF(r3 + total / 2 <= r1,
         "%s did not return memory: stats.resident %zu with %zu live, %zu "
         "after free + purge",
         mode == 1   ? "malloc_trim(0)"
         : mode == 0 ? "arena.<i>.purge"
                     : "dirty_decay_ms:0 (purge at once)",
         r1, total, r3);
}

static void test_purge(void) {
  unsigned na = ctl_unsigned("arenas.narenas");
  /* write-only: NULL/0 works, reading fails, a value is rejected */
  CHECK_CTL("arena.0.purge", NULL, NULL, NULL, 0);
  size_t x, xs = sizeof x;
  int r = nalloc_ctl("arena.0.purge", &x, &xs, NULL, 0);
  CHECKF(r == EPERM || r == EINVAL, "reading arena.0.purge -> %d", r);
  r = nalloc_ctl(nm("arena.%u.purge", na + 100), NULL, NULL, NULL, 0);
  CHECKF(r != 0, "arena.%u.purge (out of range) succeeded", na + 100);

  churn_large(64 * MiB, 256 * KiB, 0);
  churn_large(64 * MiB, 96 * KiB, 1);
  churn_large(32 * MiB, 24 * KiB, 0);
  ssize_t decay;
  size_t dsz = sizeof decay;
  CHECK_CTL("opt.dirty_decay_ms", &decay, &dsz, NULL, 0);
  if (decay == 0) {
    churn_large(64 * MiB, 256 * KiB, 2);
    churn_large(16 * MiB, 20 * KiB, 2);
  }
}

static void test_stats_consistency_under_load(void) {
  enum { N = 512 };
  void *v[N];
  rng_t rg;
  rng_seed(&rg, 99);
  for (int i = 0; i < N; i++) {
    size_t s = rng_range(&rg, 1, 300 * KiB);
    v[i] = A_MALLOC(s);
    memset(v[i], 1, s);
  }
  ctl_refresh();
  size_t al = ctl_size("stats.allocated");
  size_t ac = ctl_size("stats.active");
  size_t re = ctl_size("stats.resident");
  size_t ma = ctl_size("stats.mapped");
  CHECKF(al <= ac && ac <= ma && ac <= re,
         "allocated %zu active %zu resident %zu mapped %zu", al, ac, re, ma);
  for (int i = 0; i < N; i++) A_FREE(v[i]);
}

int main(int argc, char **argv) {
  bool conf = argc > 1 && strcmp(argv[1], "conf") == 0;
  const char *env = getenv("NALLOC_CONF");
  if (!conf && env && *env) {
    fprintf(stderr, "ctl: NALLOC_CONF is set (%s); the default checks need "
            "it unset\n", env);
    return 1;
  }
  /* initialises the allocator, and keeps stats.allocated above 0 even in
   * the prefixed build with tcache:false */
  void *live = A_MALLOC(1000);
  CHECK(live != NULL);
  test_names_and_errors();
  test_opts(conf);
  test_thread_arena();
  test_tcache_flush();
  test_purge();
  test_stats_consistency_under_load();
  A_FREE(live);
  printf("ctl%s: ok\n", conf ? " conf" : "");
  return 0;
}
