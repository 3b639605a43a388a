// The shared --engine option.
#include "tools/engine_option.h"

namespace gearbox::cli {

void add_engine_option(CLI::App* sub, std::vector<std::string>* overrides) {
  sub->add_option("--engine", *overrides,
                  "NODE_OR_OPTYPE=ENGINE: run that node, or every node of that op type, on ENGINE "
                  "(cpu.dnnl, cpu.simd, cpu.ref; repeatable; a node name beats an op type)");
}

}  // namespace gearbox::cli
