/* consumer.c -- a program built against an installed nalloc, through
 * pkg-config or find_package: it must link, allocate through nalloc and
 * read a ctl value. */
#include <nalloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  const char *v = NULL;
  size_t len = sizeof v;
  if (nalloc_ctl("version", &v, &len, NULL, 0) != 0 || strcmp(v, NALLOC_VERSION) != 0) {
    fprintf(stderr, "version mismatch\n");
    return 1;
  }
  uint64_t epoch = 1;
  size_t before, after, sl = sizeof before;
  nalloc_ctl("epoch", NULL, NULL, &epoch, sizeof epoch);
  nalloc_ctl("stats.allocated", &before, &sl, NULL, 0);
  void *volatile p = malloc(1 << 20); /* volatile: keep the pair */
  nalloc_ctl("epoch", NULL, NULL, &epoch, sizeof epoch);
  nalloc_ctl("stats.allocated", &after, &sl, NULL, 0);
  free(p);
  if (after < before + (1 << 20)) {
    fprintf(stderr, "malloc was not served by nalloc (%zu -> %zu)\n", before, after);
    return 1;
  }
  puts("consumer ok");
  return 0;
}
