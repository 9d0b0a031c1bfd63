#include "text/wordpiece.h"

#include <gtest/gtest.h>

#include <random>

namespace surge::text {
namespace {

std::unique_ptr<WordPiece> Make(std::vector<std::string> vocab, WordPieceOptions o = {}) {
  auto wp = WordPiece::Create(std::move(vocab), std::move(o));
  EXPECT_TRUE(wp.ok()) << wp.status().ToString();
  return std::move(wp).value();
}

std::vector<WordPiecePiece> Fast(const WordPiece& wp, std::string_view w, size_t chars) {
  std::vector<WordPiecePiece> out;
  wp.Tokenize(w, chars, &out);
  return out;
}

std::vector<WordPiecePiece> Greedy(const WordPiece& wp, std::string_view w, size_t chars) {
  std::vector<WordPiecePiece> out;
  wp.TokenizeGreedy(w, chars, &out);
  return out;
}

bool Same(const std::vector<WordPiecePiece>& a, const std::vector<WordPiecePiece>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || a[i].begin != b[i].begin || a[i].end != b[i].end) return false;
  }
  return true;
}

TEST(WordPiece, GreedyLongestMatchFirst) {
  auto wp = Make({"[UNK]", "un", "##aff", "##able", "unaff", "##a", "##ffable", "a"});
  auto pieces = Fast(*wp, "unaffable", 9);
  // Longest first: "unaff" then "##able" (not "un" + "##affable").
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(wp->IdToToken(pieces[0].id), "unaff");
  EXPECT_EQ(wp->IdToToken(pieces[1].id), "##able");
  EXPECT_EQ(pieces[1].begin, 5u);
  EXPECT_EQ(pieces[1].end, 9u);
}

TEST(WordPiece, UncoverableWordIsOneUnknown) {
  auto wp = Make({"[UNK]", "ab", "##c"});
  auto pieces = Fast(*wp, "abd", 3);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].id, wp->unk_id());
  EXPECT_EQ(pieces[0].end, 3u);
}

TEST(WordPiece, WordsOverTheCharLimitAreUnknown) {
  WordPieceOptions o;
  o.max_input_chars_per_word = 3;
  auto wp = Make({"[UNK]", "a", "##a"}, o);
  EXPECT_EQ(Fast(*wp, "aaa", 3).size(), 3u);
  auto pieces = Fast(*wp, "aaaa", 4);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].id, wp->unk_id());
}

TEST(WordPiece, BadVocabulariesAreErrors) {
  EXPECT_FALSE(WordPiece::Create({}).ok());
  auto no_unk = WordPiece::Create({"a", "b"});
  ASSERT_FALSE(no_unk.ok());
  EXPECT_NE(no_unk.status().message().find("[UNK]"), std::string::npos);
  EXPECT_FALSE(WordPiece::Create({"[UNK]", "\xFF"}).ok());
}

TEST(WordPiece, LaterDuplicateWins) {
  auto wp = Make({"[UNK]", "a", "a"});
  EXPECT_EQ(wp->TokenToId("a"), 2);
  EXPECT_EQ(Fast(*wp, "a", 1)[0].id, 2);
}

// LinMaxMatch against the reference greedy algorithm on random small vocabularies, where failure
// links and failure pops get deep and long.
TEST(WordPiece, LinMaxMatchEqualsGreedyOnRandomVocabularies) {
  std::mt19937 rng(7);
  const std::string alphabet[] = {"a", "b", "c", "é", "中"};
  auto random_string = [&](int max_len) {
    std::string s;
    int n = 1 + static_cast<int>(rng() % max_len);
    for (int i = 0; i < n; ++i) s += alphabet[rng() % 5];
    return s;
  };
  size_t checked = 0, unknown = 0;
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> vocab = {"[UNK]"};
    int size = 3 + static_cast<int>(rng() % 30);
    for (int i = 0; i < size; ++i) {
      std::string t = random_string(4);
      vocab.push_back(rng() % 2 ? "##" + t : t);
    }
    auto wp = Make(vocab);
    for (int k = 0; k < 200; ++k) {
      std::string w = random_string(12);
      size_t chars = 0;
      for (unsigned char c : w) chars += (c & 0xC0) != 0x80;
      auto fast = Fast(*wp, w, chars);
      auto greedy = Greedy(*wp, w, chars);
      ASSERT_TRUE(Same(fast, greedy)) << "word " << w << " round " << round;
      unknown += fast.size() == 1 && fast[0].id == wp->unk_id();
      ++checked;
    }
  }
  EXPECT_EQ(checked, 40000u);
  EXPECT_GT(unknown, 0u);
  EXPECT_LT(unknown, checked);
}

TEST(WordPiece, WordsWithHashUseTheReferencePath) {
  auto wp = Make({"[UNK]", "#", "##a", "##", "a", "###"});
  for (std::string w : {"##a", "#a", "a#", "###", "a##a"}) {
    EXPECT_TRUE(Same(Fast(*wp, w, w.size()), Greedy(*wp, w, w.size()))) << w;
  }
}

}  // namespace
}  // namespace surge::text
