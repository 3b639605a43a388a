// Control-flow kernels: If, Loop, Scan and SequenceMap. They live in the runtime layer (not
// in src/kernels) because they read their bodies from the graph IR; they execute a body
// through KernelContext::run_subgraph, which the executor provides.
#pragma once

namespace gearbox {

// Registers the control-flow kernels into KernelRegistry::global() on engine kEngineRef.
// Idempotent: repeated calls register nothing more.
void register_control_flow_kernels();

}  // namespace gearbox
