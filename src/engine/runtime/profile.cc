#include "engine/runtime/profile.h"

namespace surge::engine {

const InputProfile* Profile::Find(std::string_view name) const {
  for (const auto& p : inputs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Status Profile::Check(std::string_view name, const Shape& shape) const {
  const InputProfile* p = Find(name);
  if (p == nullptr) return Status::Ok();
  bool ok = shape.size() == p->min.size();
  for (size_t i = 0; ok && i < shape.size(); ++i) {
    ok = shape[i] >= p->min[i] && shape[i] <= p->max[i];
  }
  if (!ok) {
    return OutOfRangeError("input '{}' has shape {}, outside the profile range {} .. {}", name,
                           ShapeToString(shape), ShapeToString(p->min), ShapeToString(p->max));
  }
  return Status::Ok();
}

Result<Profile> Profile::Parse(std::string_view text) {
  Profile profile;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(';', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    size_t colon = item.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return InvalidArgumentError(
          "bad profile '{}': expected NAME:MIN,OPT,MAX like "
          "input_ids:1x1,8x128,64x512",
          item);
    }
    InputProfile ip;
    ip.name = std::string(item.substr(0, colon));
    std::string_view shapes = item.substr(colon + 1);
    std::vector<Shape> parsed;
    size_t sp = 0;
    while (sp <= shapes.size()) {
      size_t comma = shapes.find(',', sp);
      if (comma == std::string_view::npos) comma = shapes.size();
      auto s = ParseShape(shapes.substr(sp, comma - sp));
      if (!s.ok()) return s.status().WithContext("profile for '" + ip.name + "'");
      parsed.push_back(std::move(s).value());
      sp = comma + 1;
    }
    if (parsed.size() != 3) {
      return InvalidArgumentError("profile for '{}' needs three shapes MIN,OPT,MAX; got {}",
                                  ip.name, parsed.size());
    }
    ip.min = parsed[0];
    ip.opt = parsed[1];
    ip.max = parsed[2];
    if (ip.min.size() != ip.opt.size() || ip.opt.size() != ip.max.size()) {
      return InvalidArgumentError("profile for '{}': MIN, OPT and MAX must have the same rank",
                                  ip.name);
    }
    for (size_t i = 0; i < ip.min.size(); ++i) {
      if (!(ip.min[i] <= ip.opt[i] && ip.opt[i] <= ip.max[i]) || ip.min[i] < 1) {
        return InvalidArgumentError(
            "profile for '{}': need 1 <= MIN <= OPT <= MAX in every "
            "dimension, got {} {} {}",
            ip.name, ShapeToString(ip.min), ShapeToString(ip.opt), ShapeToString(ip.max));
      }
    }
    if (profile.Find(ip.name)) {
      return InvalidArgumentError("input '{}' appears twice in the profile", ip.name);
    }
    profile.inputs.push_back(std::move(ip));
  }
  return profile;
}

std::string Profile::ToString() const {
  std::string s;
  auto dims = [](const Shape& sh) {
    std::string r;
    for (size_t i = 0; i < sh.size(); ++i) r += (i ? "x" : "") + std::to_string(sh[i]);
    return r;
  };
  for (const auto& p : inputs) {
    if (!s.empty()) s += ";";
    s += p.name + ":" + dims(p.min) + "," + dims(p.opt) + "," + dims(p.max);
  }
  return s;
}

}  // namespace surge::engine
