// Optimisation profiles: for each dynamic input, the smallest, typical (opt) and largest shape the
// engine accepts. Tactics are tuned at `opt`, activation memory is sized for `max`, and a request
// outside [min, max] is rejected with an error naming the input and the allowed range.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace surge::engine {

struct InputProfile {
  std::string name;
  Shape min, opt, max;
};

struct Profile {
  std::vector<InputProfile> inputs;

  const InputProfile* Find(std::string_view name) const;
  // OK when `shape` lies within [min, max] of the named input (inputs without a profile pass).
  Status Check(std::string_view name, const Shape& shape) const;
  // Parses the CLI form: "input_ids:1x1,8x128,64x512;attention_mask:1x1,8x128,64x512".
  // Several --profile flags may also each carry one input.
  static Result<Profile> Parse(std::string_view text);
  std::string ToString() const;
};

}  // namespace surge::engine
