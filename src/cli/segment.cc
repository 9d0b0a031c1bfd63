// `surge segment`: jieba-compatible word segmentation of --text or of each line on stdin.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"
#include "text/segmenter.h"

namespace surge::cli {
namespace {

struct SegmentArgs {
  std::string text;
  bool has_text = false;
  bool json = false;
  bool no_hmm = false;
  std::string dict;
  std::string hmm_dir;
  std::vector<std::string> user_dicts;
};

void PrintWords(const std::vector<std::string>& words, bool json) {
  if (json) {
    std::cout << nlohmann::json(words).dump() << '\n';
    return;
  }
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) std::cout << " / ";
    std::cout << words[i];
  }
  std::cout << '\n';
}

int RunSegment(const SegmentArgs& a) {
  text::SegmenterOptions o;
  o.dict_path = a.dict;
  o.hmm_dir = a.hmm_dir;
  o.user_dict_paths = a.user_dicts;
  auto seg = text::Segmenter::Create(o);
  if (!seg.ok()) {
    std::cerr << "error: " << seg.status().ToString() << '\n';
    return 1;
  }
  bool hmm = !a.no_hmm;
  if (a.has_text) {
    PrintWords((*seg)->LCut(a.text, hmm), a.json);
    return 0;
  }
  std::string line;
  while (std::getline(std::cin, line)) PrintWords((*seg)->LCut(line, hmm), a.json);
  if (std::cin.bad()) {
    std::cerr << "error: reading stdin failed\n";
    return 1;
  }
  return 0;
}

std::function<int()> SetupSegment(CLI::App& sub) {
  auto a = std::make_shared<SegmentArgs>();
  sub.add_option("--text", a->text, "text to cut (default: lines on stdin)");
  sub.add_flag("--json", a->json, "one JSON array of words per line");
  sub.add_flag("--no-hmm", a->no_hmm, "no HMM for unknown words (jieba's HMM=False)");
  sub.add_option("--dict", a->dict, "jieba dictionary (default: Debian's)");
  sub.add_option("--hmm-dir", a->hmm_dir, "folder with jieba's finalseg prob_*.py tables");
  sub.add_option("--user-dict", a->user_dicts,
                 "user dictionary, 'word [freq] [tag]' lines (repeatable)");
  return [a, &sub] {
    a->has_text = sub.count("--text") > 0;
    return RunSegment(*a);
  };
}

}  // namespace

SURGE_REGISTER_COMMAND(
    segment, "segment",
    "Cut Chinese text into words exactly as jieba.lcut does (--text or stdin lines)", SetupSegment);

}  // namespace surge::cli
