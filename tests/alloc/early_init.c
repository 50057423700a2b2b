/* early_init: nalloc serves allocations made by a library constructor that
 * runs before nalloc's own constructor (early_lib.c), with NALLOC_CONF
 * already applied to them (run with NALLOC_CONF=narenas:3,tcache_max:4096),
 * and the blocks stay valid and freeable in main. */
#include <stdint.h>
#include <stdio.h>

#include "check.h"

extern void *early_ptr[8];
extern size_t early_size[8];

static void *main_ctor_ptr;
__attribute__((constructor)) static void exe_ctor(void) {
  main_ctor_ptr = A_MALLOC(777);
}

int main(void) {
  for (int i = 0; i < 7; i++) {
    CHECKF(early_ptr[i] != NULL, "malloc(%zu) in an early constructor failed",
           early_size[i]);
    CHECKF(A_USABLE(early_ptr[i]) >= early_size[i],
           "usable size of the early block %d", i);
    CHECKF(check_fast(early_ptr[i], early_size[i], 0xe0 + (uint64_t)i),
           "early block %d corrupted", i);
  }
  CHECK(early_ptr[7] != NULL);
  for (size_t k = 0; k < 5000; k++)
    CHECKF(((unsigned char *)early_ptr[7])[k] == 0, "early calloc not zero");
  CHECK(main_ctor_ptr != NULL && A_USABLE(main_ctor_ptr) >= 777);
  /* the configuration was in force for them */
  CHECKF(ctl_unsigned("opt.narenas") == 3, "opt.narenas = %u: NALLOC_CONF "
         "was not applied before the first allocation",
         ctl_unsigned("opt.narenas"));
  CHECKF(ctl_size("opt.tcache_max") == 4096, "opt.tcache_max = %zu",
         ctl_size("opt.tcache_max"));
  size_t a0 = stat_allocated();
  CHECKF(a0 >= (3u << 20), "stats.allocated %zu does not include the early "
         "3 MiB block", a0);
  for (int i = 0; i < 8; i++) A_FREE(early_ptr[i]);
  A_FREE(main_ctor_ptr);
  size_t a1 = stat_allocated();
  CHECKF(a1 + (3u << 20) <= a0, "freeing the early blocks: allocated %zu -> "
         "%zu", a0, a1);
  printf("early_init: ok\n");
  return 0;
}
