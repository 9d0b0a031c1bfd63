// Single-threaded throughput of Surge's tokenizers on a corpus (one text per line).
// Usage: tokenize_bench --corpus FILE (--vocab FILE | --tokenizer FILE) [--repeats N]
//                       [--ids-out FILE]
// Prints one JSON object: lines, bytes, tokens and the median seconds of the repeats. With
// --ids-out, also writes the ids of every line (space-separated, one line per input line), untimed,
// so the caller can check them against the peer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "text/bert_tokenizer.h"

int main(int argc, char** argv) {
  std::string corpus, vocab, tokenizer_json, ids_out;
  int repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--corpus")
      corpus = argv[i + 1];
    else if (flag == "--vocab")
      vocab = argv[i + 1];
    else if (flag == "--tokenizer")
      tokenizer_json = argv[i + 1];
    else if (flag == "--repeats")
      repeats = std::stoi(argv[i + 1]);
    else if (flag == "--ids-out")
      ids_out = argv[i + 1];
  }
  if (corpus.empty() || (vocab.empty() == tokenizer_json.empty())) {
    std::fprintf(stderr,
                 "usage: %s --corpus FILE (--vocab FILE | --tokenizer FILE) [--repeats N]\n",
                 argv[0]);
    return 2;
  }
  auto tok = vocab.empty() ? surge::text::BertTokenizer::FromTokenizerJson(tokenizer_json)
                           : surge::text::BertTokenizer::FromVocabFile(vocab);
  if (!tok.ok()) {
    std::fprintf(stderr, "error: %s\n", tok.status().ToString().c_str());
    return 1;
  }
  std::ifstream in(corpus, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "error: cannot open corpus '%s'\n", corpus.c_str());
    return 1;
  }
  std::vector<std::string> lines;
  size_t bytes = 0;
  for (std::string line; std::getline(in, line);) {
    bytes += line.size();
    lines.push_back(std::move(line));
  }
  surge::text::Encoding enc;
  surge::text::EncodeOptions options;
  std::vector<double> seconds;
  size_t tokens = 0;
  for (int r = 0; r < repeats; ++r) {
    tokens = 0;
    auto start = std::chrono::steady_clock::now();
    for (const std::string& line : lines) {
      if (!(*tok)->EncodeTo(line, nullptr, options, &enc).ok()) return 1;
      tokens += enc.size();
    }
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  if (!ids_out.empty()) {
    std::ofstream out(ids_out, std::ios::binary);
    for (const std::string& line : lines) {
      if (!(*tok)->EncodeTo(line, nullptr, options, &enc).ok()) return 1;
      for (size_t i = 0; i < enc.size(); ++i) out << (i ? " " : "") << enc.ids[i];
      out << '\n';
    }
    if (!out) {
      std::fprintf(stderr, "error: cannot write '%s'\n", ids_out.c_str());
      return 1;
    }
  }
  std::printf(
      "{\"lines\": %zu, \"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f, \"repeats\": %d}\n",
      lines.size(), bytes, tokens, seconds[seconds.size() / 2], repeats);
  return 0;
}
