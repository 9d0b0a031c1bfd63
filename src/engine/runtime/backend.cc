#include "engine/runtime/backend.h"

#include <map>
#include <mutex>

namespace surge::engine {

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
    case Precision::kInt8:
      return "int8";
    case Precision::kFp8:
      return "fp8";
  }
  return "fp32";
}

Result<Precision> ParsePrecision(std::string_view name) {
  for (Precision p :
       {Precision::kFp32, Precision::kFp16, Precision::kBf16, Precision::kInt8, Precision::kFp8}) {
    if (PrecisionName(p) == name) return p;
  }
  return InvalidArgumentError("unknown precision '{}' (valid: fp32, fp16, bf16, int8, fp8)", name);
}

namespace {
std::map<std::string, std::unique_ptr<Backend>, std::less<>>& RawBackends() {
  static std::map<std::string, std::unique_ptr<Backend>, std::less<>> backends;
  return backends;
}
std::map<std::string, std::unique_ptr<Backend>, std::less<>>& Backends() {
  static std::once_flag once;
  std::call_once(once, [] { RegisterBuiltinBackends(); });
  return RawBackends();
}
}  // namespace

void RegisterBackend(std::unique_ptr<Backend> backend) {
  std::string name(backend->name());
  RawBackends()[name] = std::move(backend);
}

Backend* FindBackend(std::string_view name) {
  auto& b = Backends();
  auto it = b.find(name);
  return it == b.end() ? nullptr : it->second.get();
}

Precision DefaultPrecision(std::string_view backend) {
  const Backend* b = FindBackend(backend);
  return b ? b->DefaultPrecision() : Precision::kFp32;
}

std::vector<std::string> BackendNames() {
  std::vector<std::string> names;
  for (auto& [k, v] : Backends()) names.push_back(k);
  return names;
}

}  // namespace surge::engine
