// `surge simulate` and `surge eval` end to end: simulate a small stream, score the frequency
// baseline on it, compare trends files, and the errors a user meets.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

const std::string kSurgeBin = std::string(SURGE_BINARY_DIR) + "/bin/surge";
const std::string kSmall = std::string(SURGE_SOURCE_DIR) + "/src/stream/sim/scenarios/small.yaml";

class SimCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("surge_sim_cli." + std::to_string(getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `surge ARGS` inside the scratch folder; returns the exit code, output in *out.
  int Run(const std::string& args, std::string* out, bool with_stderr = true) const {
    const std::string cmd = "cd '" + dir_.string() + "' && " + kSurgeBin + " " + args +
                            (with_stderr ? " 2>&1" : " 2>/dev/null");
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return -1;
    char buf[4096];
    size_t n;
    out->clear();
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
    const int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string Read(const std::string& name) const {
    std::ifstream in(dir_ / name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  size_t Lines(const std::string& name) const {
    const std::string s = Read(name);
    return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
  }

  fs::path dir_;
};

TEST_F(SimCli, SimulateThenEvaluateTheFrequencyBaseline) {
  std::string out;
  ASSERT_EQ(Run("simulate --scenario " + kSmall + " --duration 4m --labels labels.jsonl", &out), 0)
      << out;
  EXPECT_NE(out.find("scenario 'small'"), std::string::npos) << out;
  const size_t posts = Lines("posts.jsonl");
  EXPECT_GT(posts, 5000u);
  EXPECT_EQ(Lines("labels.jsonl"), posts);
  auto truth = nlohmann::json::parse(Read("truth.json"));
  EXPECT_EQ(truth["format"], "surge.sim.truth/1");
  EXPECT_EQ(truth["posts"].get<size_t>(), posts);
  EXPECT_EQ(truth["events"].size(), 2u);  // e3 starts at 5m, after the shortened end
  EXPECT_NE(out.find("'e3' starts after the end"), std::string::npos) << out;

  ASSERT_EQ(Run("eval --baseline frequency --write-baseline freq.jsonl --json eval.json", &out), 0)
      << out;
  EXPECT_NE(out.find("precision@10"), std::string::npos) << out;
  EXPECT_NE(out.find("frequency"), std::string::npos) << out;
  auto report = nlohmann::json::parse(Read("eval.json"));
  ASSERT_EQ(report["runs"].size(), 1u);
  EXPECT_EQ(report["runs"][0]["name"], "frequency");
  EXPECT_EQ(report["runs"][0]["report"]["lists"], 4);
  EXPECT_EQ(Lines("freq.jsonl"), 40u);

  // The baseline's own trends file scores the same when read back, side by side with itself.
  ASSERT_EQ(Run("eval --compare freq.jsonl,freq.jsonl --json cmp.json", &out), 0) << out;
  auto cmp = nlohmann::json::parse(Read("cmp.json"));
  ASSERT_EQ(cmp["runs"].size(), 2u);
  EXPECT_EQ(cmp["runs"][0]["report"], report["runs"][0]["report"]);
  EXPECT_EQ(cmp["runs"][1]["report"], report["runs"][0]["report"]);
  // And --trends defaults to trends.jsonl.
  fs::copy_file(dir_ / "freq.jsonl", dir_ / "trends.jsonl");
  ASSERT_EQ(Run("eval --json -", &out, false), 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["runs"][0]["report"], report["runs"][0]["report"]);
}

TEST_F(SimCli, SimulateIsDeterministicAndHonoursOverrides) {
  std::string out;
  ASSERT_EQ(Run("simulate --scenario " + kSmall + " --duration 90s --out a.jsonl --truth ''", &out),
            0)
      << out;
  EXPECT_FALSE(fs::exists(dir_ / "truth.json"));  // --truth '' writes none
  ASSERT_EQ(Run("simulate --scenario " + kSmall + " --duration 90s --out b.jsonl --quiet", &out), 0)
      << out;
  EXPECT_TRUE(out.empty()) << out;
  EXPECT_TRUE(fs::exists(dir_ / "truth.json"));
  EXPECT_EQ(Read("a.jsonl"), Read("b.jsonl"));
  ASSERT_EQ(
      Run("simulate --scenario " + kSmall + " --duration 90s --seed 8 --rate 100 --out c.jsonl",
          &out),
      0)
      << out;
  EXPECT_NE(Read("a.jsonl"), Read("c.jsonl"));
  EXPECT_LT(Lines("c.jsonl"), Lines("a.jsonl"));
  ASSERT_EQ(
      Run("simulate --scenario " + kSmall + " --duration 10s --out - --truth ''", &out, false), 0);
  EXPECT_EQ(out.rfind("{\"id\":\"p1\"", 0), 0u) << out.substr(0, 200);
  ASSERT_EQ(Run("simulate --print-scenario", &out), 0);
  EXPECT_NE(out.find("name: default"), std::string::npos);
}

// --speed paces the posts at simulated time / speed: the same posts, held back until they are due
// (a lower bound on the wall time, which only pacing can produce: unpaced, 90 s of posts take
// milliseconds). A negative speed is refused by name.
TEST_F(SimCli, SpeedPacesThePostsWithoutChangingThem) {
  std::string out;
  ASSERT_EQ(Run("simulate --scenario " + kSmall + " --duration 90s --out a.jsonl --truth ''", &out),
            0)
      << out;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Run("simulate --scenario " + kSmall +
                    " --duration 90s --speed 90 --out b.jsonl --truth ''",
                &out),
            0)
      << out;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(Read("a.jsonl"), Read("b.jsonl"));
  // The last post is due after (its time - the first's) / 90 s: at least 0.9 s for 90 s of posts
  // whose first and last lie more than 81 s apart.
  EXPECT_GE(secs, 0.9);
  EXPECT_NE(Run("simulate --scenario " + kSmall + " --speed -1 --out c.jsonl", &out), 0);
  EXPECT_NE(out.find("--speed"), std::string::npos) << out;
}

TEST_F(SimCli, BadScenarioNamesFileLineAndField) {
  Write("bad.yaml",
        "seed: 3\nevents:\n  - {id: x, phrase: 新词测试, terms: [比赛], category: 体育,\n"
        "     onset: soon, peak_per_minute: 5}\n");
  std::string out;
  EXPECT_EQ(Run("simulate --scenario bad.yaml", &out), 2);
  EXPECT_NE(out.find("bad.yaml:4:13: field 'events[0].onset': expected a duration"),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(dir_ / "posts.jsonl"));
  EXPECT_EQ(Run("simulate --scenario missing.yaml", &out), 1);
  EXPECT_NE(out.find("scenario file 'missing.yaml'"), std::string::npos) << out;
  EXPECT_NE(Run("simulate --duration forever", &out), 0);
  EXPECT_NE(out.find("--duration"), std::string::npos) << out;
}

TEST_F(SimCli, EvalErrors) {
  std::string out;
  EXPECT_EQ(Run("eval", &out), 1);  // no truth.json here
  EXPECT_NE(out.find("truth file 'truth.json'"), std::string::npos) << out;
  ASSERT_EQ(Run("simulate --scenario " + kSmall + " --duration 2m --quiet", &out), 0) << out;
  EXPECT_EQ(Run("eval", &out), 1);  // no trends.jsonl
  EXPECT_NE(out.find("trends file 'trends.jsonl'"), std::string::npos) << out;
  EXPECT_EQ(Run("eval --baseline magic", &out), 2);
  EXPECT_NE(out.find("--baseline must be 'frequency'"), std::string::npos) << out;
  Write("t.jsonl",
        "{\"topic_id\":\"a\",\"hashtag\":\"#x#\",\"rank\":1,\"heat\":1,\"terms\":[],"
        "\"updated\":60000}\nnot json\n");
  EXPECT_EQ(Run("eval --trends t.jsonl", &out), 2);
  EXPECT_NE(out.find("t.jsonl:2: "), std::string::npos) << out;
  EXPECT_EQ(Run("eval --trends t.jsonl --skip-bad", &out), 0) << out;
  EXPECT_NE(out.find("skipped 1 malformed line(s)"), std::string::npos) << out;
  Write("posts_bad.jsonl", Read("posts.jsonl").substr(0, 300) + "\n{\"id\":3}\n");
  EXPECT_EQ(Run("eval --baseline frequency --posts posts_bad.jsonl", &out), 2);
  EXPECT_NE(out.find("posts_bad.jsonl:"), std::string::npos) << out;
}

}  // namespace
