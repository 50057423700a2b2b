// prof_leak.cc -- the prof_leak report at exit (issue 13 item 5): it must
// name the leaking C++ functions demangled, with file:line, and end with
// the final dump's path and the command that reads it. The driver runs
// this program again as a child that leaks from app::make_widget (a C++
// function: its exported name is mangled), captures its stderr, and checks
//   - with nalloc-prof found next to the library (the build tree's
//     tools/nalloc-prof; argv[1] names it, "none" when tools are not
//     built): "app::make_widget()" and "prof_leak.cc:<line>" in the report,
//     the summary's exact counts, and "Full profile: <path>; read it with:
//     <tool> top <path>" naming the file the child wrote;
//   - with NALLOC_PROF_TOOL= (empty: do not run it): the fallback, the
//     addresses with dladdr's names, and the command to run.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <nalloc.h>

#include "../check_core.h"
#ifdef NALLOC_TEST_PREFIXED
#define t_malloc nalloc_malloc
#else
#define t_malloc malloc
#endif

namespace app {
struct Widget {
  char buf[100];
};
static const int kMallocLine = __LINE__ + 2;
__attribute__((noinline)) Widget *make_widget() {
  return static_cast<Widget *>(t_malloc(sizeof(Widget)));
}
__attribute__((noinline)) void leak_some(int n) {
  for (int i = 0; i < n; i++) {
    Widget *w = make_widget();
    std::memset(w, 1, sizeof *w);
    __asm__ volatile("" ::"r"(w) : "memory");
  }
}
}  // namespace app

static std::string run(const char *self, const char *conf, const char *tool_env) {
  char errpath[] = "/tmp/prof_leak.err.XXXXXX";
  int efd = mkstemp(errpath);
  CHECK(efd >= 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    dup2(efd, 2);
    setenv("NALLOC_CONF", conf, 1);
    if (tool_env) setenv("NALLOC_PROF_TOOL", tool_env, 1);
    else unsetenv("NALLOC_PROF_TOOL");
    execl(self, self, "child", (char *)NULL);
    _exit(121);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  std::string out;
  char buf[4096];
  ssize_t n;
  lseek(efd, 0, SEEK_SET);
  while ((n = read(efd, buf, sizeof buf)) > 0) out.append(buf, (size_t)n);
  close(efd);
  unlink(errpath);
  return out;
}

static bool has(const std::string &s, const std::string &what) {
  return s.find(what) != std::string::npos;
}

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "child") == 0) {
    app::leak_some(10);
    return 0;
  }
  const char *tool = argc > 1 ? argv[1] : "none";
  bool have_tool = std::strcmp(tool, "none") != 0 && access(tool, X_OK) == 0;
  char dir[] = "/tmp/prof_leak.XXXXXX";
  CHECK(mkdtemp(dir) != nullptr);
  char conf[512];
  std::snprintf(conf, sizeof conf,
                "prof:true,lg_prof_sample:0,prof_leak:true,prof_prefix:%s/lk", dir);

  std::string out = run("/proc/self/exe", conf, nullptr);
  std::printf("--- report ---\n%s", out.c_str());
  CHECK(has(out, "Leak summary: "));
  CHECK(has(out, "(exact, lg_prof_sample 0)"));
  size_t at = out.find("Full profile: ");
  CHECK(at != std::string::npos);
  std::string path = out.substr(at + 14, out.find(';', at) - at - 14);
  CHECK(path.rfind(std::string(dir) + "/lk.", 0) == 0);
  CHECK(access(path.c_str(), R_OK) == 0);
  if (have_tool) {
    CHECK(has(out, "app::make_widget()"));
    CHECK(has(out, "app::leak_some(int)"));
    CHECK(has(out, "prof_leak.cc:" + std::to_string(app::kMallocLine)));
    CHECK(has(out, "inuse: 10 objects, 1000 B"));
    CHECK(has(out, "; read it with: /"));  // the tool found, by full path
    CHECK(has(out, "nalloc-prof top " + path));
  } else {
    std::printf("(nalloc-prof not built: checking the fallback only)\n");
  }

  out = run("/proc/self/exe", conf, "");
  std::printf("--- fallback ---\n%s", out.c_str());
  CHECK(has(out, "Leak summary: "));
  CHECK(has(out, "_ZN3app11make_widgetEv"));  // what dladdr knows
  CHECK(has(out, "Full profile: "));
  CHECK(has(out, "nalloc-prof stacks "));
  CHECK(has(out, "(nalloc-prof not run: NALLOC_PROF_TOOL is empty)"));
  std::string cmd = "rm -rf " + std::string(dir);
  CHECK(std::system(cmd.c_str()) == 0);
  std::printf("prof_leak: ok\n");
  return 0;
}
