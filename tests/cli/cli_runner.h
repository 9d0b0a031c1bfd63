// Runs the `surge` binary for the CLI tests: exit code and output, a scratch folder per test.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace surge::cli::test_util {

namespace fs = std::filesystem;
using nlohmann::json;

inline const std::string kSurge = std::string(SURGE_BINARY_DIR) + "/bin/surge";
inline const std::string kModels = std::string(SURGE_SOURCE_DIR) + "/tests/fixtures/models";

struct RunResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

inline RunResult Surge(const std::string& args, const char* redirect = " 2>&1") {
  RunResult r;
  std::string cmd = kSurge + " " + args + redirect;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Only stdout (for JSON output).
inline RunResult RunStdout(const std::string& args) { return Surge(args, " 2>/dev/null"); }

class Scratch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("surge_cli_test." + std::to_string(getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(Path(name), std::ios::binary) << text;
    return Path(name);
  }
  fs::path dir_;
};

#define EXPECT_FAILS_WITH(result, text)                                      \
  do {                                                                       \
    RunResult _r = (result);                                                 \
    EXPECT_NE(_r.code, 0) << _r.out;                                         \
    EXPECT_NE(_r.out.find(text), std::string::npos) << "output: " << _r.out; \
  } while (0)

}  // namespace surge::cli::test_util
