#include "stream/sim/post_template.h"

#include <algorithm>
#include <array>
#include <utility>

namespace surge::stream::sim {
namespace {

constexpr std::array<std::pair<std::string_view, Slot>, 14> kSlots = {{
    {"noun", Slot::kNoun},
    {"general", Slot::kGeneral},
    {"verb", Slot::kVerb},
    {"adv", Slot::kAdv},
    {"adj", Slot::kAdj},
    {"evergreen", Slot::kEvergreen},
    {"bump", Slot::kBump},
    {"sentiment", Slot::kSentiment},
    {"phrase", Slot::kPhrase},
    {"term", Slot::kTerm},
    {"emoji", Slot::kEmoji},
    {"user", Slot::kUser},
    {"num", Slot::kNum},
    {"rand", Slot::kRand},
}};

std::string KnownSlots() {
  std::string s;
  for (const auto& [name, slot] : kSlots) {
    if (!s.empty()) s += ", ";
    s += name;
  }
  return s;
}

}  // namespace

bool PostTemplate::HasSlot(Slot s) const {
  return std::any_of(pieces.begin(), pieces.end(), [s](const auto& p) { return p.slot == s; });
}

std::string_view SlotName(Slot s) {
  for (const auto& [name, slot] : kSlots) {
    if (slot == s) return name;
  }
  return "literal";
}

Result<PostTemplate> CompileTemplate(std::string_view text) {
  PostTemplate t;
  std::string literal;
  auto flush = [&] {
    if (!literal.empty()) t.pieces.push_back({Slot::kLiteral, std::move(literal)});
    literal.clear();
  };
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      literal.push_back(c);
      i += 2;
      continue;
    }
    if (c == '}') {
      return InvalidArgumentError(
          "template \"{}\": '}}' at byte {} closes no slot (write '}}}}' "
          "for a literal brace)",
          text, i);
    }
    if (c != '{') {
      literal.push_back(c);
      ++i;
      continue;
    }
    const size_t close = text.find('}', i + 1);
    if (close == std::string_view::npos) {
      return InvalidArgumentError("template \"{}\": '{{' at byte {} is never closed", text, i);
    }
    const std::string_view name = text.substr(i + 1, close - i - 1);
    auto it = std::find_if(kSlots.begin(), kSlots.end(),
                           [&](const auto& kv) { return kv.first == name; });
    if (it == kSlots.end()) {
      return InvalidArgumentError("template \"{}\": unknown slot '{{{}}}' (known: {})", text, name,
                                  KnownSlots());
    }
    flush();
    t.pieces.push_back({it->second, {}});
    i = close + 1;
  }
  flush();
  if (t.pieces.empty()) return InvalidArgumentError("template is empty");
  return t;
}

}  // namespace surge::stream::sim
