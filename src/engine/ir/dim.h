// Symbolic dimensions: a Dim is a polynomial with integer coefficients over named symbols such as
// `batch` and `seq` (e.g. `batch*seq`, `seq+1`, `768`). Shape inference keeps dims symbolic so one
// optimised graph serves every shape of a profile; at run time they are evaluated with the bound
// symbol values. Immutable value type; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace surge::engine::ir {

using SymbolBindings = std::unordered_map<std::string, int64_t>;

class Dim {
 public:
  Dim() = default;     // 0
  Dim(int64_t value);  // NOLINT(google-explicit-constructor): constants read naturally
  static Dim Symbol(std::string name);
  // Parses the ToString() form: "batch*seq+2", "-1*seq", "768".
  static Result<Dim> Parse(std::string_view text);

  bool IsStatic() const;
  int64_t StaticValue() const;  // requires IsStatic()
  bool IsSymbol() const;        // exactly one symbol with coefficient 1
  // Symbols the dim depends on.
  std::vector<std::string> Symbols() const;

  Dim operator+(const Dim& o) const;
  Dim operator-(const Dim& o) const;
  Dim operator*(const Dim& o) const;
  bool operator==(const Dim& o) const { return terms_ == o.terms_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }

  // Exact division: returns nullopt when `d` does not divide every term (or d is 0).
  std::optional<Dim> DivExact(const Dim& d) const;
  Result<int64_t> Eval(const SymbolBindings& bindings) const;
  std::string ToString() const;

 private:
  using Monomial = std::vector<std::string>;  // sorted symbol names (with repetition)
  std::map<Monomial, int64_t> terms_;         // no zero coefficients
};

using SymShape = std::vector<Dim>;

std::string SymShapeToString(const SymShape& shape);
Result<Shape> EvalShape(const SymShape& shape, const SymbolBindings& bindings);
SymShape StaticShape(const Shape& shape);
// Product of all dims.
Dim NumElements(const SymShape& shape);

}  // namespace surge::engine::ir
