/* np_demangle.c -- C++ symbol demangling for reports.
 *
 * pprof shows demangled names ("operator new(unsigned long)") and its
 * allocator-frame list is written in those terms, so we demangle too. The
 * demangler is libstdc++'s __cxa_demangle, referenced strongly: a weak
 * reference would let the linker's --as-needed drop libstdc++ and silently
 * disable demangling. */
#include <stdlib.h>
#include <string.h>

#include "np_demangle.h"
#include "np_util.h"

extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len,
                            int *status);

char *np_demangle(const char *name_in) {
  /* Versioned dynamic symbols ("__libc_start_main@@GLIBC_2.34"): the
   * version is noise in a report. */
  const char *at = strchr(name_in, '@');
  char *name = at && at > name_in ? np_xstrndup(name_in, (size_t)(at - name_in))
                                  : np_xstrdup(name_in);
  if (name[0] == '_' && name[1] == 'Z') {
    int st = 0;
    char *d = __cxa_demangle(name, NULL, NULL, &st);
    if (d && st == 0) {
      char *r = np_xstrdup(d);
      free(d);
      free(name);
      return r;
    }
    free(d);
  }
  return name;
}
