/* npdemo_lib.c -- libnpdemo.so, the shared library part of alloc_demo:
 * checks symbolization of a library mapped at a random address. */
#include <stdlib.h>

__attribute__((noinline)) void *lib_alloc(size_t n) {
  return malloc(n); /* @lib_alloc */
}
