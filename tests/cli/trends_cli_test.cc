// Runs `surge trends` the way a user would: defaults, stdin/stdout, dead letters, bad flags.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

namespace {

namespace fs = std::filesystem;
const std::string kSurge = std::string(SURGE_BINARY_DIR) + "/bin/surge";

struct RunResult {
  int code = -1;
  std::string out;
};

RunResult Shell(const std::string& cmd) {
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Eight one-minute buckets of chatter; from the fifth on, many accounts post about one phrase.
std::string MakePosts(int* bad_lines) {
  const char* words[] = {"生活", "工作", "朋友", "周末", "心情", "孩子", "天气", "回家", "学习",
                         "吃饭", "睡觉", "电影", "音乐", "旅行", "城市", "公司", "学校", "老师",
                         "地铁", "咖啡", "早餐", "电脑", "照片", "视频", "新闻", "小说", "运动"};
  std::mt19937_64 rng(3);
  std::string out;
  int64_t t0 = 1764676800000;
  int id = 0;
  *bad_lines = 0;
  for (int b = 0; b < 8; ++b) {
    int burst = b >= 4 ? 120 : 0;
    for (int i = 0; i < 600 + burst; ++i) {
      int64_t ts = t0 + b * 60000 + i * 60000 / (600 + burst);
      std::string text;
      bool event = i % 6 == 0 && burst;
      if (event) {
        const char* before[] = {"刚看到", "没想到", "大家怎么看", "#"};
        const char* after[] = {"的消息，", "！", "？", "# "};
        int k = static_cast<int>(rng() % 4);
        text = std::string(before[k]) + "AI推理革命" + after[k] + words[rng() % 27] + "芯片";
      } else {
        for (int k = 0; k < 5; ++k) text += words[rng() % 27];
      }
      std::string user = event ? "f" + std::to_string(id) : "u" + std::to_string(rng() % 3000);
      out += R"({"id":"p)" + std::to_string(id++) + R"(","ts":)" + std::to_string(ts) +
             R"(,"user":{"id":")" + user +
             R"(","followers":300,"created":1600000000000},"text":")" + text + "\"}\n";
      if (id % 1000 == 0) {
        out += "{\"id\":\"broken\n";
        ++*bad_lines;
      }
    }
  }
  return out;
}

class TrendsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("surge_trends_cli." + std::to_string(getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::ofstream(dir_ / "posts.jsonl", std::ios::binary) << MakePosts(&bad_);
  }
  void TearDown() override {
    if (!getenv("KEEP")) fs::remove_all(dir_);
  }
  std::string InDir(const std::string& args) {
    return "cd '" + dir_.string() + "' && " + kSurge + " trends " + args;
  }
  fs::path dir_;
  int bad_ = 0;
};

TEST_F(TrendsCli, DefaultsReadPostsJsonlAndWriteTrendsJsonl) {
  RunResult r = Shell(InDir("2>&1"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("lexical path"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("buckets: 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dead letters: " + std::to_string(bad_)), std::string::npos) << r.out;
  std::ifstream in(dir_ / "trends.jsonl");
  std::string line;
  bool found = false;
  int lines = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    ++lines;
    found |= j["hashtag"] == "#AI推理革命#";
    EXPECT_TRUE(j.contains("topic_id") && j.contains("rank") && j.contains("updated"));
  }
  EXPECT_GT(lines, 0);
  EXPECT_TRUE(found) << r.out;
}

TEST_F(TrendsCli, StdinToStdoutWithAJsonSummaryAndDeadLetters) {
  RunResult r =
      Shell(InDir("--source - --out - --json --threads 1 --dead-letter dead.jsonl "
                  "< posts.jsonl 2>summary.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("#AI推理革命#"), std::string::npos);
  std::ifstream s(dir_ / "summary.json");
  std::string all((std::istreambuf_iterator<char>(s)), std::istreambuf_iterator<char>());
  auto j = nlohmann::json::parse(all.substr(all.find("{\"")));
  EXPECT_EQ(j["source"], "stdin");
  EXPECT_EQ(j["dead_letters"], bad_);
  EXPECT_EQ(j["buckets"], 8);
  EXPECT_EQ(j["threads"], 1);
  std::ifstream d(dir_ / "dead.jsonl");
  int n = 0;
  std::string line;
  while (std::getline(d, line)) {
    auto dl = nlohmann::json::parse(line);
    EXPECT_EQ(dl["kind"], "json");
    EXPECT_GT(dl["line"].get<int>(), 0);
    ++n;
  }
  EXPECT_EQ(n, bad_);
}

TEST_F(TrendsCli, BadFlagsAndInputsAreClearErrors) {
  struct Case {
    std::string args;
    std::string mentions;
  };
  const Case cases[] = {
      {"--bucket fast", "--bucket 'fast'"},
      {"--bucket 0s", "--bucket"},
      {"--top-k 0", "--top-k"},
      {"--threads -1", "--threads"},
      {"--source missing.jsonl", "missing.jsonl"},
      {"--source kafka://127.0.0.1:1/posts --idle-ms 2000",
       "no partition assigned in 12000 ms: metadata request to brokers 127.0.0.1:1"},
      {"--source kafka://127.0.0.1:1", "posts topic"},
      {"--model nowhere", "nowhere"},
      {"--shards 0", "shards"},
  };
  for (const auto& c : cases) {
    RunResult r = Shell(InDir(c.args + " 2>&1"));
    EXPECT_NE(r.code, 0) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.mentions), std::string::npos) << c.args << "\n" << r.out;
  }
  EXPECT_FALSE(fs::exists(dir_ / "trends.jsonl.partial"));
}

}  // namespace

// The model path in process and through `surge serve` (KServe v2 gRPC) give the same trends.
namespace {

class TrendsRemoteCli : public TrendsCli {};

TEST_F(TrendsRemoteCli, ServedModelMatchesTheInProcessModel) {
  const std::string fixture = std::string(SURGE_SOURCE_DIR) + "/tests/fixtures/stream_model";
  fs::create_directories(dir_ / "repo/stream_model/1");
  fs::copy_file(fixture + "/model.onnx", dir_ / "repo/stream_model/1/model.onnx");
  std::ofstream(dir_ / "repo/stream_model/config.pbtxt")
      << "name: \"stream_model\"\nmax_batch_size: 64\n";
  // Start the server on free ports; it prints "surge serve: ready ... grpc=PORT" when listening.
  const std::string log = (dir_ / "serve.log").string();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    freopen(log.c_str(), "w", stdout);
    freopen(log.c_str(), "a", stderr);
    const std::string repo = (dir_ / "repo").string(), cache = (dir_ / "cache").string();
    execl(kSurge.c_str(), kSurge.c_str(), "serve", "--model-repository", repo.c_str(),
          "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0", "--model-cache-dir",
          cache.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string port;
  for (int i = 0; i < 200 && port.empty(); ++i) {
    usleep(50 * 1000);
    std::ifstream in(log);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t at = all.find("grpc=");
    if (at != std::string::npos) {
      size_t end = all.find_first_not_of("0123456789", at + 5);
      if (end != std::string::npos) port = all.substr(at + 5, end - at - 5);
    }
  }
  ASSERT_FALSE(port.empty()) << "surge serve did not start";
  RunResult local = Shell(InDir("--threads 1 --model " + fixture + " --out local.jsonl 2>&1"));
  RunResult remote = Shell(InDir("--threads 1 --model " + fixture +
                                 " --serve grpc://127.0.0.1:" + port + " --out remote.jsonl 2>&1"));
  RunResult missing =
      Shell(InDir("--threads 1 --model " + fixture + " --serve grpc://127.0.0.1:" + port +
                  " --serve-model nope --out x.jsonl 2>&1"));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(local.code, 0) << local.out;
  ASSERT_EQ(remote.code, 0) << remote.out;
  EXPECT_NE(remote.out.find("on grpc://127.0.0.1:" + port), std::string::npos) << remote.out;
  auto read = [&](const char* name) {
    std::ifstream in(dir_ / name);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  EXPECT_FALSE(read("local.jsonl").empty());
  EXPECT_EQ(read("local.jsonl"), read("remote.jsonl"));
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.out.find("'nope'"), std::string::npos) << missing.out;
  RunResult no_model = Shell(InDir("--serve grpc://127.0.0.1:1 2>&1"));
  EXPECT_NE(no_model.code, 0);
  EXPECT_NE(no_model.out.find("--serve needs --model"), std::string::npos) << no_model.out;
}

}  // namespace
