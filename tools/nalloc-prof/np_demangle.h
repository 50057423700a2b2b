/* np_demangle.h -- demangle a C++ symbol name (copy of the input if it is
 * not a mangled name). Caller frees. */
#ifndef NP_DEMANGLE_H
#define NP_DEMANGLE_H
char *np_demangle(const char *name);
#endif
