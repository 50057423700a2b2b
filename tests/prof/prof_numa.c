/* prof_numa.c -- the per-NUMA-node view of each stack (issue 14.2), exact
 * mode, against a model the test keeps. Run with numa_nodes:4 and one
 * arena per node (CMakeLists.txt): threads move between arenas with
 * thread.arena, allocate from one call site on each, free some of their
 * blocks after moving on and hand others to a thread that frees them
 * remotely. For every node the '#nalloc node' lines of the dump must hold
 * exactly the live and allocated objects and bytes the model says (the
 * node of a block is that of the arena it came from, stats.arenas.<i>.node),
 * their sum must equal the stack's ordinary record (with
 * prof_format:jemalloc: each thread has one row per stack, the rows of a
 * thread's per-node records summed), and the ordinary
 * records must be the same as in a one-node run (checked by readers.sh
 * and the other tests: the node lines are '#' lines the readers skip). */
#include "prof_check.h"

#include <pthread.h>

#define NODES 4
#define NTHR 3
#define PER 40 /* blocks per thread per arena visit */

typedef struct {
  uint64_t n, b, an, ab;
} model_t;
static model_t model[NODES];
static pthread_mutex_t model_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned arena_node[NODES];

typedef struct {
  void *p;
  size_t size;
  unsigned node;
} blk_t;

/* The call site the test looks at: one stack, however many nodes. */
NOINL void *site_numa(size_t size) {
  void *p = t_malloc(size);
  __asm__ volatile("");
  return p;
}

static void note_alloc(unsigned node, size_t size) {
  pthread_mutex_lock(&model_mu);
  model[node].n++, model[node].b += size;
  model[node].an++, model[node].ab += size;
  pthread_mutex_unlock(&model_mu);
}
static void note_free(const blk_t *k) {
  pthread_mutex_lock(&model_mu);
  model[k->node].n--, model[k->node].b -= k->size;
  pthread_mutex_unlock(&model_mu);
}

static void set_arena(unsigned a) {
  CHECK(nalloc_ctl("thread.arena", NULL, NULL, &a, sizeof a) == 0);
  unsigned back = 99;
  size_t sz = sizeof back;
  CHECK(nalloc_ctl("thread.arena", &back, &sz, NULL, 0) == 0);
  CHECK_EQ_U(back, a);
}

/* Handed from the workers to the remote freer. */
static blk_t handed[NTHR * NODES * PER];
static int nhanded;
static pthread_barrier_t bar;

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  blk_t mine[(NODES + 1) * PER];
  int nmine = 0;
  /* Each thread visits the arenas in its own order, and comes back to
   * its first one at the end (a thread that migrates back). */
  for (int step = 0; step <= NODES; step++) {
    unsigned a = (unsigned)((id + step) % NODES);
    set_arena(a);
    for (int i = 0; i < PER; i++) {
      size_t size = 16 + (size_t)(id * 7 + step * 13 + i) % 200;
      blk_t k = {site_numa(size), size, arena_node[a]};
      CHECK(k.p != NULL);
      note_alloc(k.node, size);
      if (i % 4 == 1 && step < NODES) {
        pthread_mutex_lock(&model_mu);
        handed[nhanded++] = k;
        pthread_mutex_unlock(&model_mu);
      } else {
        mine[nmine++] = k;
      }
    }
    /* After moving on, free a third of what is kept from two visits ago:
     * a free on the new arena of a block of the old node. */
    if (step >= 2)
      for (int i = 0; i < nmine; i += 3) {
        if (mine[i].p == NULL) continue;
        t_free(mine[i].p);
        note_free(&mine[i]);
        mine[i].p = NULL;
      }
  }
  pthread_barrier_wait(&bar); /* all allocated */
  pthread_barrier_wait(&bar); /* main dumped and checked */
  for (int i = 0; i < nmine; i++)
    if (mine[i].p) {
      t_free(mine[i].p);
      note_free(&mine[i]);
    }
  return NULL;
}

static bool jeformat;

/* prof_format:jemalloc: site_numa's t* row holds the model's totals over
 * every node, and each thread has one row (a thread that moved has a
 * record per node; the rows sum them). Values are raw here: exact mode's
 * R = 1 correction is below rounding for blocks of 16 bytes and more. */
static void je_check(const char *path, const char *what) {
  FILE *f = fopen(path, "r");
  CHECK(f);
  char line[8192];
  bool in = false;
  uint64_t star[4] = {0, 0, 0, 0}, sum[4] = {0, 0, 0, 0}, uids[64];
  int nuid = 0, rows = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "MAPPED_LIBRARIES:", 17) == 0) break;
    CHECK(line[0] != '#'); /* no view lines in this format */
    if (line[0] == '@') { /* site_numa has two stacks: from main, workers */
      in = strcmp(pc_fn(strtoull(line + 2, NULL, 16)), "site_numa") == 0;
      nuid = 0;
      continue;
    }
    const char *s = line;
    while (*s == ' ') s++;
    if (!in || *s != 't') continue;
    uint64_t c[4];
    if (s[1] == '*') {
      s += 4;
      CHECK(pc_counts(&s, c));
      for (int k = 0; k < 4; k++) star[k] += c[k];
      continue;
    }
    uint64_t uid = strtoull(s + 1, (char **)&s, 10);
    s += 2;
    CHECK(pc_counts(&s, c));
    for (int i = 0; i < nuid; i++) CHECK(uids[i] != uid);
    CHECK(nuid < 64);
    uids[nuid++] = uid;
    rows++;
    for (int k = 0; k < 4; k++) sum[k] += c[k];
  }
  fclose(f);
  model_t tot = {0, 0, 0, 0};
  for (int d = 0; d < NODES; d++)
    tot.n += model[d].n, tot.b += model[d].b, tot.an += model[d].an,
        tot.ab += model[d].ab;
  printf("%s (jemalloc format): t* %" PRIu64 ": %" PRIu64 " [%" PRIu64
         ": %" PRIu64 "], %d thread rows\n",
         what, star[0], star[1], star[2], star[3], rows);
  CHECK_EQ_U(star[0], tot.n);
  CHECK_EQ_U(star[1], tot.b);
  CHECK_EQ_U(star[2], tot.an);
  CHECK_EQ_U(star[3], tot.ab);
  /* exited threads' counts stay in t* without a row (prof_threads.c) */
  if (strcmp(what, "exited") != 0)
    for (int k = 0; k < 4; k++) CHECK_EQ_U(sum[k], star[k]);
}

static void check_dump(const char *path, const char *what) {
  CHECK(ctl_dump(path) == 0);
  if (jeformat) {
    je_check(path, what);
    return;
  }
  pc_prof_t P = pc_load(path);
  CHECK_EQ_U(P.rate, 1);
  pc_sum_t all = pc_sum(&P, "site_numa", NULL);
  model_t tot = {0, 0, 0, 0};
  for (int d = 0; d < NODES; d++) {
    pc_sum_t s = pc_sum_kind(&P, PC_NODE, d, "site_numa", NULL);
    printf("%s node %d: %" PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64
           "]  model %" PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64 "]\n",
           what, d, s.n, s.b, s.an, s.ab, model[d].n, model[d].b, model[d].an,
           model[d].ab);
    CHECK_EQ_U(s.n, model[d].n);
    CHECK_EQ_U(s.b, model[d].b);
    CHECK_EQ_U(s.an, model[d].an);
    CHECK_EQ_U(s.ab, model[d].ab);
    tot.n += s.n, tot.b += s.b, tot.an += s.an, tot.ab += s.ab;
  }
  /* the node lines split the ordinary record, no more, no less */
  CHECK_EQ_U(all.n, tot.n);
  CHECK_EQ_U(all.b, tot.b);
  CHECK_EQ_U(all.an, tot.an);
  CHECK_EQ_U(all.ab, tot.ab);
  /* no node line names a node that does not exist */
  for (int i = 0; i < P.nx; i++)
    if (P.x[i].kind == PC_NODE) CHECK(P.x[i].node >= 0 && P.x[i].node < NODES);
  pc_free(&P);
}

int main(void) {
  unsigned nodes = 0;
  size_t sz = sizeof nodes;
  CHECK(nalloc_ctl("numa.nodes", &nodes, &sz, NULL, 0) == 0);
  if (nodes != NODES) {
    fprintf(stderr, "needs NALLOC_CONF numa_nodes:%d (have %u nodes)\n", NODES,
            nodes);
    return 77;
  }
  const char *fmt = NULL;
  sz = sizeof fmt;
  CHECK(nalloc_ctl("opt.prof_format", &fmt, &sz, NULL, 0) == 0);
  jeformat = strcmp(fmt, "jemalloc") == 0;
  unsigned narenas = 0;
  sz = sizeof narenas;
  CHECK(nalloc_ctl("arenas.narenas", &narenas, &sz, NULL, 0) == 0);
  CHECK(narenas >= NODES);
  /* The truth about where arena a's memory lives, from the allocator. */
  for (unsigned a = 0; a < NODES; a++) {
    char name[64];
    snprintf(name, sizeof name, "stats.arenas.%u.node", a);
    sz = sizeof arena_node[a];
    CHECK(nalloc_ctl(name, &arena_node[a], &sz, NULL, 0) == 0);
    CHECK(arena_node[a] < NODES);
  }
  bool distinct = true;
  for (unsigned a = 0; a < NODES; a++)
    for (unsigned b = a + 1; b < NODES; b++)
      distinct &= arena_node[a] != arena_node[b];
  CHECK(distinct); /* narenas_per_node:1: arenas 0..3 are nodes 0..3 */

  char path[] = "/tmp/prof_numa.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);

  pthread_barrier_init(&bar, NULL, NTHR + 1);
  pthread_t th[NTHR];
  for (int i = 0; i < NTHR; i++)
    CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
  pthread_barrier_wait(&bar);
  check_dump(path, "allocated");

  /* Remote frees: main (on arena 0, another node than most blocks) frees
   * the handed blocks; each goes off the node it was allocated on. */
  set_arena(0);
  for (int i = 0; i < nhanded; i++) {
    t_free(handed[i].p);
    note_free(&handed[i]);
  }
  check_dump(path, "remote-freed");

  /* main allocates on two nodes itself */
  blk_t m[2 * PER];
  for (int i = 0; i < 2 * PER; i++) {
    unsigned a = i < PER ? 2 : 3;
    if (i == 0 || i == PER) set_arena(a);
    m[i] = (blk_t){site_numa(100 + (size_t)i), 100 + (size_t)i, arena_node[a]};
    note_alloc(m[i].node, m[i].size);
  }
  check_dump(path, "main");
  pthread_barrier_wait(&bar);
  for (int i = 0; i < NTHR; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 2 * PER; i++) {
    t_free(m[i].p);
    note_free(&m[i]);
  }
  /* exited threads' objects (all freed) and main's: still split right */
  check_dump(path, "exited");
  unlink(path);
  printf("ok\n");
  return 0;
}
