// `surge keywords`: TF-IDF or TextRank keywords of --text or of each line on stdin.
#include "text/keywords.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"
#include "text/segmenter.h"

namespace surge::cli {
namespace {

struct KeywordArgs {
  std::string text;
  bool has_text = false;
  bool json = false;
  std::string dict;
  std::string idf;
  std::vector<std::string> user_dicts;
  int top_k = 20;
  std::string method = "tfidf";
};

int RunKeywords(const KeywordArgs& a) {
  if (a.method != "tfidf" && a.method != "textrank") {
    std::cerr << "error: --method must be tfidf or textrank, not '" << a.method << "'\n";
    return 2;
  }
  if (a.top_k <= 0) {
    std::cerr << "error: --top-k must be a positive number, not " << a.top_k << '\n';
    return 2;
  }
  text::SegmenterOptions so;
  so.dict_path = a.dict;
  so.user_dict_paths = a.user_dicts;
  auto seg = text::Segmenter::Create(so);
  if (!seg.ok()) {
    std::cerr << "error: " << seg.status().ToString() << '\n';
    return 1;
  }
  text::KeywordOptions ko;
  ko.idf_path = a.idf;
  auto kw = text::KeywordExtractor::Create(seg->get(), ko);
  if (!kw.ok()) {
    std::cerr << "error: " << kw.status().ToString() << '\n';
    return 1;
  }
  auto run = [&](const std::string& text) {
    auto k = a.method == "tfidf" ? (*kw)->TfIdf(text, a.top_k) : (*kw)->TextRank(text, a.top_k);
    if (a.json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& x : k) j.push_back({{"word", x.word}, {"weight", x.weight}});
      std::cout << j.dump() << '\n';
    } else {
      for (size_t i = 0; i < k.size(); ++i) {
        std::cout << (i ? " " : "") << k[i].word << ':' << fmt::format("{:.4f}", k[i].weight);
      }
      std::cout << '\n';
    }
  };
  if (a.has_text) {
    run(a.text);
    return 0;
  }
  std::string line;
  while (std::getline(std::cin, line)) run(line);
  return std::cin.bad() ? 1 : 0;
}

std::function<int()> SetupKeywords(CLI::App& sub) {
  auto a = std::make_shared<KeywordArgs>();
  sub.add_option("--text", a->text, "text (default: lines on stdin)");
  sub.add_option("--top-k", a->top_k, "keywords per text (default 20)");
  sub.add_option("--method", a->method, "tfidf (default) or textrank");
  sub.add_flag("--json", a->json, "one JSON array per text");
  sub.add_option("--dict", a->dict, "jieba dictionary (default: Debian's)");
  sub.add_option("--user-dict", a->user_dicts, "user dictionary (repeatable)");
  sub.add_option("--idf", a->idf, "idf table (default: jieba's idf.txt)");
  return [a, &sub] {
    a->has_text = sub.count("--text") > 0;
    return RunKeywords(*a);
  };
}

}  // namespace

SURGE_REGISTER_COMMAND(keywords, "keywords",
                       "TF-IDF or TextRank keywords of --text or of each line on stdin",
                       SetupKeywords);

}  // namespace surge::cli
