/* prof_http.h -- what the files of the live-profile HTTP server share:
 *   prof_http.c       the server: address, socket, thread, requests
 *   prof_http_req.c   the request parser (prof_http_req.h, fuzzed alone)
 *   prof_http_buf.c   scratch memory: growable buffers from mmap
 *   prof_pprof.c      a text dump -> pprof protobuf (with deltas)
 *   prof_gzip.c       the gzip wrapper around it
 *   prof_elfsym.c     address -> symbol name and mapping -> build id,
 *                     from the ELF files mapped in the process
 * None of it allocates through the heap it profiles: every byte comes
 * from mmap (ph_buf) or static storage, so serving a profile never changes
 * the profile, and works in exact mode without recording itself. */
#ifndef PROF_HTTP_H
#define PROF_HTTP_H

#include "prof_internal.h"

/* ---- options (NALLOC_CONF rows in prof_http.c) --------------------------- */
#define PROF_HTTP_ADDR_MAX 160
extern char opt_prof_http[PROF_HTTP_ADDR_MAX]; /* "" off; HOST:PORT; unix:PATH */
extern bool opt_prof_http_any;                 /* allow non-loopback */
extern bool opt_prof_http_fork;                /* fork children serve too */

/* ---- prof_http.c: hooks from prof.c (its ctl row: prof_hook.h) ------------ */
void prof_http_boot(void);          /* prof_boot_late */
void prof_http_postfork_child(void);

/* ---- prof_http_buf.c ------------------------------------------------------ */
/* A byte buffer in its own anonymous mapping, grown with mremap. Not
 * inherited by fork children (MADV_DONTFORK): a child never sees a
 * request the parent was serving. After an allocation failure `err` is
 * set and further appends do nothing, so writers check once at the end. */
typedef struct ph_buf_s {
  char *p;
  size_t len, cap;
  bool err;
} ph_buf_t;

bool ph_buf_reserve(ph_buf_t *b, size_t more);
void ph_buf_put(ph_buf_t *b, const void *s, size_t n);
void ph_buf_str(ph_buf_t *b, const char *s);
void ph_buf_u64(ph_buf_t *b, uint64_t v);
void ph_buf_hex(ph_buf_t *b, uint64_t v); /* 0x..., lowercase */
void ph_buf_free(ph_buf_t *b);
/* Zeroed memory of its own mapping (tables); NULL on failure. */
void *ph_mem(size_t size);
void ph_mem_free(void *p, size_t size);

/* ---- prof_pprof.c --------------------------------------------------------- */
/* Stacks of one or two text dumps, merged: the profile, or with a base
 * subtracted, the delta (?seconds=N). */
typedef struct ph_prof_s ph_prof_t;
ph_prof_t *ph_prof_new(void);
/* Adds the records of a gperftools-format dump text (nalloc's own) with
 * `sign` +1 or -1; the last dump added with +1 gives the mappings. False
 * if the text is not such a dump, or memory ran out. */
bool ph_prof_add(ph_prof_t *p, const char *text, size_t len, int sign);
/* The gzip'd profile.proto: sample types alloc_objects, alloc_space,
 * inuse_objects, inuse_space (unbiased when sampled), `default_type` one
 * of those names, locations at return address - 1 with their mappings
 * (and build ids), no function names (pprof asks /symbol or reads the
 * binaries). time_ns/duration_ns: when and over how long. */
bool ph_prof_write(ph_prof_t *p, const char *default_type, uint64_t time_ns,
                   uint64_t duration_ns, ph_buf_t *out);
void ph_prof_free(ph_prof_t *p);

/* ---- prof_gzip.c ---------------------------------------------------------- */
/* Appends in[0, n) to out as one gzip member. */
void ph_gzip(const void *in, size_t n, ph_buf_t *out);
uint32_t ph_crc32(uint32_t crc, const void *p, size_t n);

/* ---- prof_elfsym.c -------------------------------------------------------- */
/* One process's executable mappings and the ELF files behind them, read
 * from /proc/self/maps and /proc/self/map_files (so a binary deleted or
 * replaced on disk since it was loaded still resolves). For one request:
 * files stay open until ph_syms_free. */
typedef struct ph_syms_s ph_syms_t;
ph_syms_t *ph_syms_new(void);
/* The name of the function containing addr (*len bytes, not
 * NUL-terminated), or NULL. */
const char *ph_syms_lookup(ph_syms_t *s, uint64_t addr, size_t *len);
/* The GNU build id of the file mapped at [start, end) with `path`, as
 * lowercase hex into out[0, cap); false if none. */
bool ph_elf_build_id(uint64_t start, uint64_t end, const char *path,
                     char *out, size_t cap);
void ph_syms_free(ph_syms_t *s);

#endif
