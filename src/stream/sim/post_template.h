// Post templates: literal UTF-8 text with {slot}s that the generator fills (scenario.h lists the
// slots). "{{" and "}}" stand for literal braces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace surge::stream::sim {

enum class Slot {
  kLiteral,  // not a slot: the piece's text
  kNoun,
  kGeneral,
  kVerb,
  kAdv,
  kAdj,
  kEvergreen,
  kBump,
  kSentiment,
  kPhrase,
  kTerm,
  kEmoji,
  kUser,
  kNum,
  kRand,
};

struct TemplatePiece {
  Slot slot = Slot::kLiteral;
  std::string text;  // kLiteral only
};

struct PostTemplate {
  std::vector<TemplatePiece> pieces;
  bool HasSlot(Slot s) const;
};

// Errors name the unknown slot or the unbalanced brace and list the known slots.
Result<PostTemplate> CompileTemplate(std::string_view text);

std::string_view SlotName(Slot s);

}  // namespace surge::stream::sim
