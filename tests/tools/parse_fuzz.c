/* parse_fuzz.c -- robustness test for nalloc-prof's reader and writers.
 *
 * For every file given: parse its prefixes (every truncation point with
 * NP_FUZZ_FULL=1 in the environment, else about 400 evenly spread ones, so
 * the ctest run stays short), and a fixed pseudo-random set of single-byte
 * corruptions; whenever the parse succeeds, build the view and run every
 * report into /dev/null (symbolizing, and writing SVG and protobuf, for
 * every 16th input only: those have their own tests and would dominate
 * the run time). The
 * test passes if nothing crashes (run it under ASan/UBSan for memory
 * errors: the sanitizer builds do), every failure comes with a message,
 * and the untouched file parses. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "np_report.h"

static long nparsed, nrejected;

static void one(const char *name, const char *data, size_t len,
                np_symbolizer *sym, np_symbolizer *nosym, FILE *null) {
  static unsigned count;
  bool full = count++ % 16 == 0; /* symbolize, and the costly writers */
  np_profile p;
  char err[512] = "";
  if (np_parse(name, data, len, &p, err, sizeof err) < 0) {
    if (!err[0] || strchr(err, '\n')) {
      fprintf(stderr, "FAIL: %s: rejected without a one-line message\n", name);
      exit(1);
    }
    nrejected++;
    np_profile_free(&p);
    return;
  }
  nparsed++;
  np_viewopts vo = {.thread = -1};
  np_view *v = np_view_build(&p, full ? sym : nosym, &vo);
  np_ropts o = {.counter = NP_INUSE_SPACE, .out = null};
  np_report_top(v, &o);
  o.lines = true;
  o.counter = NP_ALLOC_OBJECTS;
  np_report_stacks(v, &o);
  np_report_collapsed(v, &o);
  np_report_diff(v, v, &o);
  if (full) {
    np_report_flamegraph(v, &o);
    np_report_proto(v, sym, &o);
  }
  np_view_free(v);
  np_profile_free(&p);
}

int main(int argc, char **argv) {
  FILE *null = fopen("/dev/null", "w");
  np_symopts so = {0};
  np_symbolizer *sym = np_sym_new(&so);
  so.no_symbolize = true;
  np_symbolizer *nosym = np_sym_new(&so);
  bool full = getenv("NP_FUZZ_FULL") != NULL;
  unsigned seed = 12345;
  static const char subst[] = "\n :@[]0x-t*9\r\t\xff";
  for (int i = 1; i < argc; i++) {
    char *data, err[512];
    size_t len;
    if (np_read_file(argv[i], &data, &len, err, sizeof err) < 0) {
      fprintf(stderr, "FAIL: %s\n", err);
      return 1;
    }
    np_profile p;
    if (np_parse(argv[i], data, len, &p, err, sizeof err) < 0 &&
        !strstr(argv[i], "J08")) {
      fprintf(stderr, "FAIL: untouched %s rejected: %s\n", argv[i], err);
      return 1;
    }
    np_profile_free(&p);
    size_t step = full || len < 400 ? 1 : len / 400;
    for (size_t n = 0; n <= len; n += (n + step > len && n < len) ? len - n : step) {
      char *copy = malloc(n + 1); /* exact size: ASan sees any overread */
      memcpy(copy, data, n);
      one(argv[i], copy, n, sym, nosym, null);
      free(copy);
    }
    for (int k = 0; k < 200 && len; k++) {
      seed = seed * 1103515245u + 12345u;
      size_t at = (seed >> 8) % len;
      char *copy = malloc(len);
      memcpy(copy, data, len);
      copy[at] = subst[(seed >> 20) % (sizeof subst - 1)];
      one(argv[i], copy, len, sym, nosym, null);
      free(copy);
    }
    free(data);
  }
  np_sym_free(sym);
  np_sym_free(nosym);
  fclose(null);
  printf("parse_fuzz: %ld inputs parsed, %ld rejected with a message\n",
         nparsed, nrejected);
  return nparsed > 0 && nrejected > 0 ? 0 : 1;
}
