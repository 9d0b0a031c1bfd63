#include "engine/backends/cpu/cpu_backend.h"

namespace surge::engine::cpu {

namespace {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  std::string DeviceArch() const override { return "x86_64"; }
  Result<std::string> Lower(const ir::Graph&, const BuilderConfig&) override {
    return UnimplementedError("the CPU backend cannot lower graphs yet");
  }
  Result<std::unique_ptr<BackendEngine>> Load(std::shared_ptr<const ir::Graph>,
                                              std::span<const uint8_t>, const BuilderConfig&,
                                              const EngineOptions&) override {
    return UnimplementedError("the CPU backend cannot load plans yet");
  }
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace surge::engine::cpu
