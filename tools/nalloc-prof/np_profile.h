/* np_profile.h -- the in-memory form of one heap profile, as read from a
 * text file: records (a raw stack of return addresses plus four counters),
 * the process's executable mappings, and what the header said about
 * sampling. Symbolization (np_symbolize.h) and aggregation (np_view.h) work
 * from this. */
#ifndef NP_PROFILE_H
#define NP_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The four counters every heap-profile record carries, in the order the
 * text formats write them: "inuse_objs: inuse_bytes [alloc_objs:
 * alloc_bytes]". */
enum np_counter {
  NP_INUSE_OBJECTS = 0,
  NP_INUSE_SPACE = 1,
  NP_ALLOC_OBJECTS = 2,
  NP_ALLOC_SPACE = 3,
  NP_NCOUNTERS = 4
};
extern const char *const np_counter_names[NP_NCOUNTERS];
static inline bool np_counter_is_space(int c) { return c & 1; }

enum np_format {
  NP_FMT_GPERF,   /* "heap profile: ..." (gperftools legacy text, nalloc) */
  NP_FMT_JEMALLOC /* "heap_v2/R" with t* / tN lines (jemalloc threaded) */
};

/* How the reader corrects sampled counts (see np_unbias.c). */
enum np_sampling {
  NP_SAMPLING_NONE, /* exact profile: heapprofile, growth, ... */
  NP_SAMPLING_V1,   /* old remote-heap: heap/R, or no label at all */
  NP_SAMPLING_V2    /* Poisson sampling: heap_v2/R */
};

/* What a record is: an ordinary line, or one of nalloc's '#nalloc' view
 * lines (issue 14), which the other readers skip as comments: the part of
 * a line on one NUMA node, a stack's temporary allocations (exact
 * profiles; the count is in the alloc_objects counter), or a stack's
 * lifetime histogram of sampled objects (`life`). */
enum np_kind { NP_REC_MAIN, NP_REC_NODE, NP_REC_TEMP, NP_REC_LIFE };
#define NP_LIFE_N 14 /* prof_internal.h PROF_LIFE_N */

typedef struct np_record {
  uint64_t *pcs; /* return addresses exactly as written, leaf first */
  size_t npcs;
  enum np_kind kind;
  int node;                /* NP_REC_NODE */
  uint64_t *life;          /* NP_REC_LIFE: NP_LIFE_N counts, else NULL */
  long thread;             /* -1: all threads (gperftools line or t*) */
  int64_t raw[NP_NCOUNTERS];
  double v[NP_NCOUNTERS];  /* after unbiasing */
  int line;                /* line number in the file, for messages */
} np_record;

typedef struct np_mapping {
  uint64_t start, end, offset; /* [start,end) maps file bytes at offset */
  char *path;                  /* "" for anonymous mappings */
  bool has_offset;             /* false for the brief "start-end perms path" form */
} np_mapping;

typedef struct np_thread_name {
  long id;
  char *name;
} np_thread_name;

typedef struct np_profile {
  char *filename;
  enum np_format format;
  char label[32];        /* "heapprofile", "heap_v2", "heap", "" ... */
  uint64_t period;       /* R from "label/R", 0 if absent */
  enum np_sampling sampling;
  double adjustment;     /* the R (or R/2) that unbiasing used */
  bool has_alloc;        /* some record has non-zero alloc counters */
  bool alloc_differs;    /* ... and they differ from the in-use ones */
  int64_t header[NP_NCOUNTERS];
  np_record *recs;
  size_t nrecs, caprecs;
  np_mapping *maps;      /* executable mappings only, in file order */
  size_t nmaps, capmaps;
  np_thread_name *threads;
  size_t nthreads, capthreads;
  int nnodes;            /* 1 + the highest node of a node line; 0: none */
  bool has_temp, has_life; /* temporary / lifetime lines present */
} np_profile;

/* Parses a profile held in memory. Returns 0, or -1 with a one-line
 * message (naming the file and line) in err. Warnings go to stderr. */
int np_parse(const char *filename, const char *data, size_t len,
             np_profile *out, char *err, size_t errlen);
/* Reads and parses a file ("-" is stdin). */
int np_load(const char *filename, np_profile *out, char *err, size_t errlen);
void np_profile_free(np_profile *p);

/* Parses one /proc/<pid>/maps line (full or brief form). Returns true and
 * fills *m (path malloc'd) for an executable mapping; false for anything
 * else, including lines that are not maps lines at all. */
bool np_maps_parse_line(const char *s, size_t n, np_mapping *m);
/* Finds the executable mapping containing addr, or NULL. */
const np_mapping *np_maps_find(const np_profile *p, uint64_t addr);

/* Unbiasing (np_unbias.c): corrects one record's counters in place. */
void np_unbias_record(const np_profile *p, np_record *r);

#endif
