// PLUGIN_KERNEL_CRASHED (12010), best effort: while a plugin's kernel runs, a fatal signal
// (SIGSEGV, SIGBUS, SIGFPE, SIGILL) is reported as that plugin's fault -- the GBX error line
// naming the node, the op, the plugin and its library, and where the faulting instruction is
// (dladdr: the library and the nearest symbol) -- and the process exits with status 1, as
// for any other error, instead of dying silently. A crash outside a plugin kernel goes to the
// handler that was installed before (the default: a core dump; a sanitizer's report).
//
// The process cannot continue after such a signal (the plugin's state and the heap may be
// corrupt), so this names the culprit and nothing more. A debugger sees the signal first:
// `gdb --args gearbox run ...` stops at the faulting instruction as before.
#pragma once

namespace gearbox {

// Marks the calling thread as running `plugin`'s kernel on `node` for its lifetime (nestable
// per thread; the strings must outlive the scope). Worker threads the kernel starts itself
// (OpenMP) are covered through the most recently entered scope of the process.
class PluginKernelScope {
 public:
  PluginKernelScope(const char* node, const char* op, const char* plugin, const char* library);
  ~PluginKernelScope();
  PluginKernelScope(const PluginKernelScope&) = delete;
  PluginKernelScope& operator=(const PluginKernelScope&) = delete;

  const char* node;
  const char* op;
  const char* plugin;
  const char* library;

 private:
  PluginKernelScope* previous_;
};

}  // namespace gearbox
