/* Test plugins that are broken on purpose, one way each, selected by a compile definition
 * (tests/plugins/CMakeLists.txt builds one library per way). Each must be refused or reported
 * by gearbox with its own error code, naming the plugin, and never crash it:
 *
 *   BROKEN_NO_ENTRY   exports no gbx_plugin_get                     PLUGIN_ENTRY_MISSING
 *   BROKEN_ABI        built for plugin ABI version 999              PLUGIN_ABI_MISMATCH
 *   BROKEN_INIT       its init fails ("no licence file")            PLUGIN_INIT_FAILED
 *   BROKEN_KERNEL     its kernel returns an error                   PLUGIN_KERNEL_FAILED
 *   BROKEN_OVERRUN    its kernel writes one element past its output PLUGIN_OUTPUT_MISMATCH
 *   BROKEN_DESCRIPTOR an op without a kernel function               PLUGIN_LOAD_FAILED
 *   BROKEN_CRASH      its kernel writes through a bad pointer        PLUGIN_KERNEL_CRASHED
 *                     (SIGSEGV: reported as this plugin's, best effort)
 *
 * The op is com.example.Twice: y = 2 x, float32, y shaped like x. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gearbox/plugin.h"

static int32_t twice_shape(const gbx_plugin_node* node, const gbx_plugin_shape* in, int32_t n_in, gbx_plugin_shape* out,
                           int32_t n_out) {
  (void)node;
  (void)n_in;
  (void)n_out;
  out[0] = in[0];
  return GBX_PLUGIN_OK;
}

static int32_t twice_kernel(const gbx_plugin_node* node, const gbx_plugin_tensor* in, int32_t n_in,
                            gbx_plugin_tensor* out, int32_t n_out) {
  (void)n_in;
  (void)n_out;
  int64_t n = 1;
  for (int32_t d = 0; d < out[0].rank; ++d) n *= out[0].dims[d];
#if defined(BROKEN_KERNEL)
  (void)in;
  (void)n;
  node->set_error(node, "the accelerator this kernel needs is busy");
  return 7;
#else
  (void)node;
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
#if defined(BROKEN_CRASH)
  {
    volatile uintptr_t bad = 16; /* volatile: the compiler cannot see the write is invalid */
    y = (float*)bad;
  }
#endif
#if defined(BROKEN_OVERRUN)
  for (int64_t i = 0; i <= n; ++i) y[i] = 2 * (i < n ? x[i] : 1.0f); /* <= : one past the end */
#else
  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];
#endif
  return GBX_PLUGIN_OK;
#endif
}

#if defined(BROKEN_INIT)
static int32_t broken_init(char* error, size_t error_size) {
  strncpy(error, "no licence file", error_size - 1);
  return 3;
}
#define INIT broken_init
#else
#define INIT NULL
#endif

#if defined(BROKEN_ABI)
#define ABI 999
#else
#define ABI GBX_PLUGIN_ABI_VERSION
#endif

#if defined(BROKEN_DESCRIPTOR)
#define KERNEL NULL
/* Referenced, so that -Wunused-function stays quiet about the kernel the entry lacks. */
GBX_PLUGIN_EXPORT gbx_plugin_kernel_fn unused_kernel(void) { return twice_kernel; }
#else
#define KERNEL twice_kernel
#endif

static const int32_t kF32[] = {GBX_PLUGIN_F32, 0};
static const int32_t* const kDtypes[] = {kF32};
static const gbx_plugin_op kOps[] = {
    {"com.example", "Twice", 1, 0, 1, 1, kDtypes, kDtypes, twice_shape, NULL, KERNEL, NULL},
};
static const gbx_plugin kPlugin = {ABI, BROKEN_NAME, "0.1", INIT, 1, kOps};

#if defined(BROKEN_NO_ENTRY)
GBX_PLUGIN_EXPORT const gbx_plugin* not_the_entry_point(void) { return &kPlugin; }
#else
GBX_PLUGIN_EXPORT const gbx_plugin* gbx_plugin_get(void) { return &kPlugin; }
#endif
