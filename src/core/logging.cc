#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>

namespace surge {

spdlog::logger& Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("surge");
    l->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
    l->set_level(spdlog::level::info);
    if (const char* env = std::getenv("SURGE_LOG_LEVEL")) {
      l->set_level(spdlog::level::from_str(env));
    }
    return l;
  }();
  return *logger;
}

bool SetLogLevel(std::string_view level) {
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") return false;
  Logger().set_level(lvl);
  return true;
}

}  // namespace surge
