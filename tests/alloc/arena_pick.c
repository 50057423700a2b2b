/* arena_pick.c -- the arena a new thread takes (arena_pick): the one of
 * its node with the fewest threads, the lowest index among equals. Run
 * with one pretended node of 4 arenas (numa_nodes:1,narenas_per_node:4)
 * and no decay thread, so that the main thread is the only other one.
 *
 * - serial: threads started one after another while the main thread holds
 *   arena 0 all take arena 1, the emptiest, and so adopt the spans the
 *   last one left (round-robin sent them to 1, 2, 3, 0, 1, ...); while one
 *   runs, stats.arenas.1.nthreads is 1.
 * - together: 15 threads started at once, all bound before any exits (a
 *   barrier), spread as evenly as round-robin spread them: each arena
 *   holds exactly 4 of the 16 threads, by every thread's own thread.arena
 *   and by stats.arenas.<i>.nthreads (threads that pick at the same
 *   moment see each other's claims). */
#include <pthread.h>
#include <stdio.h>

#include "check.h"

enum { NARENAS = 4, SERIAL = 40, TOGETHER = 4 * NARENAS - 1 };

static unsigned arena_threads(unsigned i) {
  char name[64];
  snprintf(name, sizeof name, "stats.arenas.%u.nthreads", i);
  ctl_refresh();
  return ctl_unsigned(name);
}

static unsigned bind_here(void) {
  void *p = A_MALLOC(48); /* binds the thread to an arena */
  CHECK(p != NULL);
  A_FREE(p);
  return get_thread_arena();
}

static void *serial_thread(void *out) {
  unsigned a = bind_here();
  *(unsigned *)out = a;
  CHECKF(arena_threads(a) == 1, "arena %u: %u threads while one runs", a, arena_threads(a));
  return NULL;
}

static void check_serial(unsigned main_arena) {
  for (int k = 0; k < SERIAL; k++) {
    pthread_t t;
    unsigned a = NARENAS;
    CHECK(pthread_create(&t, NULL, serial_thread, &a) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECKF(a == 1, "thread %d of %d started one after another took arena %u (main: %u)", k,
           SERIAL, a, main_arena);
  }
}

static pthread_barrier_t bound, counted;
static unsigned together_arena[TOGETHER];

static void *together_thread(void *arg) {
  together_arena[(uintptr_t)arg] = bind_here();
  pthread_barrier_wait(&bound);   /* every thread bound... */
  pthread_barrier_wait(&counted); /* ...until the main thread has counted */
  return NULL;
}

static void check_together(unsigned main_arena) {
  pthread_t t[TOGETHER];
  CHECK(pthread_barrier_init(&bound, NULL, TOGETHER + 1) == 0);
  CHECK(pthread_barrier_init(&counted, NULL, TOGETHER + 1) == 0);
  for (uintptr_t k = 0; k < TOGETHER; k++)
    CHECK(pthread_create(&t[k], NULL, together_thread, (void *)k) == 0);
  pthread_barrier_wait(&bound);
  unsigned seen[NARENAS] = {0};
  seen[main_arena]++;
  for (int k = 0; k < TOGETHER; k++) {
    CHECKF(together_arena[k] < NARENAS, "thread.arena %u", together_arena[k]);
    seen[together_arena[k]]++;
  }
  for (unsigned i = 0; i < NARENAS; i++) {
    printf("arena %u: %u threads\n", i, seen[i]);
    CHECKF(seen[i] == (TOGETHER + 1) / NARENAS, "arena %u holds %u of %d threads", i, seen[i],
           TOGETHER + 1);
    CHECKF(arena_threads(i) == seen[i], "stats.arenas.%u.nthreads %u, threads there %u", i,
           arena_threads(i), seen[i]);
  }
  pthread_barrier_wait(&counted);
  for (int k = 0; k < TOGETHER; k++) CHECK(pthread_join(t[k], NULL) == 0);
  pthread_barrier_destroy(&bound);
  pthread_barrier_destroy(&counted);
}

int main(void) {
  CHECK(ctl_unsigned("arenas.narenas") == NARENAS);
  unsigned main_arena = bind_here();
  CHECKF(main_arena == 0, "the main thread took arena %u", main_arena);
  check_serial(main_arena);
  check_together(main_arena);
  check_serial(main_arena); /* the counts went back down */
  printf("ok\n");
  return 0;
}
