// Logging: one spdlog logger for the process, configured from the environment.
//   GEARBOX_LOG_LEVEL = debug | info | warn (default) | error | off
//   GEARBOX_LOG_FILE  = path: log there instead of stderr
// Every line carries a module tag: [GRAPH], [GRAPH_OPTIMIZER], [MEM_ALLOC], [PARTITION],
// [EXEC], [DEVICE], [CLI]. Logs never go to stdout (stdout belongs to --json output).
//
//   GBX_LOG_DEBUG("EXEC", "node {} took {:.3f} ms", name, ms);
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace gearbox::log {

spdlog::logger& logger();
// Overrides the level (e.g. for tests); "debug", "info", "warn", "error", "off".
void set_level(std::string_view level);

}  // namespace gearbox::log

#define GBX_LOG_AT(level, tag, fmt_str, ...)                                         \
  do {                                                                               \
    auto& gbx_logger_ = ::gearbox::log::logger();                                    \
    if (gbx_logger_.should_log(level)) gbx_logger_.log(level, "[" tag "] " fmt_str, ##__VA_ARGS__); \
  } while (0)
#define GBX_LOG_DEBUG(tag, fmt_str, ...) GBX_LOG_AT(spdlog::level::debug, tag, fmt_str, ##__VA_ARGS__)
#define GBX_LOG_INFO(tag, fmt_str, ...) GBX_LOG_AT(spdlog::level::info, tag, fmt_str, ##__VA_ARGS__)
#define GBX_LOG_WARN(tag, fmt_str, ...) GBX_LOG_AT(spdlog::level::warn, tag, fmt_str, ##__VA_ARGS__)
#define GBX_LOG_ERROR(tag, fmt_str, ...) GBX_LOG_AT(spdlog::level::err, tag, fmt_str, ##__VA_ARGS__)
