// The calling thread's KernelOptions (kernels/kernel_options.h).
#include "kernels/kernel_options.h"

namespace gearbox {

namespace {
thread_local const KernelOptions* t_options = nullptr;
}  // namespace

const KernelOptions& current_kernel_options() {
  static const KernelOptions defaults;
  return t_options ? *t_options : defaults;
}

KernelOptionsScope::KernelOptionsScope(const KernelOptions* options) : previous_(t_options) { t_options = options; }

KernelOptionsScope::~KernelOptionsScope() { t_options = previous_; }

}  // namespace gearbox
