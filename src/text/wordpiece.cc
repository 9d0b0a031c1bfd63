#include "text/wordpiece.h"

#include <fmt/format.h>

#include <deque>
#include <map>

#include "text/utf8.h"

namespace surge::text {

Result<std::unique_ptr<WordPiece>> WordPiece::Create(std::vector<std::string> vocab,
                                                     WordPieceOptions options) {
  if (vocab.empty()) return InvalidArgumentError("WordPiece vocabulary is empty");
  if (options.max_input_chars_per_word <= 0) {
    return InvalidArgumentError("max_input_chars_per_word must be positive, got {}",
                                options.max_input_chars_per_word);
  }
  std::unique_ptr<WordPiece> wp(new WordPiece());
  wp->options_ = std::move(options);
  wp->vocab_ = std::move(vocab);
  for (size_t i = 0; i < wp->vocab_.size(); ++i) {
    if (!IsValidUtf8(wp->vocab_[i])) {
      return InvalidArgumentError("WordPiece vocabulary entry {} (id {}) is not valid UTF-8", i + 1,
                                  i);
    }
    wp->token_to_id_[wp->vocab_[i]] = static_cast<int32_t>(i);
  }
  auto unk = wp->token_to_id_.find(wp->options_.unk_token);
  if (unk == wp->token_to_id_.end()) {
    return InvalidArgumentError("WordPiece vocabulary lacks the unknown token '{}'",
                                wp->options_.unk_token);
  }
  wp->unk_id_ = unk->second;
  wp->Build();
  return wp;
}

std::string_view WordPiece::IdToToken(int32_t id) const {
  if (id < 0 || id >= size()) return {};
  return vocab_[id];
}

int32_t WordPiece::TokenToId(std::string_view token) const {
  auto it = token_to_id_.find(token);
  return it == token_to_id_.end() ? -1 : it->second;
}

void WordPiece::Build() {
  const std::string& prefix = options_.continuing_prefix;
  // A pointer trie first; it is flattened below.
  std::vector<std::map<uint8_t, int32_t>> children(2);
  std::vector<int32_t> token(2, -1);
  std::vector<uint32_t> depth(2, 0);
  match_len_.assign(vocab_.size(), 0);
  for (const auto& [str, id] : token_to_id_) {
    if (str.empty()) continue;
    std::string_view s = str;
    int32_t node = 0;
    if (!prefix.empty() && s.size() > prefix.size() && s.starts_with(prefix)) {
      s.remove_prefix(prefix.size());
      node = 1;
    }
    for (unsigned char c : s) {
      auto it = children[node].find(c);
      if (it == children[node].end()) {
        int32_t next = static_cast<int32_t>(children.size());
        children[node][c] = next;
        children.emplace_back();
        token.push_back(-1);
        depth.push_back(depth[node] + 1);
        node = next;
      } else {
        node = it->second;
      }
    }
    token[node] = id;
    match_len_[id] = static_cast<uint32_t>(s.size());
  }

  const size_t n = children.size();
  nodes_.assign(n, Node{});
  std::vector<std::vector<int32_t>> pops(n);
  for (size_t i = 0; i < n; ++i) nodes_[i].token = token[i];
  // Breadth-first over both roots: a failure link always points to a shallower node.
  std::deque<int32_t> queue = {0, 1};
  while (!queue.empty()) {
    int32_t u = queue.front();
    queue.pop_front();
    for (const auto& [c, v] : children[u]) {
      queue.push_back(v);
      if (token[v] >= 0) {
        nodes_[v].fail = 1;
        pops[v] = {token[v]};
        continue;
      }
      int32_t z = nodes_[u].fail;
      std::vector<int32_t> acc = pops[u];
      while (z >= 0) {
        auto it = children[z].find(c);
        if (it != children[z].end()) break;
        acc.insert(acc.end(), pops[z].begin(), pops[z].end());
        z = nodes_[z].fail;
      }
      if (z >= 0) {
        nodes_[v].fail = children[z].at(c);
        pops[v] = std::move(acc);
      }
    }
  }

  for (size_t i = 0; i < n; ++i) {
    Node& node = nodes_[i];
    node.pops_begin = static_cast<uint32_t>(pops_.size());
    node.pops_len = static_cast<uint32_t>(pops[i].size());
    pops_.insert(pops_.end(), pops[i].begin(), pops[i].end());
    node.edge_begin = static_cast<uint32_t>(edge_labels_.size());
    node.edge_count = static_cast<uint32_t>(children[i].size());
    for (const auto& [c, v] : children[i]) {
      edge_labels_.push_back(c);
      edge_targets_.push_back(v);
    }
    if (node.edge_count > 4) {
      node.dense = static_cast<int32_t>(dense_.size() >> 8);
      dense_.resize(dense_.size() + 256, -1);
      for (const auto& [c, v] : children[i]) dense_[(static_cast<size_t>(node.dense) << 8) | c] = v;
    }
  }
}

void WordPiece::Tokenize(std::string_view word, size_t num_chars,
                         std::vector<WordPiecePiece>* out) const {
  const uint32_t len = static_cast<uint32_t>(word.size());
  if (num_chars > static_cast<size_t>(options_.max_input_chars_per_word)) {
    out->push_back({unk_id_, 0, len});
    return;
  }
  if (word.find('#') != std::string_view::npos) {
    TokenizeGreedy(word, num_chars, out);
    return;
  }
  const size_t mark = out->size();
  uint32_t pos = 0;  // start of the next piece in the word
  auto pop = [&](const Node& node) {
    for (uint32_t k = 0; k < node.pops_len; ++k) {
      int32_t id = pops_[node.pops_begin + k];
      uint32_t end = pos + match_len_[id];
      out->push_back({id, pos, end});
      pos = end;
    }
  };
  const auto* bytes = reinterpret_cast<const uint8_t*>(word.data());
  int32_t u = 0;
  for (uint32_t i = 0; i < len; ++i) {
    int32_t v = Child(u, bytes[i]);
    while (v < 0) {
      const Node& node = nodes_[u];
      if (node.fail < 0) goto unknown;
      pop(node);
      u = node.fail;
      v = Child(u, bytes[i]);
    }
    u = v;
  }
  while (u != 1) {
    const Node& node = nodes_[u];
    if (node.fail < 0) goto unknown;
    pop(node);
    u = node.fail;
  }
  return;
unknown:
  out->resize(mark);
  out->push_back({unk_id_, 0, len});
}

void WordPiece::TokenizeGreedy(std::string_view word, size_t num_chars,
                               std::vector<WordPiecePiece>* out) const {
  const uint32_t len = static_cast<uint32_t>(word.size());
  if (num_chars > static_cast<size_t>(options_.max_input_chars_per_word)) {
    out->push_back({unk_id_, 0, len});
    return;
  }
  const size_t mark = out->size();
  std::string candidate;
  uint32_t start = 0;
  while (start < len) {
    uint32_t end = len;
    int32_t found = -1;
    while (start < end) {
      candidate.clear();
      if (start > 0) candidate = options_.continuing_prefix;
      candidate.append(word.substr(start, end - start));
      auto it = token_to_id_.find(candidate);
      if (it != token_to_id_.end()) {
        found = it->second;
        break;
      }
      do {
        --end;
      } while (end > start && (static_cast<uint8_t>(word[end]) & 0xC0) == 0x80);
    }
    if (found < 0) {
      out->resize(mark);
      out->push_back({unk_id_, 0, len});
      return;
    }
    out->push_back({found, start, end});
    start = end;
  }
}

}  // namespace surge::text
