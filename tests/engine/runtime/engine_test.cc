#include "engine/runtime/engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "engine/builder/builder.h"
#include "engine/plan/plan_file.h"
#include "fake_backend.h"

namespace surge::engine {
namespace {

using testing::MakeTestGraph;

std::span<const uint8_t> Span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string BuildFakePlan(const Profile& profile = {}) {
  testing::RegisterFakeBackend();
  BuilderConfig config;
  config.backend = "fake";
  config.profile = profile;
  builder::BuildReport report;
  auto bytes = builder::BuildPlanFromGraph(MakeTestGraph(), config, &report);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(report.plan_bytes, bytes.ok() ? bytes->size() : 0);
  return bytes.ok() ? *bytes : std::string();
}

std::shared_ptr<const Engine> LoadFake(const Profile& profile = {}) {
  auto engine = Engine::LoadFromMemory(Span(BuildFakePlan(profile)));
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return engine.ok() ? *engine : nullptr;
}

Tensor Floats(Shape shape, float start) {
  Tensor t(DType::kFloat32, std::move(shape));
  auto s = t.span<float>();
  for (size_t i = 0; i < s.size(); ++i) s[i] = start + 0.25f * static_cast<float>(i) - 1.0f;
  return t;
}

template <typename T>
Tensor Ints(DType dt, Shape shape) {
  Tensor t(dt, std::move(shape));
  auto s = t.span<T>();
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<T>(100 + i);
  return t;
}

TensorMap Inputs(int64_t batch, int64_t seq, float start = 0.0f) {
  Tensor scale(DType::kFloat32, {1});
  scale.data_as<float>()[0] = 2.0f;
  return {{"a", Floats({batch, seq}, start)},
          {"b", Floats({batch, seq}, 1.5f)},
          {"scale", scale},
          {"ids", Ints<int64_t>(DType::kInt64, {batch, seq})}};
}

std::vector<float> Expected(const TensorMap& in) {
  auto a = in.at("a").span<float>();
  auto b = in.at("b").span<float>();
  float scale = in.at("scale").data_as<float>()[0];
  std::vector<float> y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = std::max((a[i] + b[i]) * scale + 0.5f, 0.0f);
  return y;
}

void ExpectError(const Result<TensorMap>& r, StatusCode code, std::vector<std::string> parts) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  for (const auto& p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << r.status().message();
  }
}

TEST(Engine, MetadataAndDefaultProfile) {
  auto engine = LoadFake();
  ASSERT_NE(engine, nullptr);
  ASSERT_EQ(engine->inputs().size(), 4u);
  EXPECT_EQ(engine->inputs()[0].name, "a");
  EXPECT_EQ(engine->inputs()[0].dtype, DType::kFloat32);
  EXPECT_EQ(ir::SymShapeToString(engine->inputs()[0].shape), "[batch,seq]");
  EXPECT_EQ(engine->inputs()[3].dtype, DType::kInt64);
  ASSERT_EQ(engine->outputs().size(), 2u);
  EXPECT_EQ(engine->outputs()[0].name, "y");
  EXPECT_EQ(engine->backend_name(), "fake");
  EXPECT_EQ(engine->device_arch(), "fake-arch");
  EXPECT_EQ(engine->Describe(), "fake engine");
  EXPECT_EQ(engine->plan_config().surge_version, SurgeVersion());
  // batch 1..64 opt 8, seq 1..512 opt 128 for every dynamic input; static inputs need none.
  const InputProfile* a = engine->profile().Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->min, (Shape{1, 1}));
  EXPECT_EQ(a->opt, (Shape{8, 128}));
  EXPECT_EQ(a->max, (Shape{64, 512}));
  EXPECT_NE(engine->profile().Find("ids"), nullptr);
  EXPECT_EQ(engine->profile().Find("scale"), nullptr);
}

// The tactic search a plan was built with travels in its config; plans written before it existed
// read as the heuristic search, and a value that is neither is a data error.
TEST(Engine, PlanConfigKeepsTheTacticSearch) {
  PlanConfig c;
  c.surge_version = "test";
  c.builder.backend = "cuda";
  c.builder.full_tactic_search = true;
  auto back = PlanConfigFromJson(PlanConfigToJson(c));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->builder.full_tactic_search);
  c.builder.full_tactic_search = false;
  std::string text = PlanConfigToJson(c);
  EXPECT_NE(text.find("\"heuristic\""), std::string::npos);
  back = PlanConfigFromJson(text);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->builder.full_tactic_search);
  const size_t at = text.find("\"heuristic\"");
  std::string old = text;
  old.replace(at, std::strlen("\"heuristic\""), "\"exhaustive\"");
  back = PlanConfigFromJson(old);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(back.status().message().find("tactic_search"), std::string::npos);
  const size_t key = text.find("\"tactic_search\"");
  ASSERT_NE(key, std::string::npos);
  const size_t end = text.find('\n', key);
  old = text.substr(0, key) + text.substr(end + 1);
  back = PlanConfigFromJson(old);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << old;
  EXPECT_FALSE(back->builder.full_tactic_search);
}

TEST(Engine, RunsAndConstantsAreZeroCopy) {
  auto engine = LoadFake();
  ASSERT_NE(engine, nullptr);
  auto ctx = engine->CreateContext();
  ASSERT_TRUE(ctx.ok());
  TensorMap in = Inputs(2, 3);
  auto out = (*ctx)->Run(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  const Tensor& y = out->at("y");
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  auto expected = Expected(in);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_FLOAT_EQ(y.span<float>()[i], expected[i]);
  EXPECT_EQ(out->at("ids_out").span<int64_t>()[5], 105);

  const ir::Graph& g = engine->graph();
  const Tensor& w = g.values[g.FindValue("w")].constant;
  auto weights = engine->plan().Section(plan::kWeightsSection);
  ASSERT_TRUE(weights.ok());
  auto* p = static_cast<const uint8_t*>(w.data());
  EXPECT_TRUE(p >= weights->data() && p < weights->data() + weights->size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
}

TEST(Engine, LoadsFromFileAndContextOutlivesEngineHandle) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("engine_test." + std::to_string(getpid())))
          .string();
  ASSERT_TRUE(plan::WriteFileAtomically(path, BuildFakePlan()).ok());
  auto loaded = Engine::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  std::shared_ptr<const Engine> engine = std::move(loaded).value();
  auto ctx = engine->CreateContext();
  ASSERT_TRUE(ctx.ok());
  engine.reset();                 // the context keeps the engine alive
  std::filesystem::remove(path);  // the mapping stays valid
  TensorMap in = Inputs(1, 4);
  auto out = (*ctx)->Run(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FLOAT_EQ(out->at("y").span<float>()[3], Expected(in)[3]);
}

TEST(Engine, Int32IdsAreWidened) {
  auto engine = LoadFake();
  ASSERT_NE(engine, nullptr);
  auto ctx = engine->CreateContext();
  ASSERT_TRUE(ctx.ok());
  TensorMap in = Inputs(2, 2);
  in["ids"] = Ints<int32_t>(DType::kInt32, {2, 2});
  auto out = (*ctx)->Run(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at("ids_out").dtype(), DType::kInt64);
  EXPECT_EQ(out->at("ids_out").span<int64_t>()[3], 103);
}

TEST(Engine, BadInputsGiveClearErrors) {
  auto engine = LoadFake();
  ASSERT_NE(engine, nullptr);
  auto ctx = engine->CreateContext().value();

  TensorMap in = Inputs(2, 3);
  in.erase("b");
  ExpectError(ctx->Run(in), StatusCode::kInvalidArgument, {"missing input 'b'", "[batch,seq]"});

  in = Inputs(2, 3);
  in["extra"] = Floats({1}, 0);
  ExpectError(ctx->Run(in), StatusCode::kInvalidArgument, {"unknown input 'extra'", "a, b"});

  in = Inputs(2, 3);
  in["a"] = Tensor(DType::kFloat64, {2, 3});
  ExpectError(ctx->Run(in), StatusCode::kInvalidArgument,
              {"input 'a' has dtype float64, expected float32"});

  in = Inputs(2, 3);
  in["b"] = Floats({2, 3, 1}, 0);
  ExpectError(ctx->Run(in), StatusCode::kInvalidArgument, {"input 'b' has rank 3", "rank 2"});

  in = Inputs(2, 3);
  in["scale"] = Floats({2}, 0);
  ExpectError(ctx->Run(in), StatusCode::kInvalidArgument, {"input 'scale'", "dim 0 must be 1"});

  in = Inputs(2, 3);
  in["b"] = Floats({2, 4}, 0);  // seq differs from a's
  ExpectError(ctx->Run(in), StatusCode::kInvalidArgument,
              {"input 'b'", "('seq') is 4", "input 'a' dim 1 set 'seq' to 3"});

  in = Inputs(2, 3);
  in["ids"] = Ints<int64_t>(DType::kInt64, {3, 3});  // batch differs
  ExpectError(ctx->Run(in), StatusCode::kInvalidArgument, {"input 'ids'", "'batch'"});

  // Nothing was lost: the context still runs correct inputs.
  in = Inputs(2, 3);
  auto out = ctx->Run(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FLOAT_EQ(out->at("y").span<float>()[4], Expected(in)[4]);
}

TEST(Engine, ProfileViolationNamesInputAndRange) {
  auto engine = LoadFake();
  ASSERT_NE(engine, nullptr);
  auto ctx = engine->CreateContext().value();
  ExpectError(ctx->Run(Inputs(1, 513)), StatusCode::kOutOfRange,
              {"input 'a'", "[1,513]", "[1,1] .. [64,512]"});
  ExpectError(ctx->Run(Inputs(65, 2)), StatusCode::kOutOfRange, {"input 'a'", "[64,512]"});
}

TEST(Engine, GivenProfileIsKeptAndSharedSymbolsFollowIt) {
  auto profile = Profile::Parse("a:1x1,2x4,4x8");
  ASSERT_TRUE(profile.ok());
  auto engine = LoadFake(*profile);
  ASSERT_NE(engine, nullptr);
  const InputProfile* b = engine->profile().Find("b");
  ASSERT_NE(b, nullptr);  // b shares a's symbols, so it gets a's ranges, not the defaults
  EXPECT_EQ(b->max, (Shape{4, 8}));
  auto ctx = engine->CreateContext().value();
  EXPECT_TRUE(ctx->Run(Inputs(4, 8)).ok());
  ExpectError(ctx->Run(Inputs(4, 9)), StatusCode::kOutOfRange, {"input 'a'", "[4,8]"});
}

TEST(Engine, ContextsOnManyThreadsAgree) {
  auto engine = LoadFake();
  ASSERT_NE(engine, nullptr);
  constexpr int kThreads = 4;
  constexpr int kRuns = 50;
  std::vector<std::vector<std::vector<float>>> results(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto ctx = engine->CreateContext();
      if (!ctx.ok()) {
        ++failures;
        return;
      }
      for (int r = 0; r < kRuns; ++r) {
        auto out = (*ctx)->Run(Inputs(1 + r % 3, 1 + r % 7, static_cast<float>(r)));
        if (!out.ok()) {
          ++failures;
          return;
        }
        auto y = out->at("y").span<float>();
        results[t].emplace_back(y.begin(), y.end());
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  for (int r = 0; r < kRuns; ++r) {
    auto expected = Expected(Inputs(1 + r % 3, 1 + r % 7, static_cast<float>(r)));
    for (int t = 0; t < kThreads; ++t) ASSERT_EQ(results[t][r], expected) << t << " " << r;
  }
}

// Replaces the header fields of a good plan by rewriting it with the same sections.
std::string Rewrap(const std::string& good, std::string backend, std::string arch) {
  auto plan = plan::PlanFile::FromBytes(Span(good));
  EXPECT_TRUE(plan.ok());
  plan::PlanWriter w(std::move(backend), std::move(arch));
  for (const auto& s : (*plan)->sections()) {
    EXPECT_TRUE(w.AddSection(s.name, *(*plan)->Section(s.name)).ok());
  }
  return *w.Finish();
}

TEST(Engine, UnknownBackendAndWrongArchAreRejected) {
  const std::string good = BuildFakePlan();
  auto r = Engine::LoadFromMemory(Span(Rewrap(good, "nosuch", "fake-arch")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("backend 'nosuch'"), std::string::npos);
  EXPECT_NE(r.status().message().find("fake"), std::string::npos);  // lists what is available

  r = Engine::LoadFromMemory(Span(Rewrap(good, "fake", "other-arch")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("'other-arch'"), std::string::npos);
  EXPECT_NE(r.status().message().find("this machine is 'fake-arch'"), std::string::npos);
}

TEST(Engine, DefaultPrecisionIsTheBackendsOwn) {
  testing::RegisterFakeBackend();
  EXPECT_EQ(DefaultPrecision("cpu"), Precision::kFp32);
  EXPECT_EQ(DefaultPrecision("fake"), Precision::kFp32);  // the Backend interface's default
  EXPECT_EQ(DefaultPrecision("nosuch"), Precision::kFp32);
  if (FindBackend("cuda") != nullptr) {
    EXPECT_EQ(DefaultPrecision("cuda"), Precision::kFp16);
  }
}

TEST(Engine, CorruptPlansNeverLoad) {
  const std::string good = BuildFakePlan();
  auto plan = plan::PlanFile::FromBytes(Span(good));
  ASSERT_TRUE(plan.ok());
  const auto* graph = (*plan)->FindSection(plan::kGraphSection);
  ASSERT_NE(graph, nullptr);
  std::string bad = good;
  bad[graph->offset + graph->size / 2] ^= 0x20;
  auto r = Engine::LoadFromMemory(Span(bad));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("section 'graph' is corrupt"), std::string::npos)
      << r.status().message();
  // Without the config section the plan is incomplete.
  plan::PlanWriter w("fake", "fake-arch");
  for (const auto& s : (*plan)->sections()) {
    if (s.name != plan::kConfigSection) {
      ASSERT_TRUE(w.AddSection(s.name, *(*plan)->Section(s.name)).ok());
    }
  }
  r = Engine::LoadFromMemory(Span(*w.Finish()));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no 'config' section"), std::string::npos);
}

}  // namespace
}  // namespace surge::engine
