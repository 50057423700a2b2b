/* prof_exact.c -- lg_prof_sample:0 records every allocation exactly:
 * 2,2,2,2,3 requested bytes from three stacks give "5: 11", b holds 7
 * bytes and a 4; frame 0 is the return address in malloc's caller; frees
 * leave "0: 0 [5: 11]"; calloc/posix_memalign/malloc(0) are charged too.
 * Run with both unwinders (see CMakeLists.txt). */
#include "prof_check.h"

#include <unistd.h>

void *sink[32];
int ns;
NOINL void b(size_t n) { sink[ns++] = t_malloc(n); __asm__ volatile(""); }
NOINL void a(size_t n) { sink[ns++] = t_malloc(n); b(n); __asm__ volatile(""); }
NOINL void c(void) { sink[ns++] = t_calloc(3, 4); __asm__ volatile(""); }
NOINL void d(void) {
  void *p = NULL;
  CHECK(t_posix_memalign(&p, 64, 40) == 0);
  sink[ns++] = p;
  sink[ns++] = t_malloc(0);
  __asm__ volatile("");
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  char f1[512], f2[512], f3[512];
  snprintf(f1, sizeof f1, "%s/prof_exact.%d.1.heap", dir, (int)getpid());
  snprintf(f2, sizeof f2, "%s/prof_exact.%d.2.heap", dir, (int)getpid());
  snprintf(f3, sizeof f3, "%s/prof_exact.%d.3.heap", dir, (int)getpid());

  size_t lg = 1;
  size_t sz = sizeof lg;
  CHECK(nalloc_ctl("prof.lg_sample", &lg, &sz, NULL, 0) == 0);
  CHECK_EQ_U(lg, 0);
  /* prof_active:false in NALLOC_CONF: start-up allocations stay out. */
  ctl_bool("prof.active", true);
  for (int i = 0; i < 2; i++) a(2); /* one call site: one stack */
  b(3);
  ctl_bool("prof.active", false);
  CHECK(ctl_dump(f1) == 0);

  pc_prof_t P = pc_load(f1);
  CHECK(strcmp(P.label, "heapprofile") == 0);
  CHECK_EQ_U(P.n, 5);
  CHECK_EQ_U(P.b, 11);
  CHECK_EQ_U(P.an, 5);
  CHECK_EQ_U(P.ab, 11);
  CHECK_EQ_U(P.nrec, 3);
  pc_sum_t sa = pc_sum(&P, "a", "main"), sba = pc_sum(&P, "b", "a"),
           sbm = pc_sum(&P, "b", "main"), sb = pc_sum(&P, "b", NULL);
  CHECK_EQ_U(sa.n, 2);
  CHECK_EQ_U(sa.b, 4);
  CHECK_EQ_U(sba.n, 2);
  CHECK_EQ_U(sba.b, 4);
  CHECK_EQ_U(sbm.n, 1);
  CHECK_EQ_U(sbm.b, 3);
  CHECK_EQ_U(sb.b, 7);
  CHECK_EQ_U(sa.nrec + sba.nrec + sbm.nrec, 3);
  /* b <- a <- main: the stack goes on past main's frame. */
  for (int i = 0; i < P.nrec; i++)
    if (!strcmp(pc_fn(P.rec[i].f[0]), "b") && !strcmp(pc_fn(P.rec[i].f[1]), "a"))
      CHECK(P.rec[i].nf >= 3 && !strcmp(pc_fn(P.rec[i].f[2]), "main"));
  pc_free(&P);

  /* Free everything: nothing live, the cumulative pair stays. */
  for (int i = 0; i < ns; i++) t_free(sink[i]);
  ns = 0;
  CHECK(ctl_dump(f2) == 0);
  P = pc_load(f2);
  CHECK_EQ_U(P.n, 0);
  CHECK_EQ_U(P.b, 0);
  CHECK_EQ_U(P.an, 5);
  CHECK_EQ_U(P.ab, 11);
  sb = pc_sum(&P, "b", NULL);
  CHECK_EQ_U(sb.n, 0);
  CHECK_EQ_U(sb.an, 3);
  CHECK_EQ_U(sb.ab, 7);
  pc_free(&P);

  /* The other entry points, and a zero-byte request. */
  ctl_bool("prof.active", true);
  c();
  d();
  ctl_bool("prof.active", false);
  CHECK(ctl_dump(f3) == 0);
  P = pc_load(f3);
  pc_sum_t sc = pc_sum(&P, "c", "main"), sd = pc_sum(&P, "d", "main");
  CHECK_EQ_U(sc.n, 1);
  CHECK_EQ_U(sc.b, 12);
  CHECK_EQ_U(sd.n, 2);
  CHECK_EQ_U(sd.b, 40);
  CHECK_EQ_U(P.n, 3);
  CHECK_EQ_U(P.b, 52);
  pc_free(&P);
  for (int i = 0; i < ns; i++) t_free(sink[i]);
  unlink(f1);
  unlink(f2);
  unlink(f3);
  printf("prof_exact: ok\n");
  return 0;
}
