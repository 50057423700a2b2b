/* prof_realloc.c -- realloc moves the charge (exact mode): the old stack
 * loses the object, the realloc caller's stack gains the new size;
 * realloc(NULL, n) is a malloc, realloc(p, 0) a free. */
#include "prof_check.h"

#include <unistd.h>

static void *p, *q;
NOINL void f1(void) { p = t_malloc(100); __asm__ volatile(""); }
NOINL void f2(void) { p = t_realloc(p, 5000); __asm__ volatile(""); }
NOINL void f3(void) { q = t_realloc(NULL, 64); __asm__ volatile(""); }
NOINL void f4(void) { p = t_realloc(p, 10); __asm__ volatile(""); }
NOINL void f5(void) { q = t_realloc(q, 0); __asm__ volatile(""); }
NOINL void f6(void) { p = t_realloc(p, 11); __asm__ volatile(""); }

static pc_prof_t dump(int step) {
  char tag[64];
  snprintf(tag, sizeof tag, "prof_realloc.%d", step);
  return pc_dump_load(tag);
}

#define EXPECT(P, fn, n_, b_, an_, ab_)   \
  do {                                    \
    pc_sum_t s_ = pc_sum(&P, fn, "main"); \
    CHECK_EQ_U(s_.n, n_);                 \
    CHECK_EQ_U(s_.b, b_);                 \
    CHECK_EQ_U(s_.an, an_);               \
    CHECK_EQ_U(s_.ab, ab_);               \
  } while (0)

int main(void) {
  f1();
  f2();
  f3();
  pc_prof_t P = dump(1);
  EXPECT(P, "f1", 0, 0, 1, 100);
  EXPECT(P, "f2", 1, 5000, 1, 5000);
  EXPECT(P, "f3", 1, 64, 1, 64);
  pc_free(&P);
  f4();
  f5();
  CHECK(q == NULL);
  f6(); /* same size class as 10: still recharged, the object moves */
  P = dump(2);
  EXPECT(P, "f2", 0, 0, 1, 5000);
  EXPECT(P, "f3", 0, 0, 1, 64);
  EXPECT(P, "f4", 0, 0, 1, 10);
  EXPECT(P, "f5", 0, 0, 0, 0);
  EXPECT(P, "f6", 1, 11, 1, 11);
  pc_free(&P);
  t_free(p);
  P = dump(3);
  EXPECT(P, "f6", 0, 0, 1, 11);
  pc_free(&P);
  printf("prof_realloc: ok\n");
  return 0;
}
