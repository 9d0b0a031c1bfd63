#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "cli/command.h"
#include "core/logging.h"

namespace surge::cli {

std::vector<CommandInfo>& CommandRegistry() {
  static std::vector<CommandInfo> registry;
  return registry;
}

}  // namespace surge::cli

int main(int argc, char** argv) {
  using surge::cli::CommandRegistry;
  CLI::App app{"surge: real-time trend detection with its own transformer inference engine"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "surge 0.1.0");
  std::string log_level;
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off");

  auto& registry = CommandRegistry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::function<int()> run;
  for (auto& info : registry) {
    CLI::App* sub = app.add_subcommand(info.name, info.description);
    auto runner = std::make_shared<std::function<int()>>(info.setup(*sub));
    sub->callback([&run, runner] { run = *runner; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!log_level.empty() && !surge::SetLogLevel(log_level)) {
    std::cerr << "error: unknown --log-level '" << log_level << "'\n";
    return 2;
  }
  return run ? run() : 1;
}
