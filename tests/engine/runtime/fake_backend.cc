#include "fake_backend.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace surge::engine::testing {

namespace {

std::atomic<int> lower_calls{0};

class FakeContext final : public BackendContext {
 public:
  explicit FakeContext(std::shared_ptr<const ir::Graph> g) : g_(std::move(g)) {}
  Status Execute(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) override {
    std::map<int, Tensor> env;
    for (size_t i = 0; i < g_->inputs.size(); ++i) env[g_->inputs[i]] = inputs[i];
    auto get = [&](int id) {
      return g_->values[id].is_constant() ? g_->values[id].constant : env[id];
    };
    for (const auto& n : g_->nodes) {
      Tensor x = get(n.inputs[0]);
      if (n.op_type == "Identity") {
        env[n.outputs[0]] = x.Clone();
        continue;
      }
      if (x.dtype() != DType::kFloat32) return InvalidArgumentError("fake: float32 only");
      Tensor y(DType::kFloat32, x.shape());
      auto xs = x.span<float>();
      auto ys = y.span<float>();
      if (n.op_type == "Relu") {
        for (size_t i = 0; i < xs.size(); ++i) ys[i] = std::max(xs[i], 0.0f);
      } else {
        Tensor z = get(n.inputs[1]);
        auto zs = z.span<float>();
        for (size_t i = 0; i < xs.size(); ++i) {
          float r = zs.size() == 1 ? zs[0] : zs[i];
          ys[i] = n.op_type == "Add" ? xs[i] + r : xs[i] * r;
        }
      }
      env[n.outputs[0]] = y;
    }
    outputs->clear();
    for (int o : g_->outputs) outputs->push_back(env[o]);
    return Status::Ok();
  }

 private:
  std::shared_ptr<const ir::Graph> g_;
};

class FakeEngine final : public BackendEngine {
 public:
  explicit FakeEngine(std::shared_ptr<const ir::Graph> g) : g_(std::move(g)) {}
  Result<std::unique_ptr<BackendContext>> CreateContext() override {
    return std::unique_ptr<BackendContext>(std::make_unique<FakeContext>(g_));
  }
  std::string Describe() const override { return "fake engine"; }

 private:
  std::shared_ptr<const ir::Graph> g_;
};

class FakeBackend final : public Backend {
 public:
  std::string_view name() const override { return "fake"; }
  std::string DeviceArch() const override { return "fake-arch"; }
  Result<std::string> Lower(const ir::Graph& g, const BuilderConfig&) override {
    ++lower_calls;
    for (const auto& n : g.nodes) {
      if (n.op_type != "Add" && n.op_type != "Mul" && n.op_type != "Relu" &&
          n.op_type != "Identity") {
        return UnimplementedError("fake backend: no kernel for {}", n.op_type);
      }
    }
    return std::string(kFakeTactics);
  }
  Result<std::unique_ptr<BackendEngine>> Load(std::shared_ptr<const ir::Graph> g,
                                              std::span<const uint8_t> tactics,
                                              const BuilderConfig&, const EngineOptions&) override {
    if (std::string_view(reinterpret_cast<const char*>(tactics.data()), tactics.size()) !=
        kFakeTactics) {
      return DataLossError("fake backend: bad tactics blob");
    }
    return std::unique_ptr<BackendEngine>(std::make_unique<FakeEngine>(std::move(g)));
  }
};

}  // namespace

void RegisterFakeBackend() {
  static std::once_flag once;
  std::call_once(once, [] { RegisterBackend(std::make_unique<FakeBackend>()); });
}

int FakeLowerCalls() { return lower_calls.load(); }

ir::Graph MakeTestGraph() {
  using ir::Dim;
  ir::Graph g;
  g.name = "test";
  const ir::SymShape bs = {Dim::Symbol("batch"), Dim::Symbol("seq")};
  int a = g.AddInput("a", DType::kFloat32, bs);
  int b = g.AddInput("b", DType::kFloat32, bs);
  int scale = g.AddInput("scale", DType::kFloat32, {Dim(1)});
  int ids = g.AddInput("ids", DType::kInt64, bs);
  Tensor wt(DType::kFloat32, {1});
  wt.data_as<float>()[0] = 0.5f;
  int w = g.AddConstant("w", wt);
  auto add = [&](std::string op, std::vector<int> in, std::string out) {
    int o = g.AddValue(out, in[0] == ids ? DType::kInt64 : DType::kFloat32, bs);
    ir::Node n;
    n.op_type = std::move(op);
    n.name = out + "_node";
    n.inputs = std::move(in);
    n.outputs = {o};
    g.AddNode(std::move(n));
    return o;
  };
  int sum = add("Add", {a, b}, "sum");
  int scaled = add("Mul", {sum, scale}, "scaled");
  int biased = add("Add", {scaled, w}, "biased");
  int y = add("Relu", {biased}, "y");
  int ids_out = add("Identity", {ids}, "ids_out");
  g.outputs = {y, ids_out};
  return g;
}

}  // namespace surge::engine::testing
