/* unit_pagemap: the address -> span radix tree (alloc/pagemap.[ch]),
 * compiled into this test together with the OS layer (os.c), the locks
 * (lock.c, log.c) and unit_support.c.
 * - set/get/clear over random page addresses across the 47-bit space;
 *   every byte of a set page maps to its span, unset pages map to NULL;
 * - ranges crossing a leaf boundary; addresses beyond 47 bits;
 * - concurrent readers and writers on disjoint pages. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "pagemap.h"

#include "../check_core.h"


#define SPAN(x) ((struct span_s *)(uintptr_t)(x))
#define LEAF_SPAN ((uintptr_t)PAGE << PM_LEAF_BITS) /* bytes per leaf */

enum { N = 3000 };
static uintptr_t addr[N];

static void *worker(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  /* each thread owns pages id, id+4, id+8, ... of a shared region */
  uintptr_t base = (uintptr_t)0x3f0000000000ULL;
  for (int round = 0; round < 50; round++)
    for (uintptr_t k = id; k < 4096; k += 4) {
      void *p = (void *)(base + k * PAGE);
      uintptr_t tag = (id << 32) | (k << 8) | (uintptr_t)(round & 0xff);
      pagemap_set(p, SPAN(tag));
      struct span_s *g = pagemap_get((char *)p + 100);
      CHECKF(g == SPAN(tag), "thread %lu page %lu: got %p want %lx",
             (unsigned long)id, (unsigned long)k, (void *)g,
             (unsigned long)tag);
      /* a neighbour owned by another thread is NULL or that thread's */
      struct span_s *o = pagemap_get((void *)(base + (k ^ 1) * PAGE));
      CHECKF(o == NULL || ((uintptr_t)o >> 32) == (id ^ 1),
             "neighbour of page %lu has a foreign value %p",
             (unsigned long)k, (void *)o);
    }
  return NULL;
}

int main(void) {
  check_rng = 88172645463325252ull;
  /* random pages anywhere below 2^47 */
  for (int i = 0; i < N; i++) {
    uintptr_t a = (check_rnd() & (((uintptr_t)1 << PM_ADDR_BITS) - 1)) & ~(PAGE - 1);
    if (a == 0) a = PAGE;
    addr[i] = a;
    CHECKF(pagemap_reserve((void *)a, PAGE), "reserve %lx failed",
           (unsigned long)a);
    pagemap_set((void *)a, SPAN(0x1000 + i * 16));
  }
  for (int i = 0; i < N; i++) {
    uintptr_t a = addr[i];
    /* later duplicates overwrite earlier ones: find the last setter */
    int last = i;
    for (int j = i + 1; j < N; j++)
      if (addr[j] == a) last = j;
    struct span_s *want = SPAN(0x1000 + last * 16);
    CHECKF(pagemap_get((void *)a) == want, "get(%lx) = %p, want %p",
           (unsigned long)a, (void *)pagemap_get((void *)a), (void *)want);
    CHECKF(pagemap_get((void *)(a + PAGE - 1)) == want,
           "last byte of page %lx maps elsewhere", (unsigned long)a);
  }
  /* pages next to set ones (not set themselves) are NULL */
  int checked = 0;
  for (int i = 0; i < N && checked < 500; i++) {
    uintptr_t nb = addr[i] + PAGE;
    int taken = 0;
    for (int j = 0; j < N; j++)
      if (addr[j] == nb) taken = 1;
    if (taken || (nb >> PM_ADDR_BITS)) continue;
    if ((nb & (LEAF_SPAN - 1)) == 0) continue; /* next leaf: maybe unmapped */
    CHECKF(pagemap_get((void *)nb) == NULL, "unset page %lx maps to %p",
           (unsigned long)nb, (void *)pagemap_get((void *)nb));
    checked++;
  }
  /* clear every other one */
  for (int i = 0; i < N; i += 2) pagemap_set((void *)addr[i], NULL);
  for (int i = 0; i < N; i += 2) {
    int later = 0;
    for (int j = i + 1; j < N; j++)
      if (addr[j] == addr[i] && (j & 1)) later = 1;
    if (!later)
      CHECKF(pagemap_get((void *)addr[i]) == NULL, "cleared page %lx = %p",
             (unsigned long)addr[i], (void *)pagemap_get((void *)addr[i]));
  }

  /* a range crossing a leaf boundary */
  uintptr_t boundary = (uintptr_t)0x200000000000ULL; /* multiple of a leaf */
  CHECKF((boundary & (LEAF_SPAN - 1)) == 0, "boundary not a leaf boundary");
  uintptr_t start = boundary - 50 * PAGE;
  CHECKF(pagemap_reserve((void *)(start - PAGE), 102 * PAGE), "reserve range");
  pagemap_set_range((void *)start, 100, SPAN(0xabc0));
  for (int k = 0; k < 100; k++)
    CHECKF(pagemap_get((void *)(start + k * PAGE + 7)) == SPAN(0xabc0),
           "page %d of a range across a leaf boundary", k);
  CHECKF(pagemap_get((void *)(start - 1)) == NULL, "page before the range");
  CHECKF(pagemap_get((void *)(start + 100 * PAGE)) == NULL,
         "page after the range");
  pagemap_set_range((void *)start, 100, NULL);
  for (int k = 0; k < 100; k++)
    CHECKF(pagemap_get((void *)(start + k * PAGE)) == NULL,
           "page %d of a cleared range", k);

  /* outside the 47-bit space: never ours */
  CHECKF(pagemap_get((void *)((uintptr_t)1 << PM_ADDR_BITS)) == NULL,
         "2^47 maps to a span");
  CHECKF(pagemap_get((void *)~(uintptr_t)0) == NULL, "~0 maps to a span");
  CHECKF(pagemap_get((void *)0xffff800000001000ULL) == NULL,
         "a kernel address maps to a span");
  CHECKF(!pagemap_reserve((void *)((uintptr_t)1 << PM_ADDR_BITS), PAGE),
         "reserve above 2^47 succeeded");
  CHECKF(pagemap_get(NULL) == NULL, "NULL maps to a span");

  /* concurrency: 4 threads on interleaved pages */
  CHECKF(pagemap_reserve((void *)0x3f0000000000ULL, 4096 * PAGE),
         "reserve shared region");
  pthread_t t[4];
  for (uintptr_t i = 0; i < 4; i++)
    CHECKF(pthread_create(&t[i], NULL, worker, (void *)i) == 0, "create");
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);

  /* fork hooks do not deadlock and leave the map usable */
  pagemap_prefork();
  pagemap_postfork_parent();
  pagemap_prefork();
  pagemap_postfork_child();
  CHECKF(pagemap_reserve((void *)0x100000000000ULL, PAGE), "after fork hooks");
  printf("unit_pagemap: ok\n");
  return 0;
}
