// PLUGIN_KERNEL_CRASHED reporting (plugin_crash_guard.h). The handler uses only what is safe
// enough in a signal handler: write(2), fixed buffers, dladdr (not formally async-signal-safe,
// but the loader's lock is not held by a faulting plugin kernel in practice: best effort).
#include "kernels/plugin_crash_guard.h"

#include <dlfcn.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "base/status.h"

namespace gearbox {
namespace {

thread_local PluginKernelScope* t_scope = nullptr;
std::atomic<PluginKernelScope*> g_latest{nullptr};  // for the kernel's own worker threads
std::atomic<int> g_active{0};

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
struct sigaction g_previous[std::size(kSignals)];

// Appends to a fixed buffer (no allocation).
struct Line {
  char buf[2048];
  size_t n = 0;
  Line& add(const char* s) {
    for (; s && *s && n + 1 < sizeof(buf); ++s) buf[n++] = *s;
    return *this;
  }
  Line& hex(uintptr_t v) {
    char t[19] = "0x";
    int i = 17;
    t[18] = 0;
    do {
      t[i--] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v && i > 1);
    return add("0x").add(t + i + 1);
  }
};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV (invalid memory access)";
    case SIGBUS:
      return "SIGBUS (bus error)";
    case SIGFPE:
      return "SIGFPE (arithmetic exception)";
    case SIGILL:
      return "SIGILL (illegal instruction: built for a newer CPU?)";
  }
  return "a fatal signal";
}

void on_fatal_signal(int sig, siginfo_t* info, void* uc) {
  const PluginKernelScope* s = t_scope;
  if (!s && g_active.load(std::memory_order_relaxed) > 0) s = g_latest.load(std::memory_order_relaxed);
  if (!s) {
    // Not a plugin's kernel: hand the signal to whoever handled it before, as if we were not here.
    for (size_t i = 0; i < std::size(kSignals); ++i)
      if (kSignals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
    return;  // the faulting instruction runs again and meets the previous handler
  }
  const ErrorInfo& e = error_info(ErrorCode::PLUGIN_KERNEL_CRASHED);
  Line l;
  l.add("GBX-E12010 ").add(e.name.data()).add(": the kernel of plugin '").add(s->plugin).add("' (").add(s->library);
  l.add(") crashed with ").add(signal_name(sig)).add(" at address ").hex(reinterpret_cast<uintptr_t>(info->si_addr));
  l.add(" while running node '").add(s->node).add("' (").add(s->op).add(")");
#if defined(__x86_64__)
  const auto pc = static_cast<uintptr_t>(static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP]);
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(pc), &where) && where.dli_fname) {
    l.add("; the faulting instruction is in ").add(where.dli_fname);
    if (where.dli_sname)
      l.add(" (").add(where.dli_sname).add(" + ").hex(pc - reinterpret_cast<uintptr_t>(where.dli_saddr)).add(")");
  }
#else
  (void)uc;
#endif
  l.add("\n  cause: ").add(e.cause.data()).add("\n  fix:   ").add(e.fix.data()).add("\n");
  ssize_t ignored = write(STDERR_FILENO, l.buf, l.n);
  (void)ignored;
  _exit(1);
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_fatal_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &sa, &g_previous[i]);
  });
}

// A stack for the handler on this thread, so that a kernel that overflowed its stack (a large
// tile in a local buffer) is still reported. Kept for the thread's life.
void ensure_alt_stack() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;  // one exists (ASan's)
  static thread_local char stack[64 * 1024];
  stack_t st{};
  st.ss_sp = stack;
  st.ss_size = sizeof(stack);
  sigaltstack(&st, nullptr);
}

}  // namespace

PluginKernelScope::PluginKernelScope(const char* node_name, const char* op_name, const char* plugin_name,
                                     const char* library_path)
    : node(node_name), op(op_name), plugin(plugin_name), library(library_path), previous_(t_scope) {
  install_once();
  ensure_alt_stack();
  t_scope = this;
  g_latest.store(this, std::memory_order_relaxed);
  g_active.fetch_add(1, std::memory_order_relaxed);
}

PluginKernelScope::~PluginKernelScope() {
  g_active.fetch_sub(1, std::memory_order_relaxed);
  PluginKernelScope* self = this;
  g_latest.compare_exchange_strong(self, previous_, std::memory_order_relaxed);
  t_scope = previous_;
}

}  // namespace gearbox
