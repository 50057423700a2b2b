/* main.c -- nalloc-prof: read heap profiles (nalloc's own dumps, gperftools
 * text, jemalloc threaded heap_v2) and show them: top, stacks, collapsed,
 * flamegraph, diff, proto. This file is only the command line; the work is
 * in np_parse (read), np_symbolize (addresses -> names), np_view (aggregate)
 * and the np_report_* / np_flamegraph / np_diff / np_proto writers. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "np_report.h"

#ifndef NP_VERSION
#define NP_VERSION "0"
#endif

static void np_usage(FILE *f) {
  fprintf(f,
"usage: nalloc-prof COMMAND [options] FILE.heap\n"
"       nalloc-prof diff [options] OLD.heap NEW.heap\n"
"\n"
"commands:\n"
"  top         functions (or --lines) by flat and cumulative value\n"
"  stacks      the largest call stacks with all four counters\n"
"  collapsed   folded stacks 'main;f;g N' for flamegraph tools\n"
"  flamegraph  an interactive SVG flame graph (write it to a .svg file)\n"
"  diff        what grew and what shrank from OLD to NEW, by function\n"
"              (sorted by flat change) and by stack\n"
"  proto       pprof protobuf (gzip'd), symbolized, for go tool pprof\n"
"\n"
"counter (one of; default --inuse_space):\n"
"  --inuse_space  --inuse_objects  --alloc_space  --alloc_objects\n"
"options:\n"
"  --lines             key by function and source line, not function\n"
"  --cum               top, diff: sort functions by cumulative value\n"
"                      (default: by flat value)\n"
"  -n, --nodecount=N   print at most N rows (top, stacks, diff; 0 = all)\n"
"  --thread=N          jemalloc threaded profiles: thread N only\n"
"  --node=N            nalloc profiles: only memory on NUMA node N (top\n"
"                      shows a column per node without it)\n"
"  --temporary         nalloc exact profiles: allocations freed before\n"
"                      their thread allocated again (top: with their share\n"
"                      of all allocations)\n"
"  --exe=FILE          the program binary: used for mapped files with the\n"
"                      same name, and for addresses outside every mapping\n"
"  --remap=OLD=NEW     read mapped files under path prefix OLD from NEW\n"
"  --no-symbols        do not symbolize (module+offset frames only)\n"
"  --keep-allocator-frames  keep malloc/new/allocator frames at the leaf\n"
"  --title=TEXT        flame graph title\n"
"  -o, --output=FILE   write to FILE instead of standard output\n"
"  -h, --help          this text;  --version\n");
}

enum {
  OPT_COUNTER = 256,
  OPT_LINES = OPT_COUNTER + NP_NCOUNTERS,
  OPT_THREAD,
  OPT_EXE,
  OPT_REMAP,
  OPT_NOSYM,
  OPT_KEEP,
  OPT_TITLE,
  OPT_CUM,
  OPT_NODE,
  OPT_TEMP,
  OPT_VERSION
};

static bool np_parse_long(const char *s, long *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < 0) return false;
  *out = v;
  return true;
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {
      {"inuse_objects", no_argument, 0, OPT_COUNTER + NP_INUSE_OBJECTS},
      {"inuse_space", no_argument, 0, OPT_COUNTER + NP_INUSE_SPACE},
      {"alloc_objects", no_argument, 0, OPT_COUNTER + NP_ALLOC_OBJECTS},
      {"alloc_space", no_argument, 0, OPT_COUNTER + NP_ALLOC_SPACE},
      {"lines", no_argument, 0, OPT_LINES},
      {"nodecount", required_argument, 0, 'n'},
      {"thread", required_argument, 0, OPT_THREAD},
      {"exe", required_argument, 0, OPT_EXE},
      {"remap", required_argument, 0, OPT_REMAP},
      {"no-symbols", no_argument, 0, OPT_NOSYM},
      {"keep-allocator-frames", no_argument, 0, OPT_KEEP},
      {"title", required_argument, 0, OPT_TITLE},
      {"cum", no_argument, 0, OPT_CUM},
      {"node", required_argument, 0, OPT_NODE},
      {"temporary", no_argument, 0, OPT_TEMP},
      {"output", required_argument, 0, 'o'},
      {"help", no_argument, 0, 'h'},
      {"version", no_argument, 0, OPT_VERSION},
      {0, 0, 0, 0}};
  np_ropts ro = {.counter = NP_INUSE_SPACE, .out = stdout};
  np_symopts so = {0};
  np_viewopts vo = {.thread = -1};
  const char *outpath = NULL;
  bool temporary = false;
  int ncounter_flags = 0, c;
  size_t capremap = 0;
  while ((c = getopt_long(argc, argv, "n:o:h", longopts, NULL)) != -1) {
    if (c >= OPT_COUNTER && c < OPT_COUNTER + NP_NCOUNTERS) {
      ro.counter = c - OPT_COUNTER;
      ncounter_flags++;
      continue;
    }
    switch (c) {
    case OPT_LINES: ro.lines = true; break;
    case 'n':
      if (!np_parse_long(optarg, &ro.nodecount)) {
        fprintf(stderr, "%s: bad --nodecount '%s'\n", np_progname, optarg);
        return 2;
      }
      break;
    case OPT_THREAD:
      if (!np_parse_long(optarg, &vo.thread)) {
        fprintf(stderr, "%s: bad --thread '%s'\n", np_progname, optarg);
        return 2;
      }
      break;
    case OPT_EXE: so.exe = optarg; break;
    case OPT_REMAP: {
      char *eq = strchr(optarg, '=');
      if (!eq || eq == optarg) {
        fprintf(stderr, "%s: --remap needs OLD=NEW\n", np_progname);
        return 2;
      }
      size_t cap2 = capremap;
      *NP_PUSH(so.remap_from, so.nremap, capremap) =
          np_xstrndup(optarg, (size_t)(eq - optarg));
      np_grow((void **)&so.remap_to, &cap2, so.nremap, sizeof *so.remap_to);
      so.remap_to[so.nremap - 1] = eq + 1;
      break;
    }
    case OPT_NOSYM: so.no_symbolize = true; break;
    case OPT_KEEP: vo.keep_allocator_frames = true; break;
    case OPT_TITLE: ro.title = optarg; break;
    case OPT_CUM: ro.cum = true; break;
    case OPT_NODE: {
      long nd;
      if (!np_parse_long(optarg, &nd) || nd > 255) {
        fprintf(stderr, "%s: bad --node '%s'\n", np_progname, optarg);
        return 2;
      }
      vo.kind = NP_REC_NODE;
      vo.node = (int)nd;
      break;
    }
    case OPT_TEMP: temporary = true; break;
    case 'o': outpath = optarg; break;
    case 'h': np_usage(stdout); return 0;
    case OPT_VERSION: printf("nalloc-prof %s\n", NP_VERSION); return 0;
    default: np_usage(stderr); return 2;
    }
  }
  if (temporary && vo.kind == NP_REC_NODE) {
    fprintf(stderr, "%s: give --node or --temporary, not both\n", np_progname);
    return 2;
  }
  if (temporary) { /* the counts are allocations: alloc_objects */
    vo.kind = NP_REC_TEMP;
    ro.counter = NP_ALLOC_OBJECTS;
  }
  if (ncounter_flags > 1) {
    fprintf(stderr, "%s: give only one of --inuse_space, --inuse_objects, "
                    "--alloc_space, --alloc_objects\n", np_progname);
    return 2;
  }
  if (optind >= argc) {
    np_usage(stderr);
    return 2;
  }
  const char *cmd = argv[optind++];
  static const char *const cmds[] = {"top", "stacks", "collapsed", "flamegraph",
                                     "diff", "proto", NULL};
  int ci = 0;
  while (cmds[ci] && strcmp(cmds[ci], cmd) != 0) ci++;
  if (!cmds[ci]) {
    fprintf(stderr, "%s: unknown command '%s' (try --help)\n", np_progname,
            cmd);
    return 2;
  }
  int nfiles = strcmp(cmd, "diff") == 0 ? 2 : 1;
  if (argc - optind != nfiles) {
    fprintf(stderr, "%s: %s needs %s\n", np_progname, cmd,
            nfiles == 2 ? "two profiles: OLD NEW" : "one profile file");
    return 2;
  }
  if (strcmp(cmd, "proto") == 0 && !outpath && isatty(STDOUT_FILENO)) {
    fprintf(stderr, "%s: proto writes binary data; use -o FILE or redirect "
                    "standard output\n", np_progname);
    return 2;
  }

  np_profile prof[2];
  np_view *view[2] = {NULL, NULL};
  np_symbolizer *sym = np_sym_new(&so);
  char err[512];
  int rc = 0;
  for (int i = 0; i < nfiles; i++) {
    if (np_load(argv[optind + i], &prof[i], err, sizeof err) < 0) {
      fprintf(stderr, "%s: %s\n", np_progname, err);
      for (int k = 0; k <= i; k++) np_profile_free(&prof[k]);
      np_sym_free(sym);
      return 1;
    }
    if (ro.counter >= NP_ALLOC_OBJECTS && !prof[i].has_alloc &&
        prof[i].nrecs > 0) {
      fprintf(stderr,
              "%s: %s: the profile has no cumulative counters (all alloc "
              "values are 0; for nalloc/jemalloc enable prof_accum)\n",
              np_progname, prof[i].filename);
      rc = 1;
    }
    if (vo.kind == NP_REC_NODE && vo.node >= prof[i].nnodes) {
      fprintf(stderr, "%s: %s: no memory on node %d in the profile (nalloc "
                      "writes per-node lines when it has more than one NUMA "
                      "node)\n", np_progname, prof[i].filename, vo.node);
      rc = 1;
    }
    if (vo.kind == NP_REC_TEMP && !prof[i].has_temp) {
      fprintf(stderr, "%s: %s: no temporary allocations in the profile (nalloc "
                      "counts them in exact mode, lg_prof_sample:0; sampled "
                      "profiles carry lifetimes, shown by top)\n",
              np_progname, prof[i].filename);
      rc = 1;
    }
    if (vo.thread >= 0 && prof[i].format != NP_FMT_JEMALLOC) {
      fprintf(stderr, "%s: --thread needs a jemalloc threaded (heap_v2) "
                      "profile\n", np_progname);
      rc = 1;
    }
  }
  np_view *extra[257];
  int nextra = 0;
  if (rc == 0) {
    for (int i = 0; i < nfiles; i++) view[i] = np_view_build(&prof[i], sym, &vo);
    /* top's extra columns: flat per node, allocations beside temporaries,
     * the median lifetime */
    np_viewopts xo = vo;
    if (ci == 0 && vo.kind == NP_REC_MAIN && prof[0].nnodes > 1) {
      xo.kind = NP_REC_NODE;
      for (xo.node = 0; xo.node < prof[0].nnodes; xo.node++)
        extra[nextra++] = np_view_build(&prof[0], sym, &xo);
      ro.nodes = (const np_view *const *)extra;
      ro.nnodes = nextra;
    }
    if (ci == 0 && vo.kind == NP_REC_TEMP) {
      xo.kind = NP_REC_MAIN;
      ro.all = extra[nextra++] = np_view_build(&prof[0], sym, &xo);
    }
    if (ci == 0 && vo.kind == NP_REC_MAIN && prof[0].has_life) {
      xo.kind = NP_REC_LIFE;
      ro.life = extra[nextra++] = np_view_build(&prof[0], sym, &xo);
    }
    if (outpath && !(ro.out = fopen(outpath, "wb"))) {
      perror(outpath);
      rc = 1;
    }
  }
  if (rc == 0) {
    switch (ci) {
    case 0: rc = np_report_top(view[0], &ro); break;
    case 1: rc = np_report_stacks(view[0], &ro); break;
    case 2: rc = np_report_collapsed(view[0], &ro); break;
    case 3: rc = np_report_flamegraph(view[0], &ro); break;
    case 4: rc = np_report_diff(view[0], view[1], &ro); break;
    case 5: rc = np_report_proto(view[0], sym, &ro); break;
    }
    if (fflush(ro.out) != 0 || ferror(ro.out)) rc = -1;
    if (rc != 0) fprintf(stderr, "%s: error writing output\n", np_progname);
    if (ro.out != stdout) fclose(ro.out);
    rc = rc ? 1 : 0;
  }
  for (int i = 0; i < nextra; i++) np_view_free(extra[i]);
  for (int i = 0; i < nfiles; i++) {
    np_view_free(view[i]);
    np_profile_free(&prof[i]);
  }
  np_sym_free(sym);
  for (size_t i = 0; i < so.nremap; i++) free(so.remap_from[i]);
  free(so.remap_from);
  free(so.remap_to);
  return rc;
}
