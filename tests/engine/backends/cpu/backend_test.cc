// End to end: a hand-built encoder graph in fused form (plus generic ONNX ops) through
// Lower → Load → CreateContext → Execute, against the reference interpretation of the same graph.
#include <cstdlib>

#include "engine/backends/cpu/cpu_backend.h"
#include "op_harness.h"

namespace surge::engine::cpu {
namespace {

using namespace testing;
using ir::Dim;

constexpr int64_t kHidden = 40, kHeads = 4, kFfn = 72, kVocab = 30, kMaxPos = 40, kLabels = 3;

struct Model {
  ir::Graph graph;
};

// Embeddings → 2 encoder layers → [CLS] pooler (tanh) → classifier, with a few generic ONNX ops.
std::shared_ptr<ir::Graph> MakeEncoder(uint32_t seed) {
  Rng rng(seed);
  auto g = std::make_shared<ir::Graph>();
  const Dim b = Dim::Symbol("batch"), s = Dim::Symbol("seq");
  const ir::SymShape bsh{b, s, kHidden};
  int ids = g->AddInput("input_ids", DType::kInt64, {b, s});
  int mask = g->AddInput("attention_mask", DType::kInt64, {b, s});
  auto c = [&](const std::string& name, Tensor t) { return g->AddConstant(name, std::move(t)); };
  auto node = [&](std::string op, std::string domain, std::vector<int> in,
                  std::vector<std::pair<std::string, ir::SymShape>> outs,
                  std::map<std::string, ir::Attribute> attrs = {}, DType dt = DType::kFloat32) {
    ir::Node n;
    n.op_type = std::move(op);
    n.domain = std::move(domain);
    n.name = outs[0].first + "_node";
    n.inputs = std::move(in);
    n.attrs = std::move(attrs);
    std::vector<int> ids_out;
    for (auto& [name, shape] : outs) ids_out.push_back(g->AddValue(name, dt, shape));
    n.outputs = ids_out;
    g->AddNode(std::move(n));
    return ids_out[0];
  };
  const std::string surge(ir::kSurgeDomain);
  Tensor types(DType::kFloat32, {2, kHidden});
  int x = node("EmbedLayerNorm", surge,
               {ids, -1, -1, c("word", rng.Floats({kVocab, kHidden})),
                c("pos", rng.Floats({kMaxPos, kHidden})), c("type", rng.Floats({2, kHidden})),
                c("emb_g", rng.Floats({kHidden})), c("emb_b", rng.Floats({kHidden}))},
               {{"emb", bsh}}, {{"epsilon", 1e-12}});
  for (int l = 0; l < 2; ++l) {
    const std::string p = "l" + std::to_string(l) + "_";
    int qkv = node("Linear", surge,
                   {x, c(p + "wqkv", rng.Floats({kHidden, 3 * kHidden}, 0.3f)),
                    c(p + "bqkv", rng.Floats({3 * kHidden}))},
                   {{p + "qkv", {b, s, 3 * kHidden}}});
    int att = node("Attention", surge, {qkv, mask}, {{p + "att", bsh}}, {{"num_heads", kHeads}});
    int o = node("Linear", surge,
                 {att, c(p + "wo", rng.Floats({kHidden, kHidden}, 0.3f)),
                  c(p + "bo", rng.Floats({kHidden}))},
                 {{p + "o", bsh}});
    int x1 = node("SkipLayerNorm", surge,
                  {o, x, c(p + "g1", rng.Floats({kHidden})), c(p + "b1", rng.Floats({kHidden}))},
                  {{p + "x1", bsh}}, {{"epsilon", 1e-12}});
    int f =
        node("Linear", surge,
             {x1, c(p + "w1", rng.Floats({kHidden, kFfn}, 0.3f)), c(p + "b1f", rng.Floats({kFfn}))},
             {{p + "f", {b, s, kFfn}}}, {{"activation", std::string(l == 0 ? "gelu" : "none")}});
    if (l == 1) f = node("Gelu", surge, {f}, {{p + "fg", {b, s, kFfn}}});
    int f2 = node(
        "Linear", surge,
        {f, c(p + "w2", rng.Floats({kFfn, kHidden}, 0.3f)), c(p + "b2", rng.Floats({kHidden})), x1},
        {{p + "f2", bsh}});
    x = node("LayerNorm", surge,
             {f2, c(p + "g2", rng.Floats({kHidden})), c(p + "b2n", rng.Floats({kHidden}))},
             {{p + "out", bsh}}, {{"epsilon", 1e-12}});
  }
  Tensor zero(DType::kInt64, {});
  int cls = node("Gather", "", {x, c("cls_index", zero)}, {{"cls", {b, kHidden}}},
                 {{"axis", int64_t{1}}});
  int pooled =
      node("Linear", surge,
           {cls, c("wp", rng.Floats({kHidden, kHidden}, 0.3f)), c("bp", rng.Floats({kHidden}))},
           {{"pooled", {b, kHidden}}}, {{"activation", std::string("tanh")}});
  // Plain ONNX MatMul with a constant weight (runs on oneDNN) and a generic Add.
  int mm = node("MatMul", "", {pooled, c("wc", rng.Floats({kHidden, kLabels}, 0.3f))},
                {{"mm", {b, kLabels}}});
  int logits = node("Add", "", {mm, c("bc", rng.Floats({kLabels}))}, {{"logits", {b, kLabels}}});
  g->outputs = {logits, x};
  return g;
}

std::vector<Tensor> Reference(const ir::Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> vals(g.values.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) vals[g.inputs[i]] = inputs[i];
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].is_constant()) vals[v] = g.values[v].constant;
  }
  for (const ir::Node& n : g.nodes) {
    std::vector<Tensor> in, out;
    for (int id : n.inputs) in.push_back(id >= 0 ? vals[id] : Tensor());
    Status s = ir::EvalNode(n, in, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    for (size_t o = 0; o < out.size(); ++o) vals[n.outputs[o]] = out[o];
  }
  std::vector<Tensor> result;
  for (int id : g.outputs) result.push_back(vals[id]);
  return result;
}

std::vector<Tensor> Inputs(Rng& rng, const std::vector<int64_t>& lengths, int64_t seq) {
  const int64_t batch = static_cast<int64_t>(lengths.size());
  Tensor ids = rng.Ints({batch, seq}, 2, kVocab - 1);
  Tensor mask(DType::kInt64, {batch, seq});
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t si = 0; si < seq; ++si) {
      const bool real = si < lengths[bi];
      mask.data_as<int64_t>()[bi * seq + si] = real;
      if (!real) ids.data_as<int64_t>()[bi * seq + si] = 0;
    }
  }
  return {ids, mask};
}

BuilderConfig Config() {
  BuilderConfig config;
  config.profile = *Profile::Parse("input_ids:1x1,2x8,4x40;attention_mask:1x1,2x8,4x40");
  return config;
}

Backend& Cpu() {
  static std::unique_ptr<Backend> backend = CreateCpuBackend();
  return *backend;
}

class ScopedIsaEnv {
 public:
  explicit ScopedIsaEnv(Isa isa) { setenv("SURGE_CPU_ISA", std::string(IsaName(isa)).c_str(), 1); }
  ~ScopedIsaEnv() { unsetenv("SURGE_CPU_ISA"); }
};

TEST(CpuBackend, EncoderMatchesReferenceOnEveryIsa) {
  auto graph = MakeEncoder(21);
  Rng rng(22);
  for (Isa isa : AvailableIsas()) {
    ScopedIsaEnv env(isa);
    EXPECT_EQ(Cpu().DeviceArch(), "x86_64-" + std::string(IsaName(isa)));
    Result<std::string> blob = Cpu().Lower(*graph, Config());
    ASSERT_TRUE(blob.ok()) << blob.status().ToString();
    std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(blob->data()), blob->size());
    auto engine = Cpu().Load(graph, bytes, Config(), {});
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    const std::string desc = (*engine)->Describe();
    EXPECT_NE(desc.find("attention"), std::string::npos) << desc;
    EXPECT_NE(desc.find("linear(onednn)=10"), std::string::npos) << desc;
    EXPECT_NE(desc.find("generic(reference)=2"), std::string::npos) << desc;
    auto ctx = (*engine)->CreateContext();
    ASSERT_TRUE(ctx.ok());
    // Alternate shapes so the per-shape plan is both rebuilt and reused.
    const std::vector<std::pair<std::vector<int64_t>, int64_t>> shapes = {
        {{8, 5}, 8}, {{1}, 1}, {{7, 3, 1}, 7}, {{8, 5}, 8}, {{33, 20, 1, 33}, 33}, {{8, 8}, 8}};
    for (const auto& [lengths, seq] : shapes) {
      std::vector<Tensor> in = Inputs(rng, lengths, seq);
      std::vector<Tensor> out;
      Status s = (*ctx)->Execute(in, &out);
      ASSERT_TRUE(s.ok()) << s.ToString();
      std::vector<Tensor> ref = Reference(*graph, in);
      ASSERT_EQ(out.size(), 2u);
      ExpectClose(out[0], ref[0], 1e-4, fmt::format("{} logits seq={}", IsaName(isa), seq));
      ExpectClose(out[1], ref[1], 1e-4, fmt::format("{} hidden seq={}", IsaName(isa), seq));
    }
  }
}

TEST(CpuBackend, ContextsShareOneEngine) {
  auto graph = MakeEncoder(31);
  Result<std::string> blob = Cpu().Lower(*graph, Config());
  ASSERT_TRUE(blob.ok());
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(blob->data()), blob->size());
  auto engine = Cpu().Load(graph, bytes, Config(), {});
  ASSERT_TRUE(engine.ok());
  auto c1 = (*engine)->CreateContext();
  auto c2 = (*engine)->CreateContext();
  Rng rng(32);
  std::vector<Tensor> a = Inputs(rng, {4, 2}, 4), b = Inputs(rng, {6}, 6);
  std::vector<Tensor> oa, ob;
  ASSERT_TRUE((*c1)->Execute(a, &oa).ok());
  ASSERT_TRUE((*c2)->Execute(b, &ob).ok());
  ExpectClose(oa[0], Reference(*graph, a)[0], 1e-4, "context 1");
  ExpectClose(ob[0], Reference(*graph, b)[0], 1e-4, "context 2");
}

TEST(CpuBackend, RejectsCorruptBlobs) {
  auto graph = MakeEncoder(41);
  Result<std::string> blob = Cpu().Lower(*graph, Config());
  ASSERT_TRUE(blob.ok());
  auto load = [&](const std::string& b) {
    std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(b.data()), b.size());
    return Cpu().Load(graph, bytes, Config(), {});
  };
  // Every truncation is a clean error.
  for (size_t cut :
       {size_t{0}, size_t{3}, size_t{9}, size_t{40}, blob->size() / 2, blob->size() - 1}) {
    auto r = load(blob->substr(0, cut));
    EXPECT_FALSE(r.ok()) << "cut at " << cut;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    }
  }
  std::string bad_magic = *blob;
  bad_magic[0] ^= 0x55;
  EXPECT_NE(load(bad_magic).status().message().find("magic"), std::string::npos);
  std::string bad_version = *blob;
  bad_version[4] = 99;
  EXPECT_EQ(load(bad_version).status().code(), StatusCode::kFailedPrecondition);
  // An ISA name this build does not know.
  std::string bad_isa = *blob;
  const size_t at = bad_isa.find(std::string(IsaName(DefaultIsa())));
  ASSERT_NE(at, std::string::npos);
  bad_isa[at] = 'q';
  EXPECT_EQ(load(bad_isa).status().code(), StatusCode::kDataLoss);
  // A blob lowered from another graph does not fit this one.
  auto other = std::make_shared<ir::Graph>(*graph);
  other->nodes.pop_back();
  other->outputs = {other->nodes.back().outputs[0]};
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(blob->data()), blob->size());
  auto mismatch = Cpu().Load(other, bytes, Config(), {});
  EXPECT_NE(mismatch.status().message().find("nodes"), std::string::npos);
}

TEST(CpuBackend, RefusesPlansForAnIsaTheCpuLacks) {
  if (!CpuSupports(Isa::kAvx512)) {
    GTEST_SKIP() << "needs an AVX-512 CPU to build a plan an AVX2-only CPU cannot run";
  }
  auto graph = MakeEncoder(51);
  Result<std::string> blob = Cpu().Lower(*graph, Config());
  ASSERT_TRUE(blob.ok());
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(blob->data()), blob->size());
  // SURGE_CPU_ISA=avx2 makes this CPU look like an AVX2-only one.
  ScopedIsaEnv env(Isa::kAvx2);
  auto r = Cpu().Load(graph, bytes, Config(), {});
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("x86_64-avx512"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("only x86_64-avx2"), std::string::npos)
      << r.status().ToString();
}

TEST(CpuBackend, BadRequestsGetClearErrors) {
  auto graph = MakeEncoder(61);
  Result<std::string> blob = Cpu().Lower(*graph, Config());
  ASSERT_TRUE(blob.ok());
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(blob->data()), blob->size());
  auto engine = Cpu().Load(graph, bytes, Config(), {});
  ASSERT_TRUE(engine.ok());
  auto ctx = (*engine)->CreateContext();
  Rng rng(62);
  std::vector<Tensor> out;
  std::vector<Tensor> in = Inputs(rng, {3, 2}, 3);
  std::vector<Tensor> one{in[0]};
  EXPECT_EQ((*ctx)->Execute(one, &out).code(), StatusCode::kInvalidArgument);
  std::vector<Tensor> mismatched{in[0], Inputs(rng, {4, 4}, 4)[1]};
  Status s = (*ctx)->Execute(mismatched, &out);
  EXPECT_NE(s.message().find("seq"), std::string::npos) << s.ToString();
  in[0].data_as<int64_t>()[1] = kVocab + 5;
  s = (*ctx)->Execute(in, &out);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
  EXPECT_NE(s.message().find("input id 35"), std::string::npos) << s.ToString();
  // The context still works after errors.
  std::vector<Tensor> good = Inputs(rng, {2}, 2);
  ASSERT_TRUE((*ctx)->Execute(good, &out).ok());
  ExpectClose(out[0], Reference(*graph, good)[0], 1e-4, "after errors");
}

TEST(CpuBackend, LowerRejectsOpsWithoutAnyKernel) {
  ir::Graph g;
  int x = g.AddInput("x", DType::kFloat32, {Dim(2)});
  ir::Node n;
  n.op_type = "FancyOp";
  n.name = "fancy";
  n.inputs = {x};
  n.outputs = {g.AddValue("y", DType::kFloat32, ir::SymShape{Dim(2)})};
  g.AddNode(n);
  g.outputs = {n.outputs[0]};
  Result<std::string> blob = Cpu().Lower(g, BuilderConfig{});
  EXPECT_EQ(blob.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(blob.status().message().find("FancyOp"), std::string::npos);
}

}  // namespace
}  // namespace surge::engine::cpu
