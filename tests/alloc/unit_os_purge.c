/* unit_os_purge: batched purges (os_purge_add, os_purge_flush in
 * alloc/os.c), compiled into this test with the OS layer's neighbours
 * (lock.c, log.c, unit_support.c), against the kernel's view of the pages:
 * - a region of pages, each written with a pattern of its own, has random
 *   runs of 1-8 pages added in random order (some touching one another,
 *   which the batch merges; more than OS_BATCH_MAX of them, so the batch
 *   flushes itself too), then is flushed: every page added reads zero and
 *   is not resident (mincore), every other page keeps its pattern and
 *   stays resident;
 * - os_purge_add returns true exactly when it opened a batch: the count of
 *   trues is the number of flushes that found ranges;
 * - the same in a child whose seccomp filter makes process_madvise fail
 *   (ENOSYS, as on a kernel without it): the range-by-range path. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os.h"
#include "types.h"

#include "../check_core.h"

enum { NPAGES = 4096, ROUNDS = 6 };

static unsigned char pat(size_t page, int round) { return (unsigned char)(1 + (page * 7 + (size_t)round) % 251); }

/* One round: fill, purge random runs, check against the model. */
static void purge_round(unsigned char *base, int round) {
  static bool purged[NPAGES];
  static size_t runs[NPAGES][2];
  size_t nruns = 0;
  memset(purged, 0, sizeof purged);
  for (size_t p = 0; p < NPAGES; p++) memset(base + p * PAGE, pat(p, round), PAGE);
  /* runs of 1-8 pages, gaps of 0-3 (0: the next run touches this one) */
  for (size_t p = check_rnd() % 4; p < NPAGES; ) {
    size_t len = 1 + check_rnd() % 8;
    if (p + len > NPAGES) len = NPAGES - p;
    runs[nruns][0] = p;
    runs[nruns][1] = len;
    nruns++;
    p += len + check_rnd() % 4;
  }
  /* add some in order (adjacent ones merge) and the rest shuffled */
  for (size_t i = nruns / 2; i + 1 < nruns; i++) {
    size_t j = i + check_rnd() % (nruns - i);
    size_t t0 = runs[i][0], t1 = runs[i][1];
    runs[i][0] = runs[j][0];
    runs[i][1] = runs[j][1];
    runs[j][0] = t0;
    runs[j][1] = t1;
  }
  os_batch_t b;
  os_batch_init(&b);
  size_t opened = 0, merged = 0, kept = nruns - nruns / 8; /* the last eighth is not purged */
  for (size_t i = 0; i < kept; i++) {
    merged += i == 0 || runs[i - 1][0] + runs[i - 1][1] != runs[i][0];
    opened += os_purge_add(&b, base + runs[i][0] * PAGE, runs[i][1] * PAGE);
    CHECK(b.n >= 1 && b.n <= OS_BATCH_MAX);
    for (size_t k = 0; k < runs[i][1]; k++) purged[runs[i][0] + k] = true;
  }
  CHECKF(kept > 2 * OS_BATCH_MAX, "only %zu runs", kept);
  /* a batch holds OS_BATCH_MAX ranges after merging */
  CHECKF(opened == (merged + OS_BATCH_MAX - 1) / OS_BATCH_MAX, "%zu batches for %zu ranges", opened, merged);
  CHECK(merged < kept); /* some did merge */
  os_purge_flush(&b);
  CHECK(b.n == 0);
  os_purge_flush(&b); /* an empty batch: nothing */
  static unsigned char vec[NPAGES];
  CHECK(mincore(base, NPAGES * PAGE, vec) == 0);
  for (size_t p = 0; p < NPAGES; p++) {
    const unsigned char *q = base + p * PAGE;
    if (purged[p]) {
      CHECKF((vec[p] & 1) == 0, "round %d: purged page %zu still resident", round, p);
      for (size_t k = 0; k < PAGE; k += 512) CHECKF(q[k] == 0, "round %d: purged page %zu reads %u", round, p, q[k]);
    } else {
      CHECKF(vec[p] & 1, "round %d: page %zu not purged yet not resident", round, p);
      for (size_t k = 0; k < PAGE; k += 512)
        CHECKF(q[k] == pat(p, round), "round %d: page %zu lost its contents", round, p);
    }
  }
}

static void purge_rounds(void) {
  unsigned char *base = os_map(NPAGES * PAGE);
  CHECK(base != NULL);
  for (int r = 0; r < ROUNDS; r++) purge_round(base, r);
  os_unmap(base, NPAGES * PAGE);
}

/* process_madvise fails with ENOSYS, everything else is allowed. */
static void refuse_process_madvise(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_madvise, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
  CHECK(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0);
  CHECK(syscall(SYS_process_madvise, -1, NULL, 0, MADV_DONTNEED, 0) == -1 && errno == ENOSYS);
}

int main(void) {
  purge_rounds();
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    refuse_process_madvise();
    purge_rounds();
    _exit(0);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child without process_madvise failed (status %d)", st);
  printf("unit_os_purge: ok\n");
  return 0;
}
