/* early_lib: a shared library whose constructor allocates, linked after
 * libnalloc so that the dynamic loader runs this constructor BEFORE
 * libnalloc's own: the first malloc of the process arrives before nalloc's
 * constructor ran (as with any library that allocates in its initialiser). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

void *early_ptr[8];
size_t early_size[8];

__attribute__((constructor)) static void early_init(void) {
  static const size_t sizes[8] = {1, 24, 100, 4000, 40000, 300000, 3 << 20, 0};
  for (int i = 0; i < 7; i++) {
    early_size[i] = sizes[i];
    early_ptr[i] = A_MALLOC(sizes[i]);
    if (early_ptr[i]) fill_fast(early_ptr[i], sizes[i], 0xe0 + (uint64_t)i);
  }
  early_size[7] = 5000;
  early_ptr[7] = A_CALLOC(1, 5000);
  void *t = A_MEMALIGN(4096, 100);
  A_FREE(t);
  t = A_REALLOC(NULL, 10);
  t = A_REALLOC(t, 100000);
  A_FREE(t);
}
