// Subcommand registry for the `surge` binary. Each subcommand lives in its own file and registers
// itself at start-up with SURGE_REGISTER_COMMAND; main() builds the CLI11 app from the registry.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace surge::cli {

// Adds the subcommand's options to `sub` and returns the function that runs it (exit code).
using CommandSetup = std::function<std::function<int()>(CLI::App& sub)>;

struct CommandInfo {
  std::string name;
  std::string description;
  CommandSetup setup;
};

std::vector<CommandInfo>& CommandRegistry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string description, CommandSetup setup) {
    CommandRegistry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace surge::cli

#define SURGE_REGISTER_COMMAND(ident, name, description, setup) \
  static ::surge::cli::CommandRegistrar surge_command_##ident(name, description, setup)
