// Logging for library code: thin wrappers over one spdlog logger named "surge" (stderr).
// Library code logs through these, never printf/cout. Thread-safe.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace surge {

// The process-wide logger (created on first use, writes to stderr).
spdlog::logger& Logger();

// Sets the level from a name: trace, debug, info, warn, error, off. Unknown names return false.
bool SetLogLevel(std::string_view level);

}  // namespace surge

#define SURGE_LOG_TRACE(...) ::surge::Logger().trace(__VA_ARGS__)
#define SURGE_LOG_DEBUG(...) ::surge::Logger().debug(__VA_ARGS__)
#define SURGE_LOG_INFO(...) ::surge::Logger().info(__VA_ARGS__)
#define SURGE_LOG_WARN(...) ::surge::Logger().warn(__VA_ARGS__)
#define SURGE_LOG_ERROR(...) ::surge::Logger().error(__VA_ARGS__)
