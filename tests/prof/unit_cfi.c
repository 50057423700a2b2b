/* unit_cfi.c -- the DWARF call-frame parser of prof/prof_cfi.c (cie_parse,
 * cfi_run, cfi_pack, through cfi_fde_rule) fed .eh_frame records built
 * here byte by byte: a CIE and an FDE per case, and the rule asked for
 * return addresses across the FDE's range. The truth is DWARF's meaning of
 * the instructions (DWARF 5 section 6.4: a row holds from its location up
 * to the next advance) worked out by hand for each case, packed in the
 * layout prof_internal.h documents for a cached rule (kind in bits 0-2,
 * bit 3 rbp saved at CFA + 8 * (int8_t)bits 16-23, CFA offset in bits
 * 32-63; the return address at CFA-8 or the rule is CFI_OTHER). Cases: a
 * gcc prologue/epilogue (push rbp; mov rsp,rbp; ... ; pop; ret) with
 * absolute and pc-relative sdata4 FDE addresses, code_align 4 and the
 * 1/2-byte advances, remember/restore_state, DW_CFA_restore, the
 * realigned-frame CFA expression (*(rbp-8)), an undefined return address
 * (the outermost frame), and what must come out as CFI_OTHER: a signal
 * frame's CIE, a return address not at CFA-8, rbp saved too far, an
 * unknown opcode, a pc outside the FDE, a CFA on another register.
 * The source is compiled into this test (its extern names renamed, so
 * that the engine objects linked beside it keep theirs). */
#define prof_cfi_tab unit_prof_cfi_tab
#define prof_cfi_miss unit_prof_cfi_miss
#define prof_loader_enter unit_prof_loader_enter
#define prof_loader_exit unit_prof_loader_exit
#define prof_cfi_prefork unit_prof_cfi_prefork
#define prof_cfi_postfork_parent unit_prof_cfi_postfork_parent
#define prof_cfi_postfork_child unit_prof_cfi_postfork_child
#include "../../prof/prof_cfi.c"

#include <stdio.h>
#include <stdlib.h>

#include "../check_core.h"

/* A rule in prof_internal.h's layout. */
static uint64_t rule(unsigned kind, bool rbp_saved, int rbp_off, int32_t cfa_off) {
  return kind | (uint64_t)rbp_saved << 3 | (uint64_t)(uint8_t)(int8_t)(rbp_off / 8) << 16 |
         (uint64_t)(uint32_t)cfa_off << 32;
}
/* rbp unchanged: the walker's rbp slot is "not saved", field -16 / 8 */
#define SAME_RBP false, -16

/* An .eh_frame image: the CIE at 0, the FDE right after it. */
static uint8_t img[512];
static size_t fde_at;
static uintptr_t code_base; /* the FDE's pc_begin */

typedef struct {
  uint8_t b[256];
  size_t n;
} bytes_t;
static void put(bytes_t *x, const void *p, size_t n) {
  memcpy(x->b + x->n, p, n);
  x->n += n;
}
#define PUT(x, ...) put((x), (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__}))

/* Builds the image: CIE (version 1, augmentation aug, code/data align,
 * return address column 16, fde_enc, initial instructions), then an FDE
 * for [code_base, code_base + range) with its instructions. */
static void build(const char *aug, uint8_t code_align, int8_t data_align_sleb, uint8_t fde_enc,
                  const bytes_t *cie_insns, uint32_t range, const bytes_t *fde_insns) {
  memset(img, 0, sizeof img);
  bytes_t c = {{0}, 0};
  PUT(&c, 0, 0, 0, 0); /* CIE id */
  PUT(&c, 1);          /* version */
  put(&c, aug, strlen(aug) + 1);
  PUT(&c, code_align, (uint8_t)data_align_sleb & 0x7f, 16);
  if (aug[0] == 'z') {
    size_t augn = strlen(aug) - 1; /* one byte per letter after z (R, S: R's byte only) */
    (void)augn;
    PUT(&c, strchr(aug, 'R') ? 1 : 0);
    if (strchr(aug, 'R')) PUT(&c, fde_enc);
  }
  put(&c, cie_insns->b, cie_insns->n);
  while ((c.n + 4) % 8) PUT(&c, 0); /* DW_CFA_nop padding */
  uint32_t len = (uint32_t)c.n;
  memcpy(img, &len, 4);
  memcpy(img + 4, c.b, c.n);
  fde_at = 4 + c.n;
  bytes_t f = {{0}, 0};
  uint32_t cie_ptr = (uint32_t)(fde_at + 4); /* from the CIE pointer field back to the CIE */
  put(&f, &cie_ptr, 4);
  if ((fde_enc & 0x0f) == 0x0b) { /* sdata4, pcrel */
    int32_t rel = (int32_t)((intptr_t)code_base - (intptr_t)(uintptr_t)(img + fde_at + 4 + f.n));
    put(&f, &rel, 4);
    put(&f, &range, 4);
  } else { /* absptr */
    uint64_t b = code_base, r = range;
    put(&f, &b, 8);
    put(&f, &r, 8);
  }
  if (aug[0] == 'z') PUT(&f, 0); /* augmentation data length */
  put(&f, fde_insns->b, fde_insns->n);
  while ((f.n + 4) % 8) PUT(&f, 0);
  len = (uint32_t)f.n;
  memcpy(img + fde_at, &len, 4);
  memcpy(img + fde_at + 4, f.b, f.n);
  CHECKF(fde_at + 4 + f.n + 4 <= sizeof img, "image too big");
}

/* The rule for return address pc = code_base + off + 1 (the call at off). */
static uint64_t at(size_t off) { return cfi_fde_rule(img + fde_at, code_base + off + 1); }

static void expect(const char *what, size_t off, uint64_t want) {
  uint64_t got = at(off);
  CHECKF(got == want, "%s: call at +%zu: rule %#llx, want %#llx", what, off,
         (unsigned long long)got, (unsigned long long)want);
}

/* The CIE gcc writes for x86-64: CFA = rsp+8, return address at CFA-8. */
static bytes_t std_cie(void) {
  bytes_t c = {{0}, 0};
  PUT(&c, 0x0c, 7, 8); /* def_cfa rsp, 8 */
  PUT(&c, 0x90, 1);    /* offset r16 (ra), 1 * -8 */
  return c;
}

/* push rbp (1 byte); mov rsp,rbp (3); body; pop rbp at +24 (1); ret */
static bytes_t prologue(void) {
  bytes_t f = {{0}, 0};
  PUT(&f, 0x41);       /* advance_loc 1 */
  PUT(&f, 0x0e, 16);   /* def_cfa_offset 16 */
  PUT(&f, 0x86, 2);    /* offset r6 (rbp), 2 * -8 */
  PUT(&f, 0x43);       /* advance_loc 3 */
  PUT(&f, 0x0d, 6);    /* def_cfa_register rbp */
  PUT(&f, 0x54);       /* advance_loc 20 (to +24) */
  PUT(&f, 0x0c, 7, 8); /* def_cfa rsp, 8 (after pop rbp) */
  return f;
}

static void check_prologue(const char *what) {
  expect(what, 0, rule(CFI_RSP, SAME_RBP, 8));    /* before push */
  expect(what, 1, rule(CFI_RSP, true, -16, 16));  /* after push */
  expect(what, 3, rule(CFI_RSP, true, -16, 16));
  expect(what, 4, rule(CFI_RBP, true, -16, 16));  /* frame set up */
  expect(what, 23, rule(CFI_RBP, true, -16, 16));
  expect(what, 24, rule(CFI_RSP, true, -16, 8));  /* after pop */
  expect(what, 39, rule(CFI_RSP, true, -16, 8));  /* last byte of the range */
  expect(what, 40, CFI_OTHER);                     /* past the FDE */
}

int main(void) {
  static char code[64]; /* addresses the FDEs describe (never run) */
  code_base = (uintptr_t)code;
  bytes_t cie = std_cie(), f = prologue(), empty = {{0}, 0};

  build("zR", 1, 0x78 /* -8 */, 0x00 /* absptr */, &cie, 40, &f);
  check_prologue("gcc frame, absptr");
  build("zR", 1, 0x78, 0x1b /* pcrel sdata4 */, &cie, 40, &f);
  check_prologue("gcc frame, pcrel sdata4");
  /* the pc is the return address: a call as the range's last byte is in
   * it, a return address at the start is not (the call was before it) */
  CHECKF(cfi_fde_rule(img + fde_at, code_base) == CFI_OTHER, "pc at the FDE's start");

  /* no instructions: the CIE's row everywhere */
  build("zR", 1, 0x78, 0x1b, &cie, 16, &empty);
  expect("leaf", 0, rule(CFI_RSP, SAME_RBP, 8));
  expect("leaf", 15, rule(CFI_RSP, SAME_RBP, 8));

  /* code_align 4 and the 1- and 2-byte advances */
  {
    bytes_t g = {{0}, 0};
    PUT(&g, 0x42);             /* advance_loc 2 * 4 = +8 */
    PUT(&g, 0x0e, 32);         /* def_cfa_offset 32 */
    PUT(&g, 0x02, 3);          /* advance_loc1 3 * 4 = +20 */
    PUT(&g, 0x0e, 48);
    PUT(&g, 0x03, 0x02, 0x00); /* advance_loc2 2 * 4 = +28 */
    PUT(&g, 0x0e, 8);
    build("zR", 4, 0x78, 0x1b, &cie, 40, &g);
    expect("code_align 4", 7, rule(CFI_RSP, SAME_RBP, 8));
    expect("code_align 4", 8, rule(CFI_RSP, SAME_RBP, 32));
    expect("code_align 4", 19, rule(CFI_RSP, SAME_RBP, 32));
    expect("code_align 4", 20, rule(CFI_RSP, SAME_RBP, 48));
    expect("code_align 4", 27, rule(CFI_RSP, SAME_RBP, 48));
    expect("code_align 4", 28, rule(CFI_RSP, SAME_RBP, 8));
  }

  /* an early return in the middle: remember_state before the epilogue,
   * restore_state after it; then DW_CFA_restore of rbp */
  {
    bytes_t g = prologue();
    g.n -= 4; /* drop the final advance and def_cfa */
    PUT(&g, 0x46);       /* advance_loc 6 (+10) */
    PUT(&g, 0x0a);       /* remember_state */
    PUT(&g, 0x0c, 7, 8); /* def_cfa rsp, 8 (pop rbp) */
    PUT(&g, 0xc6);       /* restore rbp: the CIE's rule (same value) */
    PUT(&g, 0x41);       /* advance_loc 1 (+11, ret) */
    PUT(&g, 0x0b);       /* restore_state: back in the body */
    PUT(&g, 0x4a);       /* advance_loc 10 (+21) */
    PUT(&g, 0x0c, 7, 8);
    build("zR", 1, 0x78, 0x1b, &cie, 32, &g);
    expect("remember/restore", 9, rule(CFI_RBP, true, -16, 16));
    expect("remember/restore", 10, rule(CFI_RSP, SAME_RBP, 8));
    expect("remember/restore", 11, rule(CFI_RBP, true, -16, 16));
    expect("remember/restore", 20, rule(CFI_RBP, true, -16, 16));
    expect("remember/restore", 21, rule(CFI_RSP, true, -16, 8));
  }

  /* gcc's realigned frame: CFA = *(rbp - 8) (DW_CFA_def_cfa_expression
   * DW_OP_breg6 -8 DW_OP_deref), rbp at CFA-16 */
  {
    bytes_t g = {{0}, 0};
    PUT(&g, 0x44);                   /* +4 */
    PUT(&g, 0x0f, 3, 0x76, 0x78, 0x06);
    PUT(&g, 0x86, 2);
    build("zR", 1, 0x78, 0x1b, &cie, 16, &g);
    expect("realigned", 3, rule(CFI_RSP, SAME_RBP, 8));
    expect("realigned", 4, rule(CFI_DEREF, true, -16, -8));
    /* any other expression: not for the walker */
    g.n = 0;
    PUT(&g, 0x44);
    PUT(&g, 0x0f, 3, 0x77, 0x08, 0x06); /* breg7 (rsp) */
    build("zR", 1, 0x78, 0x1b, &cie, 16, &g);
    expect("other CFA expression", 4, CFI_OTHER);
  }

  /* the outermost frame: return address undefined */
  {
    bytes_t g = {{0}, 0};
    PUT(&g, 0x07, 16); /* undefined r16 */
    build("zR", 1, 0x78, 0x1b, &cie, 16, &g);
    expect("undefined ra", 0, CFI_END);
  }

  /* what the walker cannot do with two loads: CFI_OTHER */
  {
    bytes_t g = {{0}, 0};
    build("zRS", 1, 0x78, 0x1b, &cie, 16, &empty);
    expect("signal frame", 0, CFI_OTHER);
    PUT(&g, 0x90, 2); /* ra at CFA-16 */
    build("zR", 1, 0x78, 0x1b, &cie, 16, &g);
    expect("ra not at CFA-8", 0, CFI_OTHER);
    g.n = 0;
    PUT(&g, 0x86, 0x81, 0x01); /* rbp at CFA - 129*8 */
    build("zR", 1, 0x78, 0x1b, &cie, 16, &g);
    expect("rbp saved too far", 0, CFI_OTHER);
    g.n = 0;
    PUT(&g, 0x86, 0x80, 0x01); /* rbp at CFA - 128*8 = -1024: the farthest */
    build("zR", 1, 0x78, 0x1b, &cie, 16, &g);
    expect("rbp saved at -1024", 0, rule(CFI_RSP, true, -1024, 8));
    g.n = 0;
    PUT(&g, 0x0c, 3, 8); /* CFA on rbx */
    build("zR", 1, 0x78, 0x1b, &cie, 16, &g);
    expect("CFA on rbx", 0, CFI_OTHER);
    g.n = 0;
    PUT(&g, 0x3f); /* not an opcode */
    build("zR", 1, 0x78, 0x1b, &cie, 16, &g);
    expect("unknown opcode", 0, CFI_OTHER);
    g.n = 0;
    PUT(&g, 0x09, 6, 3); /* rbp in rbx */
    build("zR", 1, 0x78, 0x1b, &cie, 16, &g);
    expect("rbp in a register", 0, CFI_OTHER);
    g.n = 0;
    PUT(&g, 0x0b); /* restore_state with nothing remembered */
    build("zR", 1, 0x78, 0x1b, &cie, 16, &g);
    expect("restore_state underflow", 0, CFI_OTHER);
  }
  /* the advance that passes the pc stops the run: what follows it is not
   * applied, even an opcode the parser would refuse */
  {
    bytes_t g = {{0}, 0};
    PUT(&g, 0x48, 0x3f); /* advance 8, then garbage */
    build("zR", 1, 0x78, 0x1b, &cie, 16, &g);
    expect("before the garbage", 7, rule(CFI_RSP, SAME_RBP, 8));
    expect("after the garbage", 8, CFI_OTHER);
  }
  printf("ok\n");
  return 0;
}
