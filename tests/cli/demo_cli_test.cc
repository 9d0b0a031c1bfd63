// `surge demo` run the way a user runs it: the simulator through the pipeline with the bundled
// demo model, the terminal output, the evaluation, and its answers to bad flags.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.h"

namespace surge::cli {
namespace {

using namespace test_util;

using DemoCli = Scratch;

TEST_F(DemoCli, RunsTheSimulatorThroughThePipelineAndEvaluates) {
  // Six simulated minutes as fast as the machine goes, no HTTP server.
  RunResult r =
      Surge("demo --plain --no-dashboard --duration 6m --speed 0 --eval-json " + Path("eval.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("scenario 'default'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model demo on 1 post in 16"), std::string::npos)
      << "the bundled demo model should be found beside the build: " << r.out;
  EXPECT_NE(r.out.find("] top:"), std::string::npos) << "a line per bucket: " << r.out;
  EXPECT_NE(r.out.find("precision@10"), std::string::npos) << r.out;
  std::ifstream f(Path("eval.json"));
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = json::parse(ss.str(), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << ss.str();
  // Six minutes hold the first events of the default scenario; they must be found and no spam.
  ASSERT_TRUE(j.contains("recall")) << j.dump();
  EXPECT_GT(j["recall"].get<double>(), 0.5) << j.dump();
  EXPECT_EQ(j["spam_surfaced"].get<int>(), 0) << j.dump();
}

TEST_F(DemoCli, LexicalOnlyAndAJsonlSourceWithItsTruth) {
  ASSERT_EQ(Surge("simulate --duration 5m --quiet --out " + Path("posts.jsonl") + " --truth " +
                  Path("truth.json"))
                .code,
            0);
  RunResult r = Surge("demo --plain --no-dashboard --no-model --source " + Path("posts.jsonl") +
                      " --truth " + Path("truth.json") + " --out " + Path("trends.jsonl"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("lexical path (no model)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recall"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(Path("trends.jsonl")));
  EXPECT_GT(fs::file_size(Path("trends.jsonl")), 0u);
}

TEST_F(DemoCli, BadInputGetsAClearError) {
  EXPECT_FAILS_WITH(Surge("demo --plain --no-dashboard --source " + Path("missing.jsonl")),
                    "missing.jsonl");
  EXPECT_FAILS_WITH(Surge("demo --plain --port 70000"), "--port must be 0..65535");
  EXPECT_FAILS_WITH(Surge("demo --plain --no-dashboard --model " + Path("nomodel")), "nomodel");
  EXPECT_FAILS_WITH(Surge("demo --plain --no-dashboard --no-model --serve grpc://127.0.0.1:1"),
                    "--serve needs the model folder");
  EXPECT_FAILS_WITH(Surge("demo --plain --no-dashboard --duration 0m"), "duration");
  EXPECT_FAILS_WITH(Surge("demo --plain --no-dashboard --scenario " +
                          Write("bad.yaml", "events: [ {id: e1, phrase: 1} ]\n")),
                    "bad.yaml");
  EXPECT_FAILS_WITH(Surge("demo --plain --no-dashboard --model-every 0"), "--model-every");
  EXPECT_FAILS_WITH(Surge("demo --plain --no-dashboard --source kafka://127.0.0.1:1"),
                    "posts topic");
}

TEST_F(DemoCli, ABusyPortIsNamed) {
  // Hold a port with a first demo's dashboard, then ask a second one for it.
  int fd[2];
  ASSERT_EQ(pipe(fd), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    execl(kSurge.c_str(), kSurge.c_str(), "demo", "--plain", "--port", "0", "--duration", "3m",
          "--speed", "3", "--no-model", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fd[1]);
  std::string out;
  char c;
  while (read(fd[0], &c, 1) == 1 && out.find("dashboard: http://") == std::string::npos) out += c;
  std::string line;
  while (read(fd[0], &c, 1) == 1 && c != '\n') line += c;
  std::string url = "dashboard: http://" + line;
  size_t colon = line.rfind(':');
  ASSERT_NE(colon, std::string::npos) << out << line;
  std::string port = line.substr(colon + 1);
  while (!port.empty() && (port.back() == '/' || port.back() == '\r')) port.pop_back();
  RunResult r = Surge("demo --plain --no-model --duration 1m --port " + port);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fd[0]);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("another process may hold the port"), std::string::npos) << r.out;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "Ctrl-C ends the demo cleanly";
}

// The bundled demo model through the engine matches PyTorch's outputs stored beside it
// (tools/demo_model/train.py wrote them from the same float16-rounded weights).
TEST_F(DemoCli, TheDemoModelMatchesPyTorch) {
  const std::string dir = std::string(SURGE_SOURCE_DIR) + "/models/demo";
  ASSERT_TRUE(fs::exists(dir + "/model.onnx")) << dir;
  RunResult b = Surge("build " + dir + "/model.onnx -o " + Path("demo.plan") +
                      " --profile 'input_ids:1x1,4x32,8x64;attention_mask:1x1,4x32,8x64;"
                      "token_type_ids:1x1,4x32,8x64'");
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("Attention=4"), std::string::npos) << "the encoder fuses: " << b.out;
  RunResult c = Surge("compare " + Path("demo.plan") + " --reference " + dir + "/reference.json");
  EXPECT_EQ(c.code, 0) << c.out;
  for (const char* out : {"category_logits", "sentiment_logits", "keyword_logits", "embedding"}) {
    EXPECT_NE(c.out.find(out), std::string::npos) << out << " compared: " << c.out;
  }
}

// The Hugging Face export of the same weights imports into Surge's engine and matches
// transformers' BertModel on it (tools/demo_model/hf_reference.py wrote the reference).
TEST_F(DemoCli, TheDemoModelsHuggingFaceFolderMatchesTransformers) {
  const std::string hf = std::string(SURGE_SOURCE_DIR) + "/models/demo/hf";
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
                        "reference.json"}) {
    ASSERT_TRUE(fs::exists(hf + "/" + f)) << hf << "/" << f;
  }
  RunResult b = Surge("build " + hf + " -o " + Path("demo_hf.plan") +
                      " --profile 'input_ids:1x1,1x32,1x64;attention_mask:1x1,1x32,1x64;"
                      "token_type_ids:1x1,1x32,1x64'");
  ASSERT_EQ(b.code, 0) << b.out;
  RunResult c = Surge("compare " + Path("demo_hf.plan") + " --reference " + hf + "/reference.json");
  EXPECT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("last_hidden_state"), std::string::npos) << c.out;
}

}  // namespace
}  // namespace surge::cli
