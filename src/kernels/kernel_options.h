// Session options kernels may consult (SessionOptions, resolved once at Session::create;
// runtime/session.h). Kernels never read the environment: Session::run installs the
// session's KernelOptions on the calling thread for the extent of the run (KernelOptionsScope,
// the way base/buffer_source.h routes allocations), and a kernel reads them with
// current_kernel_options() on that thread (not inside its OpenMP regions). Outside a run (a
// kernel test calling a kernel directly) the defaults apply.
#pragma once

namespace gearbox {

struct KernelOptions {
  // cpu.dnnl may run 3x3 stride-1 convolutions as Winograd where it pays (docs/engines.md);
  // false: the direct algorithm everywhere (SessionOptions::conv_winograd = 0).
  bool conv_winograd = true;
  // The session's CPU computes bf16 (AVX512_BF16 or AMX-BF16, as the device layer reports it,
  // honouring GEARBOX_SIMULATE_MISSING_ISA): a node lowered to bf16 runs its bf16 kernel;
  // false: it computes in fp32 (the precision fallback, runtime/precision.h).
  bool bf16_arithmetic = false;
};

// The options installed on this thread, else the defaults.
const KernelOptions& current_kernel_options();

// Installs `options` on the calling thread until destroyed (scopes nest; the previous one
// comes back). `options` must outlive the scope.
class KernelOptionsScope {
 public:
  explicit KernelOptionsScope(const KernelOptions* options);
  ~KernelOptionsScope();
  KernelOptionsScope(const KernelOptionsScope&) = delete;
  KernelOptionsScope& operator=(const KernelOptionsScope&) = delete;

 private:
  const KernelOptions* previous_;
};

}  // namespace gearbox
