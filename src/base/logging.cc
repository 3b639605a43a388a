// The process logger, created on first use from GEARBOX_LOG_LEVEL / GEARBOX_LOG_FILE.
#include "base/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace gearbox::log {
namespace {

std::shared_ptr<spdlog::logger> make_logger() {
  std::shared_ptr<spdlog::logger> l;
  const char* file = std::getenv("GEARBOX_LOG_FILE");
  if (file && *file) {
    try {
      l = std::make_shared<spdlog::logger>(
          "gearbox", std::make_shared<spdlog::sinks::basic_file_sink_mt>(file, /*truncate=*/false));
    } catch (const std::exception&) {
      l.reset();  // unwritable log file: fall back to stderr, and say so below
    }
    if (!l) {
      l = std::make_shared<spdlog::logger>("gearbox", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
      l->warn("[CLI] cannot open GEARBOX_LOG_FILE='{}'; logging to stderr", file);
    }
  } else {
    l = std::make_shared<spdlog::logger>("gearbox", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  }
  l->set_pattern("%^%L%$ %H:%M:%S.%e %v");
  const char* level = std::getenv("GEARBOX_LOG_LEVEL");
  l->set_level(spdlog::level::warn);
  if (level && *level) {
    auto lv = spdlog::level::from_str(level);
    // from_str maps unknown names to off; only accept names it really knows.
    if (lv != spdlog::level::off || std::string_view(level) == "off") l->set_level(lv);
  }
  return l;
}

std::shared_ptr<spdlog::logger>& instance() {
  static std::shared_ptr<spdlog::logger> l = make_logger();
  return l;
}

}  // namespace

spdlog::logger& logger() { return *instance(); }

void set_level(std::string_view level) { instance()->set_level(spdlog::level::from_str(std::string(level))); }

}  // namespace gearbox::log
