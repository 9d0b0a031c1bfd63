// Single-thread throughput of surge::text::Segmenter on a corpus file (one post per line).
// Prints one JSON object: lines, bytes, words, load_seconds, seconds (median of --repeats),
// per-repeat seconds. With --words-out, writes each line's words as a JSON array (for checking
// against jieba). Usage: segment_bench --corpus FILE [--repeats N] [--no-hmm] [--words-out FILE]
// [--dict FILE] [--user-dict FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/segmenter.h"

int main(int argc, char** argv) {
  std::string corpus, words_out, dict, user_dict;
  int repeats = 5;
  bool hmm = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "missing value for " << a << "\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--corpus")
      corpus = next();
    else if (a == "--repeats")
      repeats = std::max(1, std::atoi(next().c_str()));
    else if (a == "--words-out")
      words_out = next();
    else if (a == "--dict")
      dict = next();
    else if (a == "--user-dict")
      user_dict = next();
    else if (a == "--no-hmm")
      hmm = false;
    else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  if (corpus.empty()) {
    std::cerr << "usage: segment_bench --corpus FILE [--repeats N] [--no-hmm] [--words-out F]\n";
    return 2;
  }
  std::ifstream in(corpus, std::ios::binary);
  if (!in) {
    std::cerr << "cannot open " << corpus << "\n";
    return 1;
  }
  std::vector<std::string> lines;
  size_t bytes = 0;
  for (std::string l; std::getline(in, l);) {
    bytes += l.size();
    lines.push_back(std::move(l));
  }

  surge::text::SegmenterOptions o;
  o.dict_path = dict;
  if (!user_dict.empty()) o.user_dict_paths.push_back(user_dict);
  auto t0 = std::chrono::steady_clock::now();
  auto seg = surge::text::Segmenter::Create(o);
  double load = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!seg.ok()) {
    std::cerr << seg.status().ToString() << "\n";
    return 1;
  }
  const auto& s = **seg;

  std::vector<surge::text::WordSpan> spans;
  spans.reserve(1024);
  std::vector<double> secs;
  size_t words = 0;
  for (int r = 0; r < repeats; ++r) {
    words = 0;
    auto t = std::chrono::steady_clock::now();
    for (const std::string& l : lines) {
      spans.clear();
      s.Cut(l, &spans, hmm);
      words += spans.size();
    }
    secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  std::vector<double> sorted = secs;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted[sorted.size() / 2];

  if (!words_out.empty()) {
    std::ofstream out(words_out, std::ios::binary);
    for (const std::string& l : lines) out << nlohmann::json(s.LCut(l, hmm)).dump() << '\n';
  }
  nlohmann::json j = {
      {"lines", lines.size()}, {"bytes", bytes},    {"words", words},        {"hmm", hmm},
      {"load_seconds", load},  {"seconds", median}, {"repeat_seconds", secs}};
  std::cout << j.dump() << std::endl;
  return 0;
}
