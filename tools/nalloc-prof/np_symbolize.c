/* np_symbolize.c -- symbolization with elfutils libdwfl.
 *
 * A profile only has runtime addresses. For each one we
 *   1. find the executable mapping that holds it (MAPPED_LIBRARIES), giving
 *      a file and a file offset: off = addr - start + map_offset;
 *   2. turn the file offset into the ELF virtual address through the PT_LOAD
 *      program header that holds it (this is what makes PIE executables and
 *      shared libraries work regardless of where they were loaded);
 *   3. ask libdwfl, with the module reported at its link-time addresses
 *      (bias 0), for the symbol, the source line and the DWARF scopes; each
 *      DW_TAG_inlined_subroutine scope becomes one more frame.
 * libdwfl's standard callbacks find separate debug info by build-id
 * (/usr/lib/debug/.build-id/..) or .gnu_debuglink, so installed -dbg/-dbgsym
 * packages are used automatically.
 *
 * Anything that cannot be resolved (file gone, not ELF, stripped, address in
 * no mapping) becomes a placeholder frame "libfoo.so+0x1234" (the file
 * offset) or "0x7f..." -- never an error. */
#include "np_symbolize.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "np_demangle.h"
#include "np_util.h"

/* One opened file. Each gets its own Dwfl so its addresses are its own
 * link-time addresses; there is no need to rebuild the process layout. */
typedef struct np_module {
  char *path; /* after --remap/--exe substitution */
  Dwfl *dwfl;
  Dwfl_Module *mod;
  bool ok;
} np_module;

struct np_symbolizer {
  np_symopts opts;
  np_intern paths; /* path -> index into mods */
  np_module *mods;
  size_t nmods, capmods;
};

static char *np_debuginfo_path = NULL;
static const Dwfl_Callbacks np_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &np_debuginfo_path,
};

np_symbolizer *np_sym_new(const np_symopts *opts) {
  np_symbolizer *s = np_xcalloc(1, sizeof *s);
  if (opts) s->opts = *opts;
  elf_version(EV_CURRENT);
  return s;
}

void np_sym_free(np_symbolizer *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nmods; i++) {
    if (s->mods[i].dwfl) dwfl_end(s->mods[i].dwfl);
    free(s->mods[i].path);
  }
  free(s->mods);
  np_intern_free(&s->paths);
  free(s);
}

static const char *np_basename(const char *p) {
  const char *b = strrchr(p, '/');
  return b ? b + 1 : p;
}

/* The file to open for a mapped path: --exe wins for a path with the same
 * base name (so a profile from another machine or a moved binary can be
 * read, like pprof's <program> argument); then --remap prefixes. */
static char *np_effective_path(np_symbolizer *s, const char *path) {
  if (s->opts.exe && *path &&
      strcmp(np_basename(path), np_basename(s->opts.exe)) == 0)
    return np_xstrdup(s->opts.exe);
  for (size_t i = 0; i < s->opts.nremap; i++) {
    size_t k = strlen(s->opts.remap_from[i]);
    if (strncmp(path, s->opts.remap_from[i], k) == 0)
      return np_xasprintf("%s%s", s->opts.remap_to[i], path + k);
  }
  return np_xstrdup(path);
}

static np_module *np_get_module(np_symbolizer *s, const char *path) {
  uint32_t id = np_intern_str(&s->paths, path);
  if (id < s->nmods) return &s->mods[id];
  np_module *m = NP_PUSH(s->mods, s->nmods, s->capmods);
  memset(m, 0, sizeof *m);
  m->path = np_effective_path(s, path);
  struct stat st;
  /* Only regular files: "[vdso]", sockets, FIFOs or devices are not ELF
   * files we can (or should) open. */
  if (s->opts.no_symbolize || stat(m->path, &st) != 0 || !S_ISREG(st.st_mode))
    return m;
  m->dwfl = dwfl_begin(&np_callbacks);
  if (!m->dwfl) return m;
  dwfl_report_begin(m->dwfl);
  /* base 0 + add_p_vaddr: the module sits at its link-time addresses. */
  m->mod = dwfl_report_elf(m->dwfl, np_basename(m->path), m->path, -1, 0,
                           true);
  dwfl_report_end(m->dwfl, NULL, NULL);
  m->ok = m->mod != NULL;
  return m;
}

/* File offset -> link-time virtual address via the PT_LOAD headers. */
static bool np_offset_to_vaddr(Dwfl_Module *mod, uint64_t off,
                               uint64_t *vaddr) {
  GElf_Addr bias;
  Elf *elf = dwfl_module_getelf(mod, &bias);
  if (!elf) return false;
  GElf_Ehdr eh;
  if (!gelf_getehdr(elf, &eh)) return false;
  size_t nph;
  if (elf_getphdrnum(elf, &nph) != 0) return false;
  for (size_t i = 0; i < nph; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD) continue;
    if (off >= ph.p_offset && off < ph.p_offset + ph.p_filesz) {
      *vaddr = off - ph.p_offset + ph.p_vaddr + bias;
      return true;
    }
  }
  return false;
}

/* For a brief-form maps line (no file offset): the file offset of the
 * first executable PT_LOAD, where such a mapping must start. */
static uint64_t np_exec_offset(Dwfl_Module *mod) {
  GElf_Addr bias;
  Elf *elf = dwfl_module_getelf(mod, &bias);
  size_t nph;
  if (!elf || elf_getphdrnum(elf, &nph) != 0) return 0;
  for (size_t i = 0; i < nph; i++) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
        (ph.p_flags & PF_X))
      return ph.p_offset & ~(uint64_t)0xfff;
  }
  return 0;
}

static void np_push_frame(np_symres *r, size_t *cap, const char *func,
                          const char *file, int line) {
  np_symframe *f = NP_PUSH(r->frames, r->n, *cap);
  f->func = np_demangle(func);
  f->file = file ? np_xstrdup(file) : NULL;
  f->line = line;
}

/* Name of a subprogram or inlined-subroutine DIE: the linkage name (so C++
 * names come out qualified once demangled) or the plain name, following
 * DW_AT_abstract_origin / DW_AT_specification. */
static const char *np_die_name(Dwarf_Die *die) {
  Dwarf_Attribute a;
  const char *n = NULL;
  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
      dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
    n = dwarf_formstring(&a);
  if (!n && dwarf_attr_integrate(die, DW_AT_name, &a)) n = dwarf_formstring(&a);
  return n;
}

/* Fills r from DWARF: one frame per inlined scope plus the containing
 * function. Returns false if there is no usable DWARF for addr. */
static bool np_dwarf_frames(Dwfl_Module *mod, uint64_t addr, np_symres *r,
                            size_t *cap, const char *symname) {
  Dwarf_Addr bias = 0;
  Dwarf_Die *cudie = dwfl_module_addrdie(mod, addr, &bias);
  if (!cudie) return false;
  const char *file = NULL;
  int line = 0;
  Dwfl_Line *ln = dwfl_module_getsrc(mod, addr);
  if (ln) file = dwfl_lineinfo(ln, NULL, &line, NULL, NULL, NULL);
  Dwarf_Die *scopes = NULL;
  int ns = dwarf_getscopes(cudie, addr - bias, &scopes);
  Dwarf_Files *files = NULL;
  size_t nfiles = 0;
  bool have_files = dwarf_getsrcfiles(cudie, &files, &nfiles) == 0;
  bool done = false;
  for (int i = 0; i < ns && !done; i++) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
      continue;
    const char *name = np_die_name(&scopes[i]);
    if (tag == DW_TAG_subprogram) {
      /* The ELF symbol is what pprof shows for the outer function; it
       * also names static and C++ functions unambiguously. */
      if (symname) name = symname;
      done = true;
    }
    np_push_frame(r, cap, name ? name : "??", file, line);
    if (tag == DW_TAG_inlined_subroutine) {
      /* The caller's position is where this body was inlined. */
      Dwarf_Attribute a;
      Dwarf_Word w;
      file = NULL;
      line = 0;
      if (have_files && dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file,
                                                   &a), &w) == 0 &&
          w < nfiles)
        file = dwarf_filesrc(files, w, NULL, NULL);
      if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &a), &w) ==
          0)
        line = (int)w;
    }
  }
  free(scopes);
  if (!done && r->n == 0) {
    /* No scope covers the address (e.g. hand-written asm): use the symbol
     * with whatever line the line table gives. */
    if (!symname) return false;
    np_push_frame(r, cap, symname, file, line);
  } else if (!done) {
    np_push_frame(r, cap, symname ? symname : "??", file, line);
  }
  return true;
}

static void np_placeholder(np_symres *r, size_t *cap, const char *module,
                           uint64_t off, uint64_t pc) {
  char buf[64];
  char *name = *module ? np_xasprintf("%s+0x%" PRIx64, module, off) : NULL;
  if (!name) snprintf(buf, sizeof buf, "0x%" PRIx64, pc);
  np_push_frame(r, cap, name ? name : buf, NULL, 0);
  free(name);
  r->symbolized = false;
}

void np_sym_lookup(np_symbolizer *s, const np_profile *p, uint64_t pc,
                   np_symres *r) {
  memset(r, 0, sizeof *r);
  size_t cap = 0;
  r->map_index = -1;
  r->module = "";
  /* pc is a return address: pc-1 is inside the call instruction. */
  uint64_t q = pc ? pc - 1 : 0;
  const np_mapping *m = np_maps_find(p, q);
  np_module *mod = NULL;
  uint64_t off = 0, vaddr = 0;
  if (m) {
    r->map_index = (int)(m - p->maps);
    r->module = np_basename(m->path);
    off = pc - m->start + m->offset;
    if (*m->path) {
      mod = np_get_module(s, m->path);
      uint64_t base = m->offset;
      if (mod->ok && !m->has_offset) {
        base = np_exec_offset(mod->mod);
        off = pc - m->start + base;
      }
      if (!mod->ok ||
          !np_offset_to_vaddr(mod->mod, q - m->start + base, &vaddr))
        mod = NULL;
    }
  } else if (s->opts.exe) {
    /* No mapping (e.g. a non-PIE program's profile without a trailer):
     * like pprof, assume the address belongs to the main program. */
    mod = np_get_module(s, s->opts.exe);
    if (mod->ok) {
      vaddr = q;
      r->module = np_basename(s->opts.exe);
      off = pc;
    } else {
      mod = NULL;
    }
  }
  if (mod) {
    GElf_Off soff;
    GElf_Sym sym;
    const char *symname =
        dwfl_module_addrinfo(mod->mod, vaddr, &soff, &sym, NULL, NULL, NULL);
    if (np_dwarf_frames(mod->mod, vaddr, r, &cap, symname)) {
      r->symbolized = true;
      return;
    }
    if (symname) {
      np_push_frame(r, &cap, symname, NULL, 0);
      r->symbolized = true;
      return;
    }
  }
  np_placeholder(r, &cap, r->module, off, pc);
}

void np_symres_free(np_symres *r) {
  for (size_t i = 0; i < r->n; i++) {
    free(r->frames[i].func);
    free(r->frames[i].file);
  }
  free(r->frames);
  memset(r, 0, sizeof *r);
}

char *np_sym_build_id(np_symbolizer *s, const np_mapping *m) {
  if (!*m->path) return NULL;
  np_module *mod = np_get_module(s, m->path);
  if (!mod->ok) return NULL;
  const unsigned char *bits;
  GElf_Addr va;
  int n = dwfl_module_build_id(mod->mod, &bits, &va);
  if (n <= 0) return NULL;
  char *h = np_xmalloc((size_t)n * 2 + 1);
  for (int i = 0; i < n; i++) sprintf(h + 2 * i, "%02x", bits[i]);
  return h;
}

bool np_sym_has_file(np_symbolizer *s, const np_mapping *m) {
  return *m->path && np_get_module(s, m->path)->ok;
}
