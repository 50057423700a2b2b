/* prof_unwind_cmp_nofp.c -- the frames of prof_unwind_cmp.c that have no
 * frame pointer. This file is built -O2 -fomit-frame-pointer
 * -fstack-clash-protection (see CMakeLists.txt), so an unwinder must
 * follow the DWARF CFI to get through it:
 *  - CFA = rsp + k in the plain functions, k about 20 KB in nofp_big (a
 *    local array of an odd size, 20011 bytes, past a stack-clash probe);
 *  - CFA = rbp + 16 where alloca / a VLA forces a frame pointer, in the
 *    middle of code that has none;
 *  - a tail call (nofp_tail: jmp malloc), whose frame is not on the stack;
 *  - a call to a noreturn function as a function's last instruction: the
 *    return address is the first byte of the next function, whose CFI
 *    says something else (the walker has to look up ra - 1);
 *  - a call with arguments pushed on the stack (the CFA offset at that
 *    return address is not the one of the rest of the function);
 *  - frames that realign the stack to 64 bytes: CFA = rbp + 16, and with
 *    stack arguments and alloca the CFA and the saved registers as DWARF
 *    expressions;
 *  - a function that keeps garbage in rbp while it calls malloc, so the
 *    caller's rbp has to come from where the callee saved it;
 *  - twins: nofp_twin_a and nofp_twin_b have the same frame and call the
 *    same code, so malloc is called from the same place with the same
 *    rsp and rbp, and only a return address two frames up differs.
 * Every function is global so that dladdr names it (-rdynamic). */
#include "prof_check.h"

#include <alloca.h>
#include <setjmp.h>

/* In prof_unwind_cmp.c. */
void cmp_keep(void *p);

/* Opaque to the optimizer: keeps arrays and results alive. */
#define USE(x) __asm__ volatile("" : : "r"(x) : "memory")

NOINL void nofp_leaf(size_t n) {
  void *p = t_malloc(n);
  USE(p);
  cmp_keep(p);
}

NOINL void nofp_big(size_t n) {
  volatile char big[20011];
  big[0] = (char)n;
  big[sizeof big - 1] = (char)(n >> 8);
  void *p = t_malloc(n);
  USE(p);
  cmp_keep(p);
  USE(big[n % sizeof big]);
}

NOINL void nofp_chain1(size_t n) {
  void *p = t_calloc(1, n);
  USE(p);
  cmp_keep(p);
}
NOINL void nofp_chain2(size_t n) {
  nofp_chain1(n);
  __asm__ volatile(""); /* no tail call */
}
NOINL void nofp_chain3(size_t n) {
  volatile char pad[200];
  pad[0] = 1;
  nofp_chain2(n);
  USE(pad[0]);
}

/* `return malloc(n)` at -O2 is `jmp malloc`: frame 0 is in our caller. */
NOINL void *nofp_tail(size_t n) { return t_malloc(n); }

NOINL void nofp_alloca(size_t n, size_t k) {
  char *buf = alloca(k);
  memset(buf, (int)n, k);
  void *p = t_malloc(n);
  USE(p);
  USE(buf);
  cmp_keep(p);
}

NOINL void nofp_vla(size_t n, size_t k) {
  char buf[k];
  memset(buf, 1, k);
  void *p = t_malloc(n);
  USE(p);
  USE(buf);
  cmp_keep(p);
}

/* Allocates, then jumps back to the setjmp in prof_unwind_cmp.c. */
NOINL __attribute__((noreturn)) void nofp_die(size_t n, jmp_buf *jb) {
  void *p = t_malloc(n);
  USE(p);
  cmp_keep(p);
  longjmp(*jb, 1);
}
/* nofp_calls_die calls nofp_die as its last instruction, so the return
 * address is nofp_after_die's first byte. Written in assembly (with CFI)
 * to fix the frame: the word under the return address is a decoy, the
 * return address a walker that looks up the rule of `ra` (nofp_after_die:
 * CFA = rsp + 8) instead of `ra - 1` (CFA = rsp + 16) would read. It
 * points into nofp_tail, whose rule is CFA = rsp + 8 too, so such a walker
 * makes up one frame and goes on instead of giving up. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl nofp_calls_die\n"
        ".type nofp_calls_die, @function\n"
        "nofp_calls_die:\n"
        "  .cfi_startproc\n"
        "  lea nofp_tail+1(%rip), %rax\n"
        "  push %rax\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  call nofp_die@PLT\n"
        "  .cfi_endproc\n"
        ".size nofp_calls_die, .-nofp_calls_die\n"
        ".globl nofp_after_die\n"
        ".type nofp_after_die, @function\n"
        "nofp_after_die:\n"
        "  .cfi_startproc\n"
        "  ret\n"
        "  .cfi_endproc\n"
        ".size nofp_after_die, .-nofp_after_die\n");
#else
NOINL void nofp_calls_die(size_t n, jmp_buf *jb) { nofp_die(n, jb); }
NOINL void nofp_after_die(void) { __asm__ volatile(""); }
#endif

/* Recursion that alternates with rec_mix in prof_unwind_cmp.c. */
NOINL void nofp_rec(int k, size_t n, void (*back)(int, size_t)) {
  back(k, n);
  __asm__ volatile(""); /* no tail call */
}

/* The suffix-cache shapes' middle frames without frame pointers: the
 * same frame, so the frames they call lie at the same rsp under either
 * (sfx_top in prof_unwind_cmp.c). */
volatile int nofp_sfx_which;
NOINL void nofp_sfx_mid_a(int k, size_t n, void (*chain)(int, size_t)) {
  nofp_sfx_which = 1;
  chain(k, n);
  __asm__ volatile(""); /* no tail call */
}
NOINL void nofp_sfx_mid_b(int k, size_t n, void (*chain)(int, size_t)) {
  nofp_sfx_which = 2;
  chain(k, n);
  __asm__ volatile("");
}

/* bsearch's comparator: libc frames (no frame pointers) above it. */
size_t nofp_cmp_size;
NOINL int nofp_cmp_alloc(const void *a, const void *b) {
  void *p = t_malloc(nofp_cmp_size);
  USE(p);
  t_free(p);
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Seven and eight arguments: the last ones are pushed by the caller. */
NOINL void nofp_many(long a, long b, long c, long d, long e, long f, size_t n, long g) {
  void *p = t_malloc(n);
  USE(p);
  USE(a + b + c + d + e + f + g);
  cmp_keep(p);
}
NOINL void nofp_push_args(size_t n) {
  nofp_many(1, 2, 3, 4, 5, 6, n, 7);
  __asm__ volatile(""); /* no tail call */
}

NOINL void nofp_realign(size_t n) {
  char buf[96] __attribute__((aligned(64)));
  memset(buf, 5, sizeof buf);
  USE(buf);
  void *p = t_malloc(n);
  USE(p);
  cmp_keep(p);
}
/* Realigned, with stack arguments and alloca: gcc keeps the incoming
 * stack pointer in a register (DRAP), the CFA and the saved registers
 * become DWARF expressions. */
NOINL void nofp_realign_args(long a, long b, long c, long d, long e, long f, size_t n, long g) {
  char buf[96] __attribute__((aligned(64)));
  char *v = alloca(n & 255);
  memset(buf, (int)(a + b + c + d + e + f + g), sizeof buf);
  memset(v, 1, n & 255);
  USE(buf);
  USE(v);
  void *p = t_malloc(n);
  USE(p);
  cmp_keep(p);
}
NOINL void nofp_call_realign_args(size_t n) {
  nofp_realign_args(1, 2, 3, 4, 5, 6, n, 7);
  __asm__ volatile("");
}

NOINL void nofp_clobber_rbp(size_t n) {
#if defined(__x86_64__)
  __asm__ volatile("lea 8(%%rsp), %%rbp" : : : "rbp"); /* a stack address, not a frame */
#endif
  void *p = t_malloc(n);
  USE(p);
  cmp_keep(p);
}

/* The same call site, rsp and rbp from two different stacks. */
NOINL void nofp_twin_mid(size_t n) {
  nofp_leaf(n);
  __asm__ volatile("");
}
NOINL void nofp_twin_a(size_t n) {
  nofp_twin_mid(n);
  __asm__ volatile("");
}
NOINL void nofp_twin_b(size_t n) {
  nofp_twin_mid(n);
  __asm__ volatile("");
}
