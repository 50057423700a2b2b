/* numa_sim: a simulated 4-node topology with 2 arenas per node
 * (NALLOC_CONF=numa_nodes:4,narenas_per_node:2).
 *
 * - numa.nodes == 4, arenas.narenas == 8, opt.* agree;
 * - threads left to themselves are spread over more than one node;
 * - a thread moved to arena k (thread.arena) allocates there: exactly one
 *   node's numa.node.<i>.allocated moves, each node owns exactly 2 arenas;
 * - content of memory from every arena is right, also when freed by a
 *   thread of another node (cross-node frees), and every node's figure goes
 *   back down afterwards. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { NODES = 4, PER_NODE = 2, NARENAS = NODES * PER_NODE };
enum { NB = 64 };
static const size_t BS = 64 * 1024; /* 4 MiB per thread in 64 KiB blocks */

static char nbuf[96];
static size_t node_alloc(unsigned i) {
  snprintf(nbuf, sizeof nbuf, "numa.node.%u.allocated", i);
  return ctl_size(nbuf);
}
static size_t node_resident(unsigned i) {
  snprintf(nbuf, sizeof nbuf, "numa.node.%u.resident", i);
  return ctl_size(nbuf);
}
static size_t arena_alloc(unsigned i) {
  snprintf(nbuf, sizeof nbuf, "stats.arenas.%u.allocated", i);
  return ctl_size(nbuf);
}
static void snapshot(size_t out[NODES]) {
  ctl_refresh();
  for (unsigned i = 0; i < NODES; i++) out[i] = node_alloc(i);
}

/* ---- step 1: natural placement --------------------------------------- */
static unsigned natural_arena[16];
static pthread_barrier_t bar16;
static void *natural_thread(void *arg) {
  int me = (int)(intptr_t)arg;
  void *p = A_MALLOC(100); /* binds the thread to an arena */
  CHECK(p != NULL);
  natural_arena[me] = get_thread_arena();
  CHECKF(natural_arena[me] < NARENAS, "thread.arena %u", natural_arena[me]);
  pthread_barrier_wait(&bar16); /* all 16 alive at once */
  A_FREE(p);
  return NULL;
}

/* ---- step 2: one thread per arena ------------------------------------ */
typedef struct {
  unsigned arena;
  void *blk[NB];
  uint64_t tag[NB];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int state; /* 0 start, 1 allocated, 2 told to exit */
} pinned_t;
static pinned_t pin[NARENAS];

static void *pinned_thread(void *arg) {
  pinned_t *t = arg;
  set_thread_arena(t->arena);
  CHECK(get_thread_arena() == t->arena);
  for (int i = 0; i < NB; i++) {
    t->blk[i] = A_MALLOC(BS);
    CHECK(t->blk[i] != NULL);
    t->tag[i] = ((uint64_t)t->arena << 32) | (uint64_t)i;
    fill_fast(t->blk[i], BS, t->tag[i]);
  }
  pthread_mutex_lock(&t->mu);
  t->state = 1;
  pthread_cond_broadcast(&t->cv);
  while (t->state != 2) pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

/* ---- step 3: cross-node frees ----------------------------------------- */
typedef struct {
  unsigned arena;
  unsigned victim; /* frees pin[victim]'s blocks */
} xfree_t;
static void *xfree_thread(void *arg) {
  xfree_t *x = arg;
  set_thread_arena(x->arena);
  pinned_t *v = &pin[x->victim];
  for (int i = 0; i < NB; i++) {
    CHECKF(check_fast(v->blk[i], BS, v->tag[i]),
           "block %d allocated in arena %u corrupted (checked from arena %u)",
           i, v->arena, x->arena);
    A_FREE(v->blk[i]);
    v->blk[i] = NULL;
  }
  /* and small objects: allocate here, hand to the next thread via array */
  return NULL;
}

/* small objects allocated on one node, freed on another, concurrently */
enum { SMALL = 20000 };
static void *small_objs[NARENAS][SMALL];
static pthread_barrier_t bar8;
static void *small_thread(void *arg) {
  unsigned a = (unsigned)(uintptr_t)arg;
  set_thread_arena(a);
  rng_t r;
  rng_seed(&r, a + 1);
  for (int i = 0; i < SMALL; i++) {
    size_t s = (size_t)rng_range(&r, 1, 2048);
    small_objs[a][i] = A_MALLOC(s);
    CHECK(small_objs[a][i] != NULL);
    fill_fast(small_objs[a][i], s < 16 ? s : 16, (uint64_t)a * SMALL + i);
  }
  pthread_barrier_wait(&bar8);
  /* free the objects of the arena PER_NODE further: another node */
  unsigned other = (a + PER_NODE) % NARENAS;
  rng_t r2;
  rng_seed(&r2, other + 1);
  for (int i = 0; i < SMALL; i++) {
    size_t s = (size_t)rng_range(&r2, 1, 2048);
    CHECKF(check_fast(small_objs[other][i], s < 16 ? s : 16,
                      (uint64_t)other * SMALL + i),
           "small object from arena %u corrupted", other);
    A_FREE(small_objs[other][i]);
  }
  tcache_flush();
  return NULL;
}

int main(void) {
  void *warm = A_MALLOC(1);
  A_FREE(warm);
  unsigned nodes = ctl_unsigned("numa.nodes");
  unsigned na = ctl_unsigned("arenas.narenas");
  CHECKF(nodes == NODES, "numa.nodes = %u with numa_nodes:4", nodes);
  CHECKF(na == NARENAS, "arenas.narenas = %u with 4 nodes x 2", na);
  CHECKF(ctl_unsigned("opt.numa_nodes") == NODES, "opt.numa_nodes = %u",
         ctl_unsigned("opt.numa_nodes"));
  CHECKF(ctl_unsigned("opt.narenas_per_node") == PER_NODE,
         "opt.narenas_per_node = %u", ctl_unsigned("opt.narenas_per_node"));
  /* out of range node */
  {
    size_t x, xs = sizeof x;
    int r = nalloc_ctl("numa.node.4.allocated", &x, &xs, NULL, 0);
    CHECKF(r != 0, "numa.node.4.allocated exists with 4 nodes (%d)", r);
  }

  /* 1: natural placement spreads threads */
  pthread_barrier_init(&bar16, NULL, 16);
  pthread_t t16[16];
  for (int i = 0; i < 16; i++)
    CHECK(pthread_create(&t16[i], NULL, natural_thread, (void *)(intptr_t)i) ==
          0);
  for (int i = 0; i < 16; i++) CHECK(pthread_join(t16[i], NULL) == 0);
  pthread_barrier_destroy(&bar16);

  /* 2: pin one thread per arena, find which node each arena belongs to */
  int node_of[NARENAS];
  size_t before[NODES], after[NODES];
  for (unsigned a = 0; a < NARENAS; a++) {
    pinned_t *t = &pin[a];
    t->arena = a;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->state = 0;
    snapshot(before);
    ctl_refresh();
    size_t ab = arena_alloc(a);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, pinned_thread, t) == 0);
    CHECK(pthread_detach(th) == 0);
    pthread_mutex_lock(&t->mu);
    while (t->state != 1) pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
    snapshot(after);
    size_t aa = arena_alloc(a);
    CHECKF(aa >= ab + NB * BS,
           "stats.arenas.%u.allocated moved by %zd after 4 MiB there", a,
           (ssize_t)(aa - ab));
    node_of[a] = -1;
    for (unsigned n = 0; n < NODES; n++) {
      if (after[n] >= before[n] + NB * BS) {
        CHECKF(node_of[a] == -1,
               "4 MiB allocated in arena %u moved two nodes (%d and %u)", a,
               node_of[a], n);
        node_of[a] = (int)n;
      }
    }
    CHECKF(node_of[a] >= 0,
           "4 MiB allocated in arena %u moved no numa.node.<i>.allocated "
           "(before %zu %zu %zu %zu, after %zu %zu %zu %zu)", a, before[0],
           before[1], before[2], before[3], after[0], after[1], after[2],
           after[3]);
    CHECKF(node_resident(node_of[a]) >= NB * BS,
           "numa.node.%d.resident %zu below the 4 MiB touched there",
           node_of[a], node_resident(node_of[a]));
  }
  int per[NODES] = {0};
  for (unsigned a = 0; a < NARENAS; a++) per[node_of[a]]++;
  for (unsigned n = 0; n < NODES; n++)
    CHECKF(per[n] == PER_NODE, "node %u owns %d arenas, want %d", n, per[n],
           PER_NODE);
  fprintf(stderr, "numa_sim: arena->node:");
  for (unsigned a = 0; a < NARENAS; a++) fprintf(stderr, " %d", node_of[a]);
  fprintf(stderr, "\n");

  /* step 1's threads: more than one node used */
  {
    bool used[NODES] = {false};
    int distinct = 0;
    for (int i = 0; i < 16; i++) {
      int n = node_of[natural_arena[i]];
      if (!used[n]) distinct++;
      used[n] = true;
    }
    fprintf(stderr, "numa_sim: 16 unpinned threads used %d nodes\n",
            distinct);
    CHECKF(distinct >= 2,
           "16 concurrent threads all got arenas of one node");
  }

  /* 3: cross-node frees: arena a's blocks are freed from an arena of the
   * next node */
  snapshot(before);
  for (unsigned a = 0; a < NARENAS; a++) {
    unsigned fa = (a + PER_NODE) % NARENAS;
    CHECK(node_of[fa] != node_of[a] || NODES == 1);
    xfree_t x = {fa, a};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, xfree_thread, &x) == 0);
    CHECK(pthread_join(th, NULL) == 0);
  }
  snapshot(after);
  /* Slack: the threads themselves may leave a little behind (glibc
   * allocates a DTV for each new thread stack, and keeps it with the
   * cached stack). */
  for (unsigned n = 0; n < NODES; n++)
    CHECKF(after[n] + PER_NODE * NB * BS <= before[n] + 64 * 1024,
           "node %u: allocated %zu -> %zu after its blocks were freed from "
           "another node", n, before[n], after[n]);
  for (unsigned a = 0; a < NARENAS; a++) {
    pthread_mutex_lock(&pin[a].mu);
    pin[a].state = 2;
    pthread_cond_broadcast(&pin[a].cv);
    pthread_mutex_unlock(&pin[a].mu);
  }

  /* 4: concurrent small objects, cross-node frees */
  snapshot(before);
  pthread_barrier_init(&bar8, NULL, NARENAS);
  pthread_t t8[NARENAS];
  for (unsigned a = 0; a < NARENAS; a++)
    CHECK(pthread_create(&t8[a], NULL, small_thread, (void *)(uintptr_t)a) ==
          0);
  for (unsigned a = 0; a < NARENAS; a++) CHECK(pthread_join(t8[a], NULL) == 0);
  pthread_barrier_destroy(&bar8);
  tcache_flush();
  snapshot(after);
  for (unsigned n = 0; n < NODES; n++)
    CHECKF(after[n] <= before[n] + 1 * MiB,
           "node %u: allocated %zu -> %zu after 8 threads freed all their "
           "small objects", n, before[n], after[n]);
  printf("numa_sim: ok\n");
  return 0;
}
