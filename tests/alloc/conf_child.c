/* conf_child: helper for conf_bad. Initialises nalloc (one allocation),
 * then prints every opt.* value it can read as key=value lines on stdout,
 * plus secure=<AT_SECURE>, and exits 0. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/types.h>

#include "check.h"

static void pr(const char *key, int type) {
  char name[64];
  snprintf(name, sizeof name, "opt.%s", key);
  union {
    bool b;
    unsigned u;
    size_t z;
    ssize_t s;
  } v;
  memset(&v, 0, sizeof v);
  size_t sz = type == 0 ? sizeof(bool) : type == 1 ? sizeof(unsigned)
              : type == 2 ? sizeof(size_t) : sizeof(ssize_t);
  int r = nalloc_ctl(name, &v, &sz, NULL, 0);
  if (r != 0) {
    printf("%s=<error %d>\n", key, r);
    return;
  }
  switch (type) {
    case 0: printf("%s=%s\n", key, v.b ? "true" : "false"); break;
    case 1: printf("%s=%u\n", key, v.u); break;
    case 2: printf("%s=%zu\n", key, v.z); break;
    default: printf("%s=%zd\n", key, v.s); break;
  }
}

int main(void) {
  void *p = A_MALLOC(100);
  if (p == NULL) return 2;
  A_FREE(p);
  pr("narenas", 1);
  pr("tcache", 0);
  pr("tcache_max", 2);
  pr("dirty_decay_ms", 3);
  pr("abort_conf", 0);
  pr("numa", 0);
  pr("narenas_per_node", 1);
  pr("numa_nodes", 1);
  printf("secure=%lu\n", getauxval(AT_SECURE));
  fflush(stdout);
  return 0;
}
