/* ctl_fuzz.c -- libFuzzer target for nalloc_ctl: names, old/new buffers
 * and lengths (NULLs, short, long, odd), values. Built with clang
 * -fsanitize=fuzzer,address,undefined over the whole engine
 * (tests/alloc/CMakeLists.txt), run for a bounded time by fuzz.sh with
 * profiling on, so the prof.* names answer too.
 *
 * Input: flags, oldlen code, newlen code, then the name up to a NUL, then
 * the new value's bytes. The buffers are heap blocks of exactly the length
 * passed (ASan sees any access past them). Names that take a pointer (the
 * dump paths, thread.prof.name) get a pointer to a string made from the
 * value bytes, never raw bytes: the contract asks for a valid pointer, and
 * dumps go to one file in the working directory. Checked:
 *   - the return value is 0 or one of the documented errors (nalloc.h);
 *   - *oldlenp never grows past the buffer; a size query (oldp NULL)
 *     reports a plausible size;
 *   - for a bool name (size 1): a write of 0 or 1 reads back what was
 *     written, and a write of any other byte is refused with EINVAL and
 *     changes nothing (read-only names refuse both with EPERM). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nalloc.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t lens[16] = {0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 32, 63, 64,
                                SIZE_MAX / 2, SIZE_MAX};

static void fail(const char *name, const char *what, int r) {
  fprintf(stderr, "ctl_fuzz: nalloc_ctl(\"%s\"): %s (returned %d)\n", name, what, r);
  abort();
}

/* 0 and the errors nalloc.h documents; an action that reaches the OS (a
 * dump) may return what the OS said. */
static bool documented(const char *name, int r) {
  if (r == 0 || r == ENOENT || r == EINVAL || r == EPERM || r == EFAULT || r == EAGAIN ||
      r == ENOMEM)
    return true;
  return strncmp(name, "prof.dump", 9) == 0 && r > 0 && r < 4096;
}

static bool takes_string(const char *name) {
  return strcmp(name, "prof.dump") == 0 || strcmp(name, "prof.dump_peak") == 0 ||
         strcmp(name, "thread.prof.name") == 0;
}

/* A heap block of exactly n bytes (n capped: a huge length is passed with
 * a small buffer, and nalloc must not trust it). */
static void *block(size_t n, const uint8_t *from, size_t avail) {
  size_t m = n > 64 ? 64 : n;
  unsigned char *b = malloc(m ? m : 1);
  if (b == NULL) abort();
  memset(b, 0xa5, m ? m : 1);
  if (from) memcpy(b, from, avail < m ? avail : m);
  return b;
}

/* The bool contract, on a name whose value has size 1. */
static void check_bool(const char *name, unsigned char v) {
  unsigned char before = 0xee, after = 0xee;
  size_t sz = 1;
  if (nalloc_ctl(name, &before, &sz, NULL, 0) != 0) return; /* not readable */
  if (before > 1) fail(name, "a bool reads as a byte other than 0/1", before);
  int r = nalloc_ctl(name, NULL, NULL, &v, 1);
  sz = 1;
  if (nalloc_ctl(name, &after, &sz, NULL, 0) != 0) fail(name, "read back failed", 0);
  if (r == EPERM) {
    if (after != before) fail(name, "a refused write changed the value", r);
    return;
  }
  if (v <= 1) {
    if (r != 0) fail(name, "a write of 0/1 to a writable bool failed", r);
    if (after != v) fail(name, "a bool does not read back what was written", after);
  } else {
    if (r != EINVAL) fail(name, "a bool write of a byte other than 0/1 not refused with EINVAL", r);
    if (after != before) fail(name, "a refused bool write changed the value", after);
  }
  nalloc_ctl(name, NULL, NULL, &before, 1); /* put it back */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  unsigned flags = data[0];
  size_t oldlen = lens[data[1] & 15], newlen = lens[data[2] & 15];
  const uint8_t *rest = data + 3;
  size_t nrest = size - 3;
  const uint8_t *nul = memchr(rest, 0, nrest);
  size_t nlen = nul ? (size_t)(nul - rest) : nrest;
  if (nlen > 200) return 0;
  char name[201];
  memcpy(name, rest, nlen);
  name[nlen] = 0;
  const uint8_t *val = nul ? nul + 1 : rest + nrest;
  size_t nval = (size_t)(rest + nrest - val);

  /* some allocator work, so the statistics and thread records exist */
  void *keep = nalloc_malloc(1 + (flags & 0x70) * 37);
  nalloc_free(keep);

  void *oldp = (flags & 1) ? block(oldlen, NULL, 0) : NULL;
  size_t olen = oldlen, *oldlenp = (flags & 2) ? &olen : NULL;
  void *newp = NULL;
  char str[64];
  const char *sp = NULL;
  if (flags & 4) {
    if (takes_string(name) && newlen == sizeof(char *)) {
      size_t k = nval < sizeof str - 1 ? nval : sizeof str - 1;
      memcpy(str, val, k);
      str[k] = 0;
      if (strncmp(name, "prof.dump", 9) == 0) /* no path from the input */
        snprintf(str, sizeof str, "ctl_fuzz.heap");
      sp = (flags & 8) && strcmp(name, "thread.prof.name") == 0 ? NULL : str;
      newp = block(sizeof sp, (const uint8_t *)&sp, sizeof sp);
    } else {
      newp = block(newlen, val, nval);
    }
  }
  int r = nalloc_ctl(nlen || !(flags & 0x80) ? name : NULL, oldp, oldlenp, newp, newlen);
  if (!documented(name, r)) fail(name, "an undocumented return value", r);
  if (oldp && oldlenp && olen > oldlen) fail(name, "*oldlenp grew", r);
  if (!oldp && oldlenp && r == 0 && olen > 4096) fail(name, "an implausible size", (int)olen);
  free(oldp);
  free(newp);

  /* the bool contract, on whatever name this was */
  size_t sz = 0;
  if (nlen && nalloc_ctl(name, NULL, &sz, NULL, 0) == 0 && sz == 1)
    check_bool(name, nval ? val[0] : (unsigned char)flags);
  return 0;
}
