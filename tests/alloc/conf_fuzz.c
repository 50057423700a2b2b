/* conf_fuzz.c -- libFuzzer target for the NALLOC_CONF parser (conf_parse),
 * built with clang -fsanitize=fuzzer,address,undefined over the whole
 * engine (tests/alloc/CMakeLists.txt) and run for a bounded time by
 * fuzz.sh.
 *
 * The input, up to its first NUL (an environment string has none), is
 * parsed as NALLOC_CONF. Besides "no crash, no sanitizer report", it checks
 * what the parser promises:
 *   - the messages (read back through nalloc_log_to) are whole lines
 *     starting "<nalloc>: NALLOC_CONF: ", at most 16 plus one
 *     "... N more problems not shown", with no control byte, no byte that
 *     is not UTF-8 and no C1 control: what came from the input is escaped;
 *   - conf_parse returns true exactly when it printed nothing;
 *   - a string of commas alone gets one line per comma (capped);
 *   - every option holds a value its row accepts, whatever was parsed. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include "conf.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int out_fd = -1;

static void fail(const char *what, const char *text, size_t n) {
  fprintf(stderr, "conf_fuzz: %s\n--- messages (%zu bytes) ---\n%.*s\n---\n", what, n,
          (int)(n > 4000 ? 4000 : n), text);
  abort();
}

/* An oracle of its own for "printable UTF-8, no C1": the sequence length
 * at s, or 0. */
static size_t utf8_ok(const unsigned char *s, size_t n) {
  if (s[0] >= 0xc2 && s[0] <= 0xdf && n >= 2 && (s[1] & 0xc0) == 0x80)
    return s[0] == 0xc2 && s[1] < 0xa0 ? 0 : 2; /* U+0080..U+009F: C1 */
  if (s[0] >= 0xe0 && s[0] <= 0xef && n >= 3 && (s[1] & 0xc0) == 0x80 &&
      (s[2] & 0xc0) == 0x80) {
    if (s[0] == 0xe0 && s[1] < 0xa0) return 0; /* overlong */
    if (s[0] == 0xed && s[1] >= 0xa0) return 0; /* surrogate */
    return 3;
  }
  if (s[0] >= 0xf0 && s[0] <= 0xf4 && n >= 4 && (s[1] & 0xc0) == 0x80 &&
      (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80) {
    if (s[0] == 0xf0 && s[1] < 0x90) return 0;
    if (s[0] == 0xf4 && s[1] >= 0x90) return 0;
    return 4;
  }
  return 0;
}

static void check_rows(void) {
  for (size_t i = 0;; i++) {
    const conf_entry_t *e = conf_row(i);
    if (e == NULL) break;
    int64_t v = 0;
    switch (e->type) {
    case CONF_BOOL: {
      unsigned char b;
      memcpy(&b, e->ptr, 1);
      if (b > 1) fail(e->name, "bool holds a byte other than 0/1", 0);
      continue;
    }
    case CONF_UNSIGNED: v = *(unsigned *)e->ptr; break;
    case CONF_SIZE: v = (int64_t) * (size_t *)e->ptr; break;
    case CONF_SSIZE: v = *(ssize_t *)e->ptr; break;
    case CONF_STR:
      if (memchr(e->ptr, 0, e->strcap) == NULL) fail(e->name, "string not terminated", 0);
      continue;
    case CONF_ENUM: {
      unsigned n = 0;
      while (e->choices[n]) n++;
      if (*(unsigned *)e->ptr >= n) fail(e->name, "enum index out of range", 0);
      continue;
    }
    case CONF_SIGNAL: {
      int s = *(int *)e->ptr;
      if (s < 0 || s >= NSIG || s == SIGSEGV || s == SIGBUS || s == SIGILL || s == SIGFPE ||
          s == SIGTRAP || s == SIGABRT || s == SIGKILL || s == SIGSTOP || s == SIGSYS)
        fail(e->name, "unusable signal accepted", 0);
      continue;
    }
    }
    /* options whose default lies outside the row's range do not exist:
     * the range holds from start-up on */
    if (v < e->min || v > e->max) fail(e->name, "value outside [min, max]", 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (out_fd < 0) {
    out_fd = memfd_create("conf_fuzz", MFD_CLOEXEC);
    if (out_fd < 0) abort();
    nalloc_log_to(out_fd);
  }
  char *s = malloc(size + 1);
  if (s == NULL) return 0;
  memcpy(s, data, size);
  s[size] = 0;
  size_t len = strlen(s);
  if (ftruncate(out_fd, 0) != 0 || lseek(out_fd, 0, SEEK_SET) != 0) abort();
  bool ok = conf_parse(s);
  static char out[65536];
  ssize_t n = pread(out_fd, out, sizeof out - 1, 0);
  if (n < 0) abort();
  out[n] = 0;

  size_t lines = 0;
  const char *prefix = "<nalloc>: NALLOC_CONF: ";
  for (size_t i = 0; i < (size_t)n;) {
    const char *nl = memchr(out + i, '\n', (size_t)n - i);
    if (nl == NULL) fail("a message without its newline", out, (size_t)n);
    if (strncmp(out + i, prefix, strlen(prefix)) != 0)
      fail("a line that is not a NALLOC_CONF message", out, (size_t)n);
    lines++;
    const unsigned char *u = (const unsigned char *)out;
    size_t end = (size_t)(nl - out);
    while (i < end) {
      if (u[i] >= 0x20 && u[i] < 0x7f) {
        i++;
      } else if (u[i] >= 0x80) {
        size_t k = utf8_ok(u + i, end - i);
        if (k == 0) fail("a byte that is not printable UTF-8", out, (size_t)n);
        i += k;
      } else {
        fail("a control byte in a message", out, (size_t)n);
      }
    }
    i = end + 1;
  }
  if (lines > 17) fail("more than 16 lines and a summary", out, (size_t)n);
  if (lines == 17 && strstr(out, "more problems not shown") == NULL)
    fail("17 lines without the summary", out, (size_t)n);
  if (ok != (lines == 0)) fail("the result disagrees with the messages", out, (size_t)n);
  if (len > 0 && strspn(s, ",") == len && lines != (len > 16 ? 17 : len))
    fail("commas alone: not one line per comma", out, (size_t)n);
  check_rows();
  free(s);
  return 0;
}
