/* prof_cfi.c -- unwind rules per return address, read from .eh_frame and
 * cached, so that a DWARF-correct backtrace costs about as much as a
 * frame-pointer walk (prof_unwind:dwarf).
 *
 * Why: unw_backtrace costs ~150 ns a stack here, which is most of the cost
 * of an exact profile. But a program's allocations come from a few
 * thousand call sites, and what it takes to step out of a frame depends
 * only on the return address: "the caller's frame starts at rsp+40" or
 * "at rbp+16", "rbp was saved at CFA-16". So the rule for each return
 * address is worked out once from the DWARF call-frame information (CIE
 * and FDE, found through PT_GNU_EH_FRAME's sorted table), packed into 64
 * bits, and kept in a global hash that readers use without a lock.
 *
 * Only rules a walker can apply with two loads are cached (CFA = rsp or
 * rbp + offset, or *(rbp + offset) as gcc writes for frames that realign
 * the stack; return address and rbp saved at CFA-relative slots, or rbp
 * unchanged). Anything else -- a signal frame, a DWARF expression, code
 * without unwind info -- is cached as CFI_OTHER, and prof_bt.c then
 * takes the whole stack from libunwind, so backtraces stay the same as
 * libunwind's.
 *
 * Limit: a rule stays cached after its code is dlclose'd; a library
 * mapped later at the same address could get a wrong frame (never a bad
 * read: the walker checks every address against the thread's stack). */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <link.h>
#include <sched.h>

#include "prof_internal.h"

#include <string.h>

/* ---- the cache ---------------------------------------------------------- */

_Atomic(prof_cfi_tab_t *) prof_cfi_tab;
static nlock_t cfi_lock = NLOCK_INITIALIZER(LOCK_PROF_UNWIND); /* inserts and growth */

static uint64_t cfi_compute(uintptr_t pc);

/* The first table has 128 slots (2 KiB, from the base allocator's chunk:
 * one page, where 4 KiB and its header would straddle two): a small
 * program walks through a few dozen return addresses, and a first table
 * of 4096 (64 KiB, mapped on its own) had five of its pages touched for a
 * one-stack program's five. Past it the table goes straight to 4096 and
 * doubles from there: the old tables stay allocated (readers may hold
 * them), so growing by doubling from 128 would leave 62 KiB more behind in
 * a program that outgrows 4096 than before; this way 2 KiB. */
#define CFI_CAP0 128
#define CFI_CAP1 4096
static size_t cfi_grown(size_t cap) {
  return cap < CFI_CAP1 ? CFI_CAP1 : cap * 2;
}

static prof_cfi_tab_t *tab_new(size_t cap) {
  prof_cfi_tab_t *t = base_alloc(sizeof *t + cap * sizeof(prof_cfi_slot_t));
  if (t != NULL) t->mask = cap - 1;
  return t;
}

static void tab_put(prof_cfi_tab_t *t, uintptr_t pc, uint64_t rule) {
  size_t i = prof_cfi_hash(pc) & t->mask;
  while (atomic_load_explicit(&t->slot[i].key, memory_order_relaxed) != 0)
    i = (i + 1) & t->mask;
  atomic_store_explicit(&t->slot[i].rule, rule, memory_order_relaxed);
  atomic_store_explicit(&t->slot[i].key, pc, memory_order_release);
  t->n++;
}

/* The miss path: computes the rule outside the lock (dl_iterate_phdr takes
 * the loader's lock; two threads may compute the same rule), then inserts.
 * A table that passes half full is replaced by one twice the size; the old
 * one is left in place for readers that still hold it (the tables form a
 * geometric series, so this at most doubles the memory). */
NALLOC_NOINLINE uint64_t prof_cfi_miss(uintptr_t pc) {
  uint64_t rule = cfi_compute(pc);
  nlock_lock(&cfi_lock);
  prof_cfi_tab_t *t = atomic_load_explicit(&prof_cfi_tab, memory_order_relaxed);
  if (t == NULL || (t->n + 1) * 2 > t->mask + 1) {
    prof_cfi_tab_t *nt = tab_new(t == NULL ? CFI_CAP0 : cfi_grown(t->mask + 1));
    if (nt == NULL) {
      nlock_unlock(&cfi_lock);
      return rule; /* no memory: answer without caching */
    }
    for (size_t i = 0; t != NULL && i <= t->mask; i++) {
      uintptr_t k = atomic_load_explicit(&t->slot[i].key, memory_order_relaxed);
      if (k != 0)
        tab_put(nt, k, atomic_load_explicit(&t->slot[i].rule, memory_order_relaxed));
    }
    atomic_store_explicit(&prof_cfi_tab, nt, memory_order_release);
    t = nt;
  }
  size_t i = prof_cfi_hash(pc) & t->mask;
  for (;; i = (i + 1) & t->mask) {
    uintptr_t k = atomic_load_explicit(&t->slot[i].key, memory_order_relaxed);
    if (k == pc) break; /* another thread got here first */
    if (k == 0) {
      tab_put(t, pc, rule);
      break;
    }
  }
  nlock_unlock(&cfi_lock);
  return rule;
}

/* The profiler's calls into the loader (dl_iterate_phdr, here and inside
 * libunwind) are counted, and fork's prepare handler waits until none is
 * in progress. glibc does not reset the loader's lock in a fork child, so a
 * fork while another thread was inside dl_iterate_phdr for us would leave
 * the child's first walk waiting on it forever.
 *
 * One counter per thread (hashed into cache-line slots): libunwind mode
 * enters here on every sampled allocation, and a shared lock word would
 * bounce between cores (a pthread_rwlock took exact libunwind profiling
 * from ~91 to ~170 ns a pair on listbench). While a fork waits, new
 * entries wait for it. The wait is bounded: a thread holding the loader's lock itself (in a
 * dl_iterate_phdr callback of the program's) may be allocating, and it
 * must not wait for a fork that waits for a thread that waits for it. */
#define LOADER_SLOTS 64
#define LOADER_FORK_WAIT_NS 100000000ull /* then fork anyway, as before */
NALLOC_BIG_BSS static struct {
  _Alignas(CACHELINE) _Atomic unsigned n;
} loader_in[LOADER_SLOTS];
static _Atomic bool loader_forking;

static _Atomic unsigned *loader_slot(void) {
  uint64_t h = (uint64_t)(uintptr_t)tsd_get() * 0x9e3779b97f4a7c15ull;
  return &loader_in[h >> 58].n; /* top 6 bits: LOADER_SLOTS */
}

void prof_loader_enter(void) {
  _Atomic unsigned *c = loader_slot();
  for (;;) {
    atomic_fetch_add(c, 1); /* seq_cst: ordered before the flag's load */
    if (likely(!atomic_load(&loader_forking))) return;
    atomic_fetch_sub(c, 1);
    while (atomic_load_explicit(&loader_forking, memory_order_acquire))
      sched_yield();
  }
}

void prof_loader_exit(void) {
  atomic_fetch_sub_explicit(loader_slot(), 1, memory_order_release);
}

static void loader_quiesce(void) {
  atomic_store(&loader_forking, true); /* seq_cst: before the counts' loads */
  uint64_t t0 = nalloc_now_ns();
  for (unsigned i = 0; i < LOADER_SLOTS; i++)
    while (atomic_load(&loader_in[i].n) != 0) {
      if (nalloc_now_ns() - t0 > LOADER_FORK_WAIT_NS) return;
      sched_yield();
    }
}

void prof_cfi_prefork(void) {
  loader_quiesce();
  nlock_prefork(&cfi_lock);
}
void prof_cfi_postfork_parent(void) {
  nlock_postfork_parent(&cfi_lock);
  atomic_store(&loader_forking, false);
}
bool prof_cfi_postfork_child(void) {
  bool broken = nlock_postfork_child(&cfi_lock);
  for (unsigned i = 0; i < LOADER_SLOTS; i++) /* only this thread is left */
    atomic_store_explicit(&loader_in[i].n, 0, memory_order_relaxed);
  atomic_store(&loader_forking, false);
  return broken;
}

/* ---- reading DWARF call-frame information --------------------------------
 * Everything read here is the loaded image of an ELF object (read-only
 * segments), bounded by the lengths in the CIE/FDE headers. */

enum { R_RBP = 6, R_RSP = 7, R_RA = 16 };
enum { RULE_SAME, RULE_OFFSET, RULE_UNDEF, RULE_OTHER };

typedef struct {
  const uint8_t *p, *end;
  bool bad;
} rd_t;

static uint8_t rd_u8(rd_t *r) {
  if (r->p >= r->end) {
    r->bad = true;
    return 0;
  }
  return *r->p++;
}

static uint64_t rd_uleb(rd_t *r) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    uint8_t b = rd_u8(r);
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  r->bad = true;
  return v;
}

static int64_t rd_sleb(rd_t *r) {
  uint64_t v = 0;
  unsigned shift = 0;
  uint8_t b;
  do {
    b = rd_u8(r);
    if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
    shift += 7;
  } while ((b & 0x80) && !r->bad);
  if (shift < 64 && (b & 0x40)) v |= ~(uint64_t)0 << shift;
  return (int64_t)v;
}

static uint64_t rd_fixed(rd_t *r, unsigned n) {
  if ((size_t)(r->end - r->p) < n) {
    r->bad = true;
    return 0;
  }
  uint64_t v = 0;
  memcpy(&v, r->p, n); /* x86-64: little-endian */
  r->p += n;
  return v;
}

/* A pointer in DW_EH_PE encoding `enc`. `data` is the base for datarel. */
static uintptr_t rd_enc(rd_t *r, uint8_t enc, uintptr_t data) {
  if (enc == 0xff) return 0; /* DW_EH_PE_omit */
  uintptr_t at = (uintptr_t)r->p;
  uint64_t v;
  switch (enc & 0x0f) {
  case 0x00: v = rd_fixed(r, 8); break;
  case 0x01: v = rd_uleb(r); break;
  case 0x02: v = rd_fixed(r, 2); break;
  case 0x03: v = rd_fixed(r, 4); break;
  case 0x04: v = rd_fixed(r, 8); break;
  case 0x09: v = (uint64_t)rd_sleb(r); break;
  case 0x0a: v = (uint64_t)(int64_t)(int16_t)rd_fixed(r, 2); break;
  case 0x0b: v = (uint64_t)(int64_t)(int32_t)rd_fixed(r, 4); break;
  case 0x0c: v = rd_fixed(r, 8); break;
  default: r->bad = true; return 0;
  }
  switch (enc & 0x70) {
  case 0x00: break;
  case 0x10: v += at; break;   /* pcrel */
  case 0x30: v += data; break; /* datarel */
  default: r->bad = true; return 0;
  }
  if (enc & 0x80) r->bad = true; /* indirect: not used for FDE addresses */
  return (uintptr_t)v;
}

/* Finds the FDE covering pc through the object's .eh_frame_hdr table. */
typedef struct {
  uintptr_t pc;
  const uint8_t *fde;
} find_arg_t;

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find_arg_t *f = arg;
  const ElfW(Phdr) *hdr_ph = NULL;
  bool in = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD) {
      uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
      if (f->pc >= lo && f->pc < lo + ph->p_memsz) in = true;
    } else if (ph->p_type == PT_GNU_EH_FRAME) {
      hdr_ph = ph;
    }
  }
  if (!in) return 0;
  if (hdr_ph == NULL) return 1; /* ours, but no unwind table */
  const uint8_t *hdr = (const uint8_t *)(info->dlpi_addr + hdr_ph->p_vaddr);
  rd_t r = {hdr, hdr + hdr_ph->p_memsz, false};
  uint8_t version = rd_u8(&r), ptr_enc = rd_u8(&r), cnt_enc = rd_u8(&r),
          tab_enc = rd_u8(&r);
  (void)rd_enc(&r, ptr_enc, (uintptr_t)hdr);
  uint64_t count = rd_enc(&r, cnt_enc, (uintptr_t)hdr);
  /* binutils, gold, lld and mold all write datarel sdata4 pairs */
  if (r.bad || version != 1 || tab_enc != 0x3b) return 1;
  const int32_t *tab = (const int32_t *)r.p;
  if ((size_t)(r.end - r.p) / 8 < count) return 1;
  size_t lo = 0, hi = count;
  while (lo < hi) { /* first entry with start > pc */
    size_t mid = (lo + hi) / 2;
    if ((uintptr_t)hdr + (intptr_t)tab[2 * mid] <= f->pc) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0) f->fde = hdr + (intptr_t)tab[2 * (lo - 1) + 1];
  return 1;
}

typedef struct {
  uint8_t cfa_reg; /* R_RSP, R_RBP, or 0xff: CFA = *(rbp + cfa_off) */
  int64_t cfa_off;
  uint8_t rbp, ra;        /* RULE_* */
  int64_t rbp_off, ra_off; /* for RULE_OFFSET: CFA + off */
} cfi_state_t;

typedef struct {
  uint64_t code_align;
  int64_t data_align;
  uint64_t ra_reg;
  uint8_t fde_enc;
  bool zaug, signal;
  rd_t insns;
} cie_t;

static bool cie_parse(const uint8_t *p, cie_t *c) {
  rd_t r = {p, p + 12, false};
  uint64_t len = rd_fixed(&r, 4);
  if (len == 0xffffffffu) len = rd_fixed(&r, 8);
  r.end = r.p + len;
  if (r.bad || rd_fixed(&r, 4) != 0) return false; /* CIE id */
  uint8_t version = rd_u8(&r);
  const char *aug = (const char *)r.p;
  size_t alen = 0;
  while (r.p + alen < r.end && aug[alen] != '\0') alen++;
  r.p += alen + 1;
  if (r.p > r.end || version < 1 || version > 4) return false;
  if (version == 4) r.p += 2; /* address and segment sizes */
  c->code_align = rd_uleb(&r);
  c->data_align = rd_sleb(&r);
  c->ra_reg = version == 1 ? rd_u8(&r) : rd_uleb(&r);
  c->fde_enc = 0;
  c->zaug = aug[0] == 'z';
  c->signal = false;
  if (c->zaug) {
    uint64_t n = rd_uleb(&r);
    if (n > (uint64_t)(r.end - r.p)) return false;
    const uint8_t *after = r.p + n;
    for (size_t i = 1; i < alen && !r.bad; i++) {
      switch (aug[i]) {
      case 'R': c->fde_enc = rd_u8(&r); break;
      case 'L': (void)rd_u8(&r); break;
      case 'P': (void)rd_enc(&r, rd_u8(&r) & 0x7f, 0); break;
      case 'S': c->signal = true; break;
      default: i = alen; break; /* unknown: the length lets us skip */
      }
    }
    r.p = after;
  } else if (alen != 0) {
    return false; /* old "eh" augmentations */
  }
  c->insns = r;
  return !r.bad;
}

/* Runs CFA instructions until the location passes `target`. */
#define CFI_STACK 8
static bool cfi_run(rd_t *r, const cie_t *c, uintptr_t loc, uintptr_t target,
                    cfi_state_t *st, const cfi_state_t *initial) {
  cfi_state_t saved[CFI_STACK];
  unsigned nsaved = 0;
  while (r->p < r->end && !r->bad) {
    uint8_t op = rd_u8(r), low = op & 0x3f;
    uint64_t reg = 0, adv = 0;
    int64_t off = 0;
    switch (op >> 6) {
    case 1: /* advance_loc */
      adv = low;
      goto advance;
    case 2: /* offset */
      reg = low;
      off = (int64_t)rd_uleb(r) * c->data_align;
      goto set_offset;
    case 3: /* restore */
      reg = low;
      goto restore;
    }
    switch (op) {
    case 0x00: break; /* nop */
    case 0x01: /* set_loc */
      loc = rd_enc(r, c->fde_enc, 0);
      if (loc > target) return !r->bad;
      break;
    case 0x02: adv = rd_u8(r); goto advance;
    case 0x03: adv = rd_fixed(r, 2); goto advance;
    case 0x04: adv = rd_fixed(r, 4); goto advance;
    case 0x05: /* offset_extended */
      reg = rd_uleb(r);
      off = (int64_t)rd_uleb(r) * c->data_align;
      goto set_offset;
    case 0x11: /* offset_extended_sf */
      reg = rd_uleb(r);
      off = rd_sleb(r) * c->data_align;
      goto set_offset;
    case 0x2f: /* GNU_negative_offset_extended */
      reg = rd_uleb(r);
      off = -(int64_t)rd_uleb(r) * c->data_align;
      goto set_offset;
    case 0x06: reg = rd_uleb(r); goto restore;
    case 0x07: /* undefined */
    case 0x08: /* same_value */
    case 0x09: /* register */
      reg = rd_uleb(r);
      if (op == 0x09) (void)rd_uleb(r);
      if (reg == R_RBP) st->rbp = op == 0x08 ? RULE_SAME : RULE_OTHER;
      if (reg == c->ra_reg) st->ra = op == 0x07 ? RULE_UNDEF : RULE_OTHER;
      break;
    case 0x0a: /* remember_state */
      if (nsaved == CFI_STACK) return false;
      saved[nsaved++] = *st;
      break;
    case 0x0b: /* restore_state: the whole row, CFA rule included */
      if (nsaved == 0) return false;
      *st = saved[--nsaved];
      break;
    case 0x0c: /* def_cfa */
      st->cfa_reg = (uint8_t)rd_uleb(r);
      st->cfa_off = (int64_t)rd_uleb(r);
      break;
    case 0x12: /* def_cfa_sf */
      st->cfa_reg = (uint8_t)rd_uleb(r);
      st->cfa_off = rd_sleb(r) * c->data_align;
      break;
    case 0x0d: st->cfa_reg = (uint8_t)rd_uleb(r); break;
    case 0x0e: st->cfa_off = (int64_t)rd_uleb(r); break;
    case 0x13: st->cfa_off = rd_sleb(r) * c->data_align; break;
    case 0x0f: { /* def_cfa_expression: only gcc's realigned-frame form */
      uint64_t n = rd_uleb(r);
      const uint8_t *e = r->p;
      if (n > (uint64_t)(r->end - r->p)) return false;
      r->p += n;
      rd_t x = {e, e + n, false};
      if (n >= 2 && rd_u8(&x) == 0x76 /* DW_OP_breg6 */) {
        int64_t o = rd_sleb(&x);
        if (rd_u8(&x) == 0x06 /* DW_OP_deref */ && x.p == x.end && !x.bad) {
          st->cfa_reg = 0xff;
          st->cfa_off = o;
          break;
        }
      }
      st->cfa_reg = 0xfe; /* anything else */
      break;
    }
    case 0x10: /* expression */
    case 0x16: /* val_expression */
      reg = rd_uleb(r);
      adv = rd_uleb(r);
      if (adv > (uint64_t)(r->end - r->p)) return false;
      r->p += adv;
      if (reg == R_RBP) st->rbp = RULE_OTHER;
      if (reg == c->ra_reg) st->ra = RULE_OTHER;
      break;
    case 0x14: /* val_offset */
    case 0x15: /* val_offset_sf */
      reg = rd_uleb(r);
      if (op == 0x14) (void)rd_uleb(r);
      else (void)rd_sleb(r);
      if (reg == R_RBP) st->rbp = RULE_OTHER;
      if (reg == c->ra_reg) st->ra = RULE_OTHER;
      break;
    case 0x2e: (void)rd_uleb(r); break; /* GNU_args_size */
    default: return false;
    }
    continue;
  advance:
    loc += adv * c->code_align;
    if (loc > target) return !r->bad;
    continue;
  set_offset:
    if (reg == R_RBP) st->rbp = RULE_OFFSET, st->rbp_off = off;
    if (reg == c->ra_reg) st->ra = RULE_OFFSET, st->ra_off = off;
    continue;
  restore:
    if (initial == NULL) return false; /* restore inside a CIE */
    if (reg == R_RBP) st->rbp = initial->rbp, st->rbp_off = initial->rbp_off;
    if (reg == c->ra_reg) st->ra = initial->ra, st->ra_off = initial->ra_off;
    continue;
  }
  return !r->bad;
}

/* Packs a state into a cached rule; CFI_OTHER when it does not fit. */
static uint64_t cfi_pack(const cfi_state_t *st) {
  if (st->ra == RULE_UNDEF) return CFI_END;
  if (st->ra != RULE_OFFSET || (st->rbp != RULE_SAME && st->rbp != RULE_OFFSET))
    return CFI_OTHER;
  unsigned kind;
  if (st->cfa_reg == R_RSP) kind = CFI_RSP;
  else if (st->cfa_reg == R_RBP) kind = CFI_RBP;
  else if (st->cfa_reg == 0xff) kind = CFI_DEREF;
  else return CFI_OTHER;
  /* The walker relies on these two shapes (x86-64 code has no others):
   * the return address just below the CFA, rbp saved below it. */
  int64_t bp = st->rbp == RULE_OFFSET ? st->rbp_off : -16;
  if (st->ra_off != -8 || st->cfa_off < INT32_MIN || st->cfa_off > INT32_MAX ||
      (bp & 7) || bp < -1024 || bp > -16)
    return CFI_OTHER;
  return kind | (uint64_t)(st->rbp == RULE_OFFSET) << 3 |
         (uint64_t)(uint8_t)(int8_t)(bp / 8) << 16 |
         (uint64_t)(uint32_t)(int32_t)st->cfa_off << 32;
}

/* The rule for stepping out of the frame that return address `pc` is in.
 * The call instruction is at pc-1: a call as the last instruction of a
 * function (to a noreturn function) has its return address in the next
 * function, whose rules are not the caller's. */
static uint64_t cfi_fde_rule(const uint8_t *fde, uintptr_t pc);
static uint64_t cfi_compute(uintptr_t pc) {
  find_arg_t f = {pc - 1, NULL};
  prof_loader_enter();
  dl_iterate_phdr(find_cb, &f);
  prof_loader_exit();
  if (f.fde == NULL) return CFI_OTHER;
  return cfi_fde_rule(f.fde, pc);
}

/* The rule at return address pc from the FDE at `fde` (its CIE found
 * through the FDE's CIE pointer); apart from the lookup so that
 * tests/prof/unit_cfi.c can feed it records of its own. */
static uint64_t cfi_fde_rule(const uint8_t *fde, uintptr_t pc) {
  rd_t r = {fde, fde + 12, false};
  uint64_t len = rd_fixed(&r, 4);
  if (len == 0xffffffffu) len = rd_fixed(&r, 8);
  if (r.bad || len == 0) return CFI_OTHER;
  r.end = r.p + len;
  const uint8_t *idp = r.p;
  uint32_t cie_off = (uint32_t)rd_fixed(&r, 4);
  cie_t c;
  if (r.bad || cie_off == 0 || !cie_parse(idp - cie_off, &c) || c.signal)
    return CFI_OTHER;
  uintptr_t begin = rd_enc(&r, c.fde_enc, 0);
  uintptr_t range = rd_enc(&r, c.fde_enc & 0x0f, 0);
  if (r.bad || pc - 1 < begin || pc - 1 >= begin + range) return CFI_OTHER;
  if (c.zaug) {
    uint64_t n = rd_uleb(&r);
    if (n > (uint64_t)(r.end - r.p)) return CFI_OTHER;
    r.p += n;
  }
  cfi_state_t st = {R_RSP, 8, RULE_SAME, RULE_OTHER, 0, 0};
  if (!cfi_run(&c.insns, &c, begin, (uintptr_t)-1, &st, NULL)) return CFI_OTHER;
  cfi_state_t initial = st;
  if (!cfi_run(&r, &c, begin, pc - 1, &st, &initial)) return CFI_OTHER;
  return cfi_pack(&st);
}
