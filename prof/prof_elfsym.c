/* prof_elfsym.c -- names for addresses of this process, for the profile
 * server's /debug/pprof/symbol (the remote-symbolization protocol of
 * gperftools and Go), and build ids for its protobuf mappings.
 *
 * An address is found in /proc/self/maps; the file behind its mapping is
 * opened through /proc/self/map_files/START-END, which names the very file
 * that was mapped even if it has since been deleted or replaced on disk
 * (an upgraded service still names its own functions), or by its path if
 * map_files is not readable. The file's symbol table is read (pread, see
 * ph_elf_t) and indexed once per request: .symtab, else the .symtab of its
 * separate debug file found by build id (/usr/lib/debug/.build-id/, where
 * distributions install -dbg packages), else .dynsym. Function
 * symbols sorted by address, looked up by binary search. An address no
 * sized symbol contains gets no name rather than the wrong one. No libelf,
 * no libdw and no malloc: every structure is bounds-checked by hand and
 * lives in ph_mem memory. */
#define _GNU_SOURCE
#include "prof_http.h"

#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PH_TAB_MAX ((uint64_t)1 << 30)  /* ignore symbol tables above 1 GiB */
#define PH_NOTE_MAX 65536

typedef struct {
  uint64_t value;
  uint32_t size; /* clamped: no function is 4 GiB long */
  uint32_t name; /* offset in strtab */
  uint32_t rank; /* among aliases the lowest wins: global, weak, local */
} ph_fsym_t;

/* What we keep of an ELF file: copies, read with pread(2). Not mmap: a
 * file truncated on disk while we read it would raise SIGBUS in this
 * thread, and a signal-free server must never take the process down. */
typedef struct {
  int fd;             /* open while indexing, -1 after */
  uint64_t size;      /* of the file */
  Elf64_Ehdr eh;
  Elf64_Phdr *ph;     /* ph_mem */
  unsigned nph;
  ph_fsym_t *syms;    /* ph_mem, sorted by value */
  size_t nsyms;
  char *strtab;       /* ph_mem */
  size_t strsz;
} ph_elf_t;

typedef struct {
  uint64_t start, end, off;
  const char *path; /* in the maps text, NUL-terminated */
  int state;        /* 0 not opened yet, 1 open, -1 unusable */
  ph_elf_t elf;     /* the mapped file: program headers, maybe symbols */
  ph_elf_t dbg;     /* its debug file, when the symbols come from there */
} ph_xmap_t;

struct ph_syms_s {
  ph_buf_t maps;   /* /proc/self/maps, lines NUL-terminated in place */
  ph_xmap_t *x;
  size_t nx, capx;
};

/* ---- reading an ELF file ------------------------------------------------ */

/* "/proc/self/map_files/<start>-<end>" (lowercase hex, no 0x). */
static void ph_map_files_name(char *buf, uint64_t start, uint64_t end) {
  static const char pre[] = "/proc/self/map_files/";
  memcpy(buf, pre, sizeof pre - 1);
  size_t at = sizeof pre - 1;
  char t[24];
  size_t n = prof_fmt_hex(t, start);
  memcpy(buf + at, t + 2, n - 2);
  at += n - 2;
  buf[at++] = '-';
  n = prof_fmt_hex(t, end);
  memcpy(buf + at, t + 2, n - 2);
  at += n - 2;
  buf[at] = '\0';
}

static bool ph_in(const ph_elf_t *e, uint64_t off, uint64_t len) {
  return off <= e->size && len <= e->size - off;
}

/* All of [off, off + len) of the file into buf. */
static bool ph_pread(const ph_elf_t *e, uint64_t off, uint64_t len, void *buf) {
  if (!ph_in(e, off, len)) return false;
  char *p = buf;
  while (len > 0) {
    ssize_t r = pread(e->fd, p, len, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    off += (uint64_t)r;
    len -= (uint64_t)r;
  }
  return true;
}

static void ph_elf_close(ph_elf_t *e) {
  if (e->fd >= 0) close(e->fd);
  ph_mem_free(e->ph, (size_t)e->nph * sizeof *e->ph);
  ph_mem_free(e->syms, e->nsyms * sizeof *e->syms);
  ph_mem_free(e->strtab, e->strsz);
  memset(e, 0, sizeof *e);
  e->fd = -1;
}

/* Takes the open file fd: reads and checks the ELF and program headers. */
static bool ph_elf_open_fd(int fd, ph_elf_t *e) {
  memset(e, 0, sizeof *e);
  e->fd = fd;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) goto bad;
  e->size = (uint64_t)st.st_size;
  if (!ph_pread(e, 0, sizeof e->eh, &e->eh)) goto bad;
  const Elf64_Ehdr *h = &e->eh;
  if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0 ||
      h->e_ident[EI_CLASS] != ELFCLASS64 ||
      h->e_ident[EI_DATA] != ELFDATA2LSB ||
      h->e_phentsize != sizeof(Elf64_Phdr) || h->e_phnum == 0)
    goto bad;
  e->ph = ph_mem((size_t)h->e_phnum * sizeof *e->ph);
  if (e->ph == NULL) goto bad;
  e->nph = h->e_phnum;
  if (!ph_pread(e, h->e_phoff, (uint64_t)e->nph * sizeof *e->ph, e->ph))
    goto bad;
  return true;
bad:
  ph_elf_close(e);
  return false;
}

/* The file mapped at [start, end), by map_files or by path. */
static bool ph_elf_open(uint64_t start, uint64_t end, const char *path,
                        ph_elf_t *e) {
  char mf[64];
  ph_map_files_name(mf, start, end);
  int fd = open(mf, O_RDONLY | O_CLOEXEC);
  if (fd < 0 && path[0] == '/') fd = open(path, O_RDONLY | O_CLOEXEC);
  return ph_elf_open_fd(fd, e);
}

/* ---- the symbol index --------------------------------------------------- */

static bool ph_fsym_less(const ph_fsym_t *a, const ph_fsym_t *b) {
  return a->value < b->value || (a->value == b->value && a->size > b->size);
}

static void ph_fsym_sift(ph_fsym_t *v, size_t i, size_t n) {
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && ph_fsym_less(&v[c], &v[c + 1])) c++;
    if (!ph_fsym_less(&v[i], &v[c])) return;
    ph_fsym_t t = v[i];
    v[i] = v[c];
    v[c] = t;
    i = c;
  }
}

/* Heapsort: in place, no allocation (qsort may malloc). */
static void ph_fsym_sort(ph_fsym_t *v, size_t n) {
  if (n < 2) return;
  for (size_t i = n / 2; i-- > 0;) ph_fsym_sift(v, i, n);
  for (size_t end = n - 1; end > 0; end--) {
    ph_fsym_t t = v[0];
    v[0] = v[end];
    v[end] = t;
    ph_fsym_sift(v, 0, end);
  }
}

static bool ph_is_func(const Elf64_Sym *s, uint64_t strsz) {
  unsigned t = ELF64_ST_TYPE(s->st_info);
  return (t == STT_FUNC || t == STT_GNU_IFUNC) && s->st_shndx != SHN_UNDEF &&
         s->st_value != 0 && s->st_size != 0 && s->st_name < strsz;
}

/* Fills e->syms from the symbol table `tab` (read whole, then dropped). */
static bool ph_elf_read_syms(ph_elf_t *e, const Elf64_Shdr *tab) {
  size_t bytes = (size_t)tab->sh_size;
  Elf64_Sym *sym = ph_mem(bytes);
  if (sym == NULL) return false;
  bool ok = ph_pread(e, tab->sh_offset, tab->sh_size, sym);
  size_t n = bytes / sizeof *sym, k = 0;
  for (size_t i = 0; ok && i < n; i++) k += ph_is_func(&sym[i], e->strsz);
  ok = ok && k > 0 && (e->syms = ph_mem(k * sizeof *e->syms)) != NULL;
  for (size_t i = 0; ok && i < n && e->nsyms < k; i++) {
    if (!ph_is_func(&sym[i], e->strsz)) continue;
    ph_fsym_t *f = &e->syms[e->nsyms++];
    f->value = sym[i].st_value;
    f->size = sym[i].st_size > UINT32_MAX ? UINT32_MAX : (uint32_t)sym[i].st_size;
    f->name = sym[i].st_name;
    unsigned b = ELF64_ST_BIND(sym[i].st_info);
    f->rank = b == STB_GLOBAL ? 0 : b == STB_WEAK ? 1 : 2;
  }
  ph_mem_free(sym, bytes);
  if (ok) ph_fsym_sort(e->syms, e->nsyms);
  return ok;
}

/* Indexes the function symbols of the file's symbol table of `type`
 * (SHT_SYMTAB or SHT_DYNSYM). False if it has none. */
static bool ph_elf_index(ph_elf_t *e, uint32_t type) {
  const Elf64_Ehdr *h = &e->eh;
  if (h->e_shentsize != sizeof(Elf64_Shdr) || h->e_shnum == 0) return false;
  size_t shbytes = (size_t)h->e_shnum * sizeof(Elf64_Shdr);
  Elf64_Shdr *sh = ph_mem(shbytes);
  if (sh == NULL) return false;
  bool ok = ph_pread(e, h->e_shoff, shbytes, sh);
  const Elf64_Shdr *tab = NULL;
  for (unsigned i = 0; ok && i < h->e_shnum && tab == NULL; i++)
    if (sh[i].sh_type == type) tab = &sh[i];
  ok = ok && tab != NULL && tab->sh_entsize == sizeof(Elf64_Sym) &&
       tab->sh_size <= PH_TAB_MAX && tab->sh_link < h->e_shnum &&
       ph_in(e, tab->sh_offset, tab->sh_size);
  const Elf64_Shdr *str = ok ? &sh[tab->sh_link] : NULL;
  ok = ok && str->sh_type == SHT_STRTAB && str->sh_size > 0 &&
       str->sh_size <= PH_TAB_MAX;
  if (ok) {
    e->strsz = (size_t)str->sh_size;
    e->strtab = ph_mem(e->strsz);
    /* The string table must end in a NUL for names to be C strings. */
    ok = e->strtab != NULL && ph_pread(e, str->sh_offset, str->sh_size, e->strtab) &&
         e->strtab[e->strsz - 1] == '\0' && ph_elf_read_syms(e, tab);
  }
  ph_mem_free(sh, shbytes);
  if (!ok) { /* leave no half-built index behind */
    ph_mem_free(e->syms, e->nsyms * sizeof *e->syms);
    ph_mem_free(e->strtab, e->strsz);
    e->syms = NULL;
    e->nsyms = 0;
    e->strtab = NULL;
    e->strsz = 0;
  }
  return ok;
}

/* File offset -> link-time address, through the PT_LOAD holding it. */
static bool ph_elf_vaddr(const ph_elf_t *e, uint64_t off, uint64_t *va) {
  for (unsigned i = 0; i < e->nph; i++) {
    const Elf64_Phdr *p = &e->ph[i];
    if (p->p_type == PT_LOAD && off >= p->p_offset &&
        off - p->p_offset < p->p_filesz) {
      *va = off - p->p_offset + p->p_vaddr;
      return true;
    }
  }
  return false;
}

/* The name of the function holding va, without a symbol version
 * ("_IO_file_underflow@@GLIBC_2.2.5" is _IO_file_underflow): its
 * length in *len. */
static const char *ph_elf_name(const ph_elf_t *e, uint64_t va, size_t *len) {
  size_t lo = 0, hi = e->nsyms; /* first symbol above va */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (e->syms[mid].value <= va) lo = mid + 1;
    else hi = mid;
  }
  /* The nearest few below: a symbol nested in a bigger one comes last.
   * Of aliases (same address, all holding va), the global one. */
  const ph_fsym_t *best = NULL;
  for (size_t i = lo, k = 0; i-- > 0 && k < 16; k++) {
    const ph_fsym_t *f = &e->syms[i];
    if (best != NULL && f->value != best->value) break;
    if (va - f->value < f->size && (best == NULL || f->rank < best->rank))
      best = f;
  }
  if (best == NULL) return NULL;
  const char *n = e->strtab + best->name;
  const char *at = strchr(n, '@');
  *len = at ? (size_t)(at - n) : strlen(n);
  return *len ? n : NULL;
}

/* ---- build ids ---------------------------------------------------------- */

/* Looks for NT_GNU_BUILD_ID in the notes n[0, len). */
static bool ph_note_build_id(const unsigned char *p, size_t len, char *out,
                             size_t cap) {
  const unsigned char *end = p + len;
  while ((size_t)(end - p) >= sizeof(Elf64_Nhdr)) {
    Elf64_Nhdr nh;
    memcpy(&nh, p, sizeof nh);
    p += sizeof nh;
    uint64_t nsz = ((uint64_t)nh.n_namesz + 3) & ~(uint64_t)3;
    uint64_t dsz = ((uint64_t)nh.n_descsz + 3) & ~(uint64_t)3;
    if (nsz > (uint64_t)(end - p) || dsz > (uint64_t)(end - p) - nsz) return false;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
        memcmp(p, "GNU", 4) == 0 && nh.n_descsz > 0 &&
        (size_t)nh.n_descsz * 2 < cap) {
      const unsigned char *d = p + nsz;
      for (size_t i = 0; i < nh.n_descsz; i++) {
        out[2 * i] = "0123456789abcdef"[d[i] >> 4];
        out[2 * i + 1] = "0123456789abcdef"[d[i] & 15];
      }
      out[2 * nh.n_descsz] = '\0';
      return true;
    }
    p += nsz + dsz;
  }
  return false;
}

static bool ph_elf_build_id_of(const ph_elf_t *e, char *out, size_t cap) {
  for (unsigned i = 0; i < e->nph; i++) {
    const Elf64_Phdr *p = &e->ph[i];
    if (p->p_type != PT_NOTE || p->p_filesz == 0 || p->p_filesz > PH_NOTE_MAX)
      continue;
    unsigned char *buf = ph_mem((size_t)p->p_filesz);
    bool ok = buf != NULL && ph_pread(e, p->p_offset, p->p_filesz, buf) &&
              ph_note_build_id(buf, (size_t)p->p_filesz, out, cap);
    ph_mem_free(buf, (size_t)p->p_filesz);
    if (ok) return true;
  }
  return false;
}

bool ph_elf_build_id(uint64_t start, uint64_t end, const char *path,
                     char *out, size_t cap) {
  ph_elf_t e;
  if (!ph_elf_open(start, end, path, &e)) return false;
  bool ok = ph_elf_build_id_of(&e, out, cap);
  ph_elf_close(&e);
  return ok;
}

/* /usr/lib/debug/.build-id/ab/cdef....debug for build id abcdef... */
static bool ph_debug_file(const ph_elf_t *e, ph_elf_t *dbg) {
  static const char dir[] = "/usr/lib/debug/.build-id/";
  char id[130], path[sizeof dir + 140];
  if (!ph_elf_build_id_of(e, id, sizeof id) || strlen(id) < 4) return false;
  size_t n = strlen(id), at = sizeof dir - 1;
  memcpy(path, dir, at);
  path[at++] = id[0];
  path[at++] = id[1];
  path[at++] = '/';
  memcpy(path + at, id + 2, n - 2);
  at += n - 2;
  memcpy(path + at, ".debug", 7);
  return ph_elf_open_fd(open(path, O_RDONLY | O_CLOEXEC), dbg);
}

/* Symbols for a mapping: its own .symtab, its debug file's, or .dynsym.
 * The files are closed once indexed. */
static bool ph_xmap_index(ph_xmap_t *m) {
  bool ok = ph_elf_index(&m->elf, SHT_SYMTAB);
  if (!ok && ph_debug_file(&m->elf, &m->dbg)) {
    ok = ph_elf_index(&m->dbg, SHT_SYMTAB);
    if (!ok) ph_elf_close(&m->dbg);
  }
  if (!ok) ok = ph_elf_index(&m->elf, SHT_DYNSYM);
  if (m->elf.fd >= 0) close(m->elf.fd);
  if (m->dbg.fd >= 0) close(m->dbg.fd);
  m->elf.fd = m->dbg.fd = -1;
  return ok;
}

/* ---- the process's mappings --------------------------------------------- */

static bool ph_read_maps(ph_buf_t *b) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  for (;;) {
    if (!ph_buf_reserve(b, 16384)) break;
    ssize_t r = read(fd, b->p + b->len, b->cap - b->len - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    b->len += (size_t)r;
  }
  close(fd);
  if (b->err) return false;
  b->p[b->len] = '\0';
  return true;
}

static bool ph_hex_field(char **s, char stop, uint64_t *v) {
  char *p = *s;
  uint64_t x = 0;
  int n = 0;
  for (;; p++, n++) {
    char c = *p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) break;
    x = x << 4 | (uint64_t)d;
  }
  if (n == 0 || n > 16 || *p != stop) return false;
  *s = p + 1;
  *v = x;
  return true;
}

/* "start-end perms offset dev inode   path": an executable mapping. */
static bool ph_maps_line(char *s, ph_xmap_t *m) {
  char *p = s;
  if (!ph_hex_field(&p, '-', &m->start) || !ph_hex_field(&p, ' ', &m->end))
    return false;
  if (strlen(p) < 5 || p[2] != 'x' || p[4] != ' ') return false;
  p += 5;
  if (!ph_hex_field(&p, ' ', &m->off)) return false;
  for (int f = 0; f < 2; f++) { /* dev, inode */
    while (*p && *p != ' ') p++;
    while (*p == ' ') p++;
  }
  m->path = p;
  m->state = 0;
  return m->start < m->end;
}

ph_syms_t *ph_syms_new(void) {
  ph_syms_t *s = ph_mem(sizeof *s);
  if (s == NULL) return NULL;
  if (!ph_read_maps(&s->maps)) {
    ph_syms_free(s);
    return NULL;
  }
  size_t lines = 1;
  for (size_t i = 0; i < s->maps.len; i++) lines += s->maps.p[i] == '\n';
  s->capx = lines;
  s->x = ph_mem(lines * sizeof *s->x);
  if (s->x == NULL) {
    ph_syms_free(s);
    return NULL;
  }
  char *line = s->maps.p;
  while (*line) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    if (s->nx < s->capx && ph_maps_line(line, &s->x[s->nx])) s->nx++;
    if (!nl) break;
    line = nl + 1;
  }
  return s;
}

const char *ph_syms_lookup(ph_syms_t *s, uint64_t addr, size_t *len) {
  size_t lo = 0, hi = s->nx; /* maps are sorted by address */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->x[mid].end <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == s->nx || addr < s->x[lo].start) return NULL;
  ph_xmap_t *m = &s->x[lo];
  if (m->state == 0) {
    m->state = -1;
    m->dbg.fd = -1;
    if (ph_elf_open(m->start, m->end, m->path, &m->elf)) {
      if (ph_xmap_index(m)) m->state = 1;
      else ph_elf_close(&m->elf);
    }
  }
  uint64_t va;
  if (m->state != 1 || !ph_elf_vaddr(&m->elf, addr - m->start + m->off, &va))
    return NULL;
  return ph_elf_name(m->dbg.syms ? &m->dbg : &m->elf, va, len);
}

void ph_syms_free(ph_syms_t *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->nx; i++) {
    if (s->x[i].state != 1) continue;
    ph_elf_close(&s->x[i].elf);
    ph_elf_close(&s->x[i].dbg);
  }
  ph_mem_free(s->x, s->capx * sizeof *s->x);
  ph_buf_free(&s->maps);
  ph_mem_free(s, sizeof *s);
}
