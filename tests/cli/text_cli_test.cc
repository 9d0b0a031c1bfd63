// `surge tokenize`, `surge segment`, `surge keywords` and `surge kafka-mock`, run as the README
// runs them (and so under the sanitizers in the sanitizer build, where the README's run is left
// out).
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace surge::cli {
namespace {

using test_util::json;
using test_util::RunResult;
using test_util::RunStdout;
using test_util::Scratch;
using test_util::Surge;

using TextCli = Scratch;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_F(TextCli, TokenizeSegmentAndKeywordsOfTextAndOfStdinLines) {
  // The fixture vocabulary: Chinese by character, "AI" lower-cased, a character it lacks as [UNK].
  auto r = Surge("tokenize --text \"今天AI推理革命来了\"");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out,
            "[CLS]/2 今/417 天/494 ai/1763 推/549 理/629 革/756 命/468 [UNK]/1 了/412 [SEP]/3\n");
  r = RunStdout("tokenize --json --text \"AI来了\"");
  ASSERT_EQ(r.code, 0) << r.out;
  const json tok = json::parse(r.out);
  EXPECT_EQ(tok["ids"], json::parse("[2, 1763, 1, 412, 3]"));
  EXPECT_EQ(tok["offsets"][2], json::parse("[2, 5]")) << "byte offsets of 来";
  EXPECT_EQ(tok["char_offsets"][2], json::parse("[2, 3]"));

  r = Surge("segment --text \"今天AI推理革命来了\"");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "今天 / AI / 推理 / 革命 / 来 / 了\n");
  const std::string lines = Write("lines.txt", "今天天气\n股市大涨\n");
  r = Surge("segment < " + lines);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(Lines(r.out), (std::vector<std::string>{"今天天气", "股市 / 大涨"}));

  r = Surge("keywords --text \"央行意外降准，银行利率下调，股市大涨\" --top-k 3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("降准:", 0), 0u) << r.out;
  r = RunStdout("keywords --json --top-k 2 --text \"央行意外降准，银行利率下调，股市大涨\"");
  ASSERT_EQ(r.code, 0) << r.out;
  const json kw = json::parse(r.out);
  ASSERT_EQ(kw.size(), 2u) << r.out;
  EXPECT_EQ(kw[0]["word"], "降准");
  EXPECT_EQ(kw[1]["word"], "银行利率");
  EXPECT_GT(kw[0]["weight"].get<double>(), kw[1]["weight"].get<double>());
  r = Surge("keywords --top-k 1 < " + lines);  // one keyword per stdin line
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(Lines(r.out).size(), 2u) << r.out;
}

TEST_F(TextCli, BadInputsAreClearErrors) {
  EXPECT_FAILS_WITH(Surge("tokenize --vocab " + Path("missing.txt") + " --text hi"),
                    "cannot open vocabulary");
  EXPECT_FAILS_WITH(Surge("segment --dict " + Path("missing.txt") + " --text 你好"), "cannot open");
  EXPECT_FAILS_WITH(Surge("keywords --method nope --text 你好"),
                    "--method must be tfidf or textrank");
  EXPECT_FAILS_WITH(Surge("keywords --top-k 0 --text 你好"), "--top-k must be a positive number");
}

TEST(KafkaMockCli, PrintsItsBootstrapAndStopsAfterSeconds) {
  auto r = Surge("kafka-mock --topic posts:4 --topic trends --seconds 0.5");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("kafka-mock: bootstrap 127.0.0.1:"), std::string::npos) << r.out;
  EXPECT_FAILS_WITH(Surge("kafka-mock --topic posts:x --seconds 0.5"),
                    "expected NAME or NAME:PARTITIONS with 1..1024 partitions");
  EXPECT_FAILS_WITH(Surge("kafka-mock --topic posts:0 --seconds 0.5"), "--topic 'posts:0'");
}

}  // namespace
}  // namespace surge::cli
