#include "engine/ir/dim.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace surge::engine::ir {

Dim::Dim(int64_t value) {
  if (value != 0) terms_[{}] = value;
}

Dim Dim::Symbol(std::string name) {
  Dim d;
  d.terms_[{std::move(name)}] = 1;
  return d;
}

bool Dim::IsStatic() const {
  return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty());
}

int64_t Dim::StaticValue() const {
  SURGE_CHECK(IsStatic(), "dim {} is symbolic", ToString());
  return terms_.empty() ? 0 : terms_.begin()->second;
}

bool Dim::IsSymbol() const {
  return terms_.size() == 1 && terms_.begin()->first.size() == 1 && terms_.begin()->second == 1;
}

std::vector<std::string> Dim::Symbols() const {
  std::vector<std::string> out;
  for (const auto& [mono, coeff] : terms_) {
    for (const auto& s : mono) {
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
  }
  return out;
}

Dim Dim::operator+(const Dim& o) const {
  Dim r = *this;
  for (const auto& [mono, coeff] : o.terms_) {
    int64_t v = (r.terms_[mono] += coeff);
    if (v == 0) r.terms_.erase(mono);
  }
  return r;
}

Dim Dim::operator-(const Dim& o) const { return *this + o * Dim(-1); }

Dim Dim::operator*(const Dim& o) const {
  Dim r;
  for (const auto& [ma, ca] : terms_) {
    for (const auto& [mb, cb] : o.terms_) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      int64_t v = (r.terms_[m] += ca * cb);
      if (v == 0) r.terms_.erase(m);
    }
  }
  return r;
}

std::optional<Dim> Dim::DivExact(const Dim& d) const {
  if (d.terms_.empty()) return std::nullopt;
  if (terms_.empty()) return Dim(0);
  if (d.terms_.size() == 1) {
    const auto& [dm, dc] = *d.terms_.begin();
    Dim r;
    for (const auto& [mono, coeff] : terms_) {
      if (coeff % dc != 0) return std::nullopt;
      Monomial rest = mono;
      for (const auto& s : dm) {
        auto it = std::find(rest.begin(), rest.end(), s);
        if (it == rest.end()) return std::nullopt;
        rest.erase(it);
      }
      r.terms_[rest] = coeff / dc;
    }
    return r;
  }
  // Polynomial divisor: accept only when this is an exact constant multiple of it.
  const auto& [m0, c0] = *terms_.begin();
  auto it = d.terms_.find(m0);
  if (it == d.terms_.end() || c0 % it->second != 0) return std::nullopt;
  Dim q(c0 / it->second);
  if (q * d == *this) return q;
  return std::nullopt;
}

Result<int64_t> Dim::Eval(const SymbolBindings& bindings) const {
  int64_t total = 0;
  for (const auto& [mono, coeff] : terms_) {
    int64_t v = coeff;
    for (const auto& s : mono) {
      auto it = bindings.find(s);
      if (it == bindings.end()) {
        return InvalidArgumentError("symbolic dimension '{}' has no value", s);
      }
      v *= it->second;
    }
    total += v;
  }
  return total;
}

std::string Dim::ToString() const {
  if (terms_.empty()) return "0";
  std::string out;
  // Constant last reads better: "batch*seq+1".
  auto emit = [&](const Monomial& mono, int64_t coeff) {
    bool first = out.empty();
    if (coeff < 0) {
      out += "-";
      coeff = -coeff;
    } else if (!first) {
      out += "+";
    }
    bool wrote = false;
    if (coeff != 1 || mono.empty()) {
      out += std::to_string(coeff);
      wrote = true;
    }
    for (const auto& s : mono) {
      if (wrote) out += "*";
      out += s;
      wrote = true;
    }
  };
  for (const auto& [mono, coeff] : terms_) {
    if (!mono.empty()) emit(mono, coeff);
  }
  auto c = terms_.find({});
  if (c != terms_.end()) emit({}, c->second);
  return out;
}

Result<Dim> Dim::Parse(std::string_view text) {
  auto bad = [&] { return InvalidArgumentError("bad dimension expression '{}'", text); };
  if (text.empty()) return bad();
  Dim result;
  size_t i = 0;
  while (i < text.size()) {
    int64_t sign = 1;
    if (text[i] == '+' || text[i] == '-') {
      sign = text[i] == '-' ? -1 : 1;
      ++i;
    } else if (i != 0) {
      return bad();
    }
    Dim term(sign);
    bool any = false;
    while (i < text.size() && text[i] != '+' && text[i] != '-') {
      if (text[i] == '*') {
        if (!any) return bad();
        ++i;
      }
      size_t j = i;
      if (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) {
        while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
        int64_t v = 0;
        auto [p, ec] = std::from_chars(text.data() + i, text.data() + j, v);
        if (ec != std::errc()) return bad();
        term = term * Dim(v);
      } else {
        while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) ||
                                   text[j] == '_' || text[j] == '.' || text[j] == ':')) {
          ++j;
        }
        if (j == i) return bad();
        term = term * Symbol(std::string(text.substr(i, j - i)));
      }
      any = true;
      i = j;
    }
    if (!any) return bad();
    result = result + term;
  }
  return result;
}

std::string SymShapeToString(const SymShape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += shape[i].ToString();
  }
  return s + "]";
}

Result<Shape> EvalShape(const SymShape& shape, const SymbolBindings& bindings) {
  Shape out;
  out.reserve(shape.size());
  for (const auto& d : shape) {
    SURGE_ASSIGN_OR_RETURN(int64_t v, d.Eval(bindings));
    out.push_back(v);
  }
  return out;
}

SymShape StaticShape(const Shape& shape) { return SymShape(shape.begin(), shape.end()); }

Dim NumElements(const SymShape& shape) {
  Dim n(1);
  for (const auto& d : shape) n = n * d;
  return n;
}

}  // namespace surge::engine::ir
