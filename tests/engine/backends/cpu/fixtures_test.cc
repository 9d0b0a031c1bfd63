// Every model fixture (tests/fixtures/models: tiny random-weight BERT/RoBERTa/DistilBERT/ELECTRA,
// both ONNX exporters and the Hugging Face checkpoint) imported, optimised, lowered for the CPU
// backend and run on the stored inputs: logits must match PyTorch's within 1e-4 relative.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/backends/cpu/cpu_backend.h"
#include "engine/builder/builder.h"
#include "op_harness.h"

namespace surge::engine::cpu {
namespace {

namespace fs = std::filesystem;
using namespace testing;

const fs::path kModels = fs::path(SURGE_SOURCE_DIR) / "tests/fixtures/models";

Tensor FromJson(const nlohmann::json& j, DType dtype) {
  Shape shape = j["shape"].get<Shape>();
  Tensor t(dtype, shape);
  const auto& data = j["data"];
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::kInt64) {
      t.data_as<int64_t>()[i] = data[i].get<int64_t>();
    } else {
      t.data_as<float>()[i] = data[i].get<float>();
    }
  }
  return t;
}

struct Case {
  std::string folder, model;
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  if (!fs::exists(kModels)) return out;
  for (const auto& dir : fs::directory_iterator(kModels)) {
    if (!dir.is_directory() || !fs::exists(dir.path() / "reference.json")) continue;
    for (const char* m : {"model.torchscript.onnx", "model.dynamo.onnx", "hf"}) {
      if (fs::exists(dir.path() / m)) out.push_back({dir.path().filename().string(), m});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Case& a, const Case& b) { return a.folder + a.model < b.folder + b.model; });
  return out;
}

class CpuFixtures : public ::testing::TestWithParam<Case> {};

TEST_P(CpuFixtures, LogitsMatchPyTorch) {
  const Case& c = GetParam();
  const fs::path folder = kModels / c.folder;
  builder::BuildReport report;
  Result<ir::Graph> graph =
      builder::ImportAndOptimize((folder / c.model).string(), passes::PassOptions{}, &report);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto shared = std::make_shared<ir::Graph>(std::move(graph).value());
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  BuilderConfig config;
  Result<Profile> profile = builder::ResolveProfile(*shared, Profile{});
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  config.profile = *profile;
  Result<std::string> blob = backend->Lower(*shared, config);
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(blob->data()), blob->size());
  auto engine = backend->Load(shared, bytes, config, {});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto ctx = (*engine)->CreateContext();
  ASSERT_TRUE(ctx.ok());

  std::ifstream f(folder / "reference.json");
  const nlohmann::json ref = nlohmann::json::parse(f);
  int logits_index = -1;
  for (size_t i = 0; i < shared->outputs.size(); ++i) {
    if (shared->values[shared->outputs[i]].name == "logits") logits_index = static_cast<int>(i);
  }
  ASSERT_GE(logits_index, 0) << "no output named logits";
  for (const auto& rc : ref) {
    std::vector<Tensor> inputs;
    for (int id : shared->inputs) {
      const std::string& name = shared->values[id].name;
      ASSERT_TRUE(rc["inputs"].contains(name)) << "reference has no input " << name;
      inputs.push_back(FromJson(rc["inputs"][name], DType::kInt64));
    }
    std::vector<Tensor> out;
    Status s = (*ctx)->Execute(inputs, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    Tensor expect = FromJson(rc["outputs"]["logits"], DType::kFloat32);
    ExpectClose(out[logits_index], expect, 1e-4,
                c.folder + "/" + c.model + " batch " + std::to_string(expect.dim(0)));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CpuFixtures, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.folder + "_" + info.param.model;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CpuFixtures);

}  // namespace
}  // namespace surge::engine::cpu
