/* leaky.c -- the demo program for tools/demo.sh: a toy request handler
 * with a cache that never evicts (the leak), a per-request scratch buffer
 * that is freed (no leak), and a session table that grows with clients.
 * Profiling it should point at cache_put as the stack holding most bytes.
 * Usage: demo-leaky [REQUESTS [SECONDS]]; with SECONDS it stays alive that
 * long after the work, for a live profile (prof_http). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct entry {
  struct entry *next;
  char *key, *value;
} entry_t;

static entry_t *cache;
static char **sessions;
static size_t nsessions;

__attribute__((noinline)) static void cache_put(const char *key, size_t vlen) {
  entry_t *e = malloc(sizeof *e);
  e->key = strdup(key);
  e->value = malloc(vlen);
  memset(e->value, 'v', vlen);
  e->next = cache;
  cache = e;
}

__attribute__((noinline)) static void session_open(unsigned client) {
  sessions = realloc(sessions, (nsessions + 1) * sizeof *sessions);
  sessions[nsessions] = calloc(1, 256);
  snprintf(sessions[nsessions], 256, "client-%u", client);
  nsessions++;
}

__attribute__((noinline)) static size_t handle_request(unsigned i) {
  char *scratch = malloc(4096 + i % 1024);
  memset(scratch, 0, 4096);
  char key[32];
  snprintf(key, sizeof key, "k%u", i);
  cache_put(key, 512 + (i % 7) * 64);
  size_t n = strlen(key);
  free(scratch);
  return n;
}

int main(int argc, char **argv) {
  unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 20000;
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) {
    total += handle_request(i);
    if (i % 100 == 0) session_open(i / 100);
  }
  printf("handled %u requests (%zu key bytes), %zu sessions\n", n, total, nsessions);
  if (argc > 2) {
    fflush(stdout);
    sleep((unsigned)atoi(argv[2]));
  }
  return 0;
}
