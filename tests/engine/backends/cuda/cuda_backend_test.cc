// The CUDA backend end to end on a small fused encoder graph: against the reference evaluator,
// padded vs padding-free, eager vs CUDA-graph replay, several contexts; and the errors that need
// no GPU (unsupported graphs, corrupt blobs, no device).
#include "engine/backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "engine/backends/cuda/gemm.h"
#include "engine/backends/cuda/lowering.h"
#include "engine/backends/cuda/qgemm_kernels.h"
#include "op_test_harness.h"

namespace surge::engine::cuda::testing {
namespace {

constexpr int64_t kH = 128, kHeads = 2, kFfn = 256, kVocab = 60, kMaxPos = 64;

struct Encoder {
  std::shared_ptr<ir::Graph> graph = std::make_shared<ir::Graph>();
};

// Two encoder layers in fused form, last hidden state and a tanh pooler over [CLS].
// With `heads`, also the demo model's other heads: an L2-normalised [CLS] embedding and a per-token
// keyword logit (a one-column Linear, squeezed to [B,S]).
std::shared_ptr<ir::Graph> MakeEncoder(std::mt19937& rng, bool with_gather = true,
                                       bool heads = false) {
  auto g = std::make_shared<ir::Graph>();
  auto w = [&](const std::string& name, Shape s, float scale = 0.1f) {
    return g->AddConstant(name, Random(std::move(s), rng, DataType::kF16, -scale, scale));
  };
  auto one = [&](const std::string& name) {
    return g->AddConstant(name, Random({kH}, rng, DataType::kF16, 0.8f, 1.2f));
  };
  const ir::SymShape bs = {ir::Dim::Symbol("batch"), ir::Dim::Symbol("seq")};
  const int ids = g->AddInput("input_ids", DType::kInt64, bs);
  const int mask = g->AddInput("attention_mask", DType::kInt64, bs);
  auto node = [&](std::string op, std::vector<int> in, std::map<std::string, ir::Attribute> attrs,
                  int n_out = 1, std::string domain = std::string(ir::kSurgeDomain)) {
    ir::Node n;
    n.op_type = op;
    n.domain = domain;
    n.name = g->UniqueName(op);
    n.inputs = std::move(in);
    n.attrs = std::move(attrs);
    for (int i = 0; i < n_out; ++i)
      n.outputs.push_back(g->AddValue(n.name + "_out", DType::kFloat32));
    g->AddNode(n);
    return g->nodes.back().outputs;
  };
  int x = node("EmbedLayerNorm",
               {ids, -1, -1, w("word", {kVocab, kH}, 1.f), w("pos", {kMaxPos, kH}, 1.f), -1,
                one("eg"), w("eb", {kH}), mask},
               {{"epsilon", 1e-12}})[0];
  for (int layer = 0; layer < 2; ++layer) {
    const int qkv = node("Linear", {x, w("wqkv", {kH, 3 * kH}), w("bqkv", {3 * kH})}, {})[0];
    const int att = node("Attention", {qkv, mask}, {{"num_heads", kHeads}})[0];
    const int proj = node("Linear", {att, w("wo", {kH, kH}), w("bo", {kH})}, {})[0];
    const int ln1 =
        node("SkipLayerNorm", {proj, x, one("g1"), w("b1", {kH})}, {{"epsilon", 1e-12}})[0];
    const int ff = node("Linear", {ln1, w("w1", {kH, kFfn}), w("bf1", {kFfn})},
                        {{"activation", std::string("gelu")}})[0];
    const int ff2 = node("Linear", {ff, w("w2", {kFfn, kH}), w("bf2", {kH}), ln1}, {})[0];
    x = node("LayerNorm", {ff2, one("g2"), w("b2", {kH})}, {{"epsilon", 1e-12}})[0];
  }
  g->outputs.push_back(x);
  if (with_gather) {
    Tensor zero(DType::kInt64, Shape{});
    const int idx = g->AddConstant("zero", zero);
    const int cls = node("Gather", {x, idx}, {{"axis", int64_t{1}}}, 1, "")[0];
    const int pooled = node("Linear", {cls, w("wp", {kH, kH}), w("bp", {kH})},
                            {{"activation", std::string("tanh")}})[0];
    g->outputs.push_back(pooled);
    if (heads) {
      g->outputs.push_back(node("L2Normalize", {cls}, {{"epsilon", 1e-12}})[0]);
      const int kw = node("Linear", {x, w("wk", {kH, 1}), w("bk", {1})}, {})[0];
      Tensor axes(DType::kInt64, Shape{1});
      axes.data_as<int64_t>()[0] = -1;
      g->outputs.push_back(node("Squeeze", {kw, g->AddConstant("axes", axes)}, {}, 1, "")[0]);
    }
  }
  return g;
}

// Runs the graph node by node with the reference evaluator.
std::vector<Tensor> RunReference(const ir::Graph& g, const std::vector<Tensor>& inputs) {
  std::map<int, Tensor> vals;
  for (size_t i = 0; i < g.inputs.size(); ++i) vals[g.inputs[i]] = inputs[i];
  for (const ir::Node& n : g.nodes) {
    std::vector<Tensor> in;
    for (int v : n.inputs) {
      in.push_back(v < 0 ? Tensor() : g.values[v].is_constant() ? g.values[v].constant : vals[v]);
    }
    std::vector<Tensor> out;
    Status st = ir::EvalNode(n, in, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    for (size_t k = 0; k < n.outputs.size() && k < out.size(); ++k) vals[n.outputs[k]] = out[k];
  }
  std::vector<Tensor> outs;
  for (int o : g.outputs) outs.push_back(vals[o]);
  return outs;
}

BuilderConfig Config(bool padding_free, Precision p = Precision::kFp16) {
  BuilderConfig c;
  c.backend = "cuda";
  c.precision = p;
  c.padding_free = padding_free;
  c.profile.inputs.push_back({"input_ids", {1, 1}, {4, 32}, {8, 64}});
  c.profile.inputs.push_back({"attention_mask", {1, 1}, {4, 32}, {8, 64}});
  return c;
}

struct Batch {
  std::vector<Tensor> inputs;
  std::vector<int64_t> real_rows;  // flat b*S+s of tokens with mask 1
};

Batch MakeBatch(std::mt19937& rng, int64_t B, int64_t S, std::vector<int64_t> lens) {
  Tensor ids(DType::kInt64, {B, S}), mask(DType::kInt64, {B, S});
  std::uniform_int_distribution<int> id(1, kVocab - 1);
  Batch out;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      ids.data_as<int64_t>()[b * S + s] = id(rng);
      const bool real = s < lens[b];
      mask.data_as<int64_t>()[b * S + s] = real;
      if (real) out.real_rows.push_back(b * S + s);
    }
  }
  out.inputs = {ids, mask};
  return out;
}

Result<std::unique_ptr<BackendEngine>> Build(std::shared_ptr<ir::Graph> g, const BuilderConfig& c,
                                             EngineOptions opts = {}) {
  auto backend = CreateCudaBackend();
  SURGE_ASSIGN_OR_RETURN(std::string blob, backend->Lower(*g, c));
  return backend->Load(
      g, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(blob.data()), blob.size()), c,
      opts);
}

TEST(CudaBackend, NameAndArch) {
  auto b = CreateCudaBackend();
  EXPECT_EQ(b->name(), "cuda");
  EXPECT_EQ(b->DeviceArch(), "sm_90a");
}

TEST(CudaBackend, LowerRejectsUnsupportedOpsWithoutGpu) {
  std::mt19937 rng(1);
  auto g = MakeEncoder(rng);
  ir::Node n;
  n.op_type = "Softmax";
  n.name = "stray_softmax";
  n.inputs = {g->outputs[0]};
  n.outputs = {g->AddValue("sm", DType::kFloat32)};
  g->AddNode(n);
  auto r = CreateCudaBackend()->Lower(*g, Config(true));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("stray_softmax"), std::string::npos) << r.status().message();
}

TEST(CudaBackend, LowerRejectsFp32AndMissingProfile) {
  std::mt19937 rng(2);
  auto g = MakeEncoder(rng);
  auto r = CreateCudaBackend()->Lower(*g, Config(true, Precision::kFp32));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("precision fp32 is not supported"), std::string::npos)
      << r.status().message();
  BuilderConfig c = Config(true);
  c.profile.inputs.clear();
  r = CreateCudaBackend()->Lower(*g, c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("profile"), std::string::npos) << r.status().message();
}

TEST(CudaBackend, OwnGemmTacticsReadBackFromTheirText) {
  GemmAlgo own;
  own.valid = true;
  own.own_tile = 2;
  EXPECT_EQ(own.ToHex(), "own2");
  GemmAlgo back;
  ASSERT_TRUE(GemmAlgo::FromHex("own2", &back));
  EXPECT_TRUE(back.valid);
  EXPECT_EQ(back.own_tile, 2);
  for (const char* bad : {"own", "ownx", "own2x", "own-1", "0wn2"}) {
    GemmAlgo a;
    EXPECT_FALSE(GemmAlgo::FromHex(bad, &a)) << bad;
  }
  GemmAlgo cublas;
  cublas.valid = true;
  ASSERT_TRUE(GemmAlgo::FromHex(cublas.ToHex(), &back));
  EXPECT_EQ(back.own_tile, -1);
  // Only FP16 with the weight [N,K] can run it, and only on an sm_90 GPU.
  GemmDesc d;
  d.m = 128;
  d.n = 768;
  d.k = 768;
  d.epilogue = GemmEpilogue::kBias;
  d.weight_nk = false;
  EXPECT_FALSE(OwnGemmRuns(d, 1));
  d.weight_nk = true;
  d.dtype = DataType::kBF16;
  EXPECT_FALSE(OwnGemmRuns(d, 1));
  d.dtype = DataType::kF16;
  EXPECT_EQ(OwnGemmRuns(d, 1), CudaDeviceAvailable().ok());
}

TEST(CudaBackend, BlobRoundTripAndCorruption) {
  Blob b;
  b.dtype = DataType::kBF16;
  b.weights[3] = {1, 2, 3, 4};
  GemmAlgo a;
  a.valid = true;
  a.time_us = 12.5f;
  b.tactics["bf16 m=0 n=8 k=8 epi=1 res=0"] = a;
  b.weights_nk = {3, 9};
  b.exact_gelu = false;
  const std::string s = SerializeBlob(b);
  auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  auto back = ParseBlob(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->dtype, DataType::kBF16);
  EXPECT_EQ(back->weights.at(3), (std::vector<uint8_t>{1, 2, 3, 4}));
  EXPECT_FLOAT_EQ(back->tactics.begin()->second.time_us, 12.5f);
  EXPECT_EQ(back->weights_nk, (std::set<int>{3, 9}));
  EXPECT_FALSE(back->exact_gelu);
  EXPECT_TRUE(back->quant_weights.empty());
  // The same blob as version 4 wrote it (no quantised-weight and both-layout sections) still
  // parses.
  std::string v4 = s.substr(0, s.size() - 16);
  const uint32_t four = 4;
  std::memcpy(v4.data() + 8, &four, 4);
  auto old = ParseBlob({reinterpret_cast<const uint8_t*>(v4.data()), v4.size()});
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->weights.at(3), (std::vector<uint8_t>{1, 2, 3, 4}));
  // Weights held in both layouts and the first-token-only flag (version 6); a version 5 blob has
  // neither.
  EXPECT_FALSE(back->first_token_only);
  b.weights_both = {3, 11};
  b.first_token_only = true;
  std::string sb = SerializeBlob(b);
  auto both = ParseBlob({reinterpret_cast<const uint8_t*>(sb.data()), sb.size()});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(both->weights_both, (std::set<int>{3, 11}));
  EXPECT_TRUE(both->first_token_only);
  for (size_t cut : {size_t{1}, size_t{4}, size_t{5}, size_t{9}}) {
    auto r = ParseBlob({reinterpret_cast<const uint8_t*>(sb.data()), sb.size() - cut});
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  }
  sb[sb.size() - 8] = 2;
  auto bad_flag = ParseBlob({reinterpret_cast<const uint8_t*>(sb.data()), sb.size()});
  ASSERT_FALSE(bad_flag.ok());
  EXPECT_NE(bad_flag.status().message().find("first-token-only flag 2"), std::string::npos);
  std::string v5 = sb.substr(0, sb.size() - 20);
  const uint32_t five = 5;
  std::memcpy(v5.data() + 8, &five, 4);
  auto old5 = ParseBlob({reinterpret_cast<const uint8_t*>(v5.data()), v5.size()});
  ASSERT_TRUE(old5.ok()) << old5.status().ToString();
  EXPECT_TRUE(old5->weights_both.empty());
  EXPECT_FALSE(old5->first_token_only);
  EXPECT_EQ(old5->weights_nk, (std::set<int>{3, 9}));
  // A tactic that names the own GEMM's tile (version 7); a version 6 blob names none.
  const std::string s6 = SerializeBlob(b);
  b.tactics["f16 m=128 n=64 k=64 epi=1 res=0 wt=1"] = GemmAlgo{};
  b.tactics["f16 m=128 n=64 k=64 epi=1 res=0 wt=1"].valid = true;
  b.tactics["f16 m=128 n=64 k=64 epi=1 res=0 wt=1"].own_tile = 1;
  const std::string so = SerializeBlob(b);
  auto own = ParseBlob({reinterpret_cast<const uint8_t*>(so.data()), so.size()});
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(own->tactics.at("f16 m=128 n=64 k=64 epi=1 res=0 wt=1").own_tile, 1);
  EXPECT_EQ(own->tactics.at("bf16 m=0 n=8 k=8 epi=1 res=0").own_tile, -1);
  std::string unknown = so;
  unknown[unknown.size() - 5] = 'x';  // the key's last character: no such tactic
  auto bad_key = ParseBlob({reinterpret_cast<const uint8_t*>(unknown.data()), unknown.size()});
  ASSERT_FALSE(bad_key.ok());
  EXPECT_EQ(bad_key.status().code(), StatusCode::kDataLoss);
  std::string no_tile = so;
  no_tile[no_tile.size() - 4] = static_cast<char>(QGemmTileCount());  // past the last tile
  auto bad_tile = ParseBlob({reinterpret_cast<const uint8_t*>(no_tile.data()), no_tile.size()});
  ASSERT_FALSE(bad_tile.ok());
  EXPECT_EQ(bad_tile.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad_tile.status().message().find("own-GEMM tile"), std::string::npos)
      << bad_tile.status().message();
  std::string v6 = s6.substr(0, s6.size() - 4);
  const uint32_t six = 6;
  std::memcpy(v6.data() + 8, &six, 4);
  auto old6 = ParseBlob({reinterpret_cast<const uint8_t*>(v6.data()), v6.size()});
  ASSERT_TRUE(old6.ok()) << old6.status().ToString();
  for (const auto& [key, t] : old6->tactics) EXPECT_EQ(t.own_tile, -1) << key;
  b.tactics.erase("f16 m=128 n=64 k=64 epi=1 res=0 wt=1");
  b.weights_both.clear();
  b.first_token_only = false;
  // Quantised weights (version 5): bytes and scales back as written; their ids among the weights
  // the blob holds.
  QuantWeight q8{QuantType::kInt8, 2, 3, {0.5f, 0.25f}, {1, 2, 3, 4, 5, 6}};
  QuantWeight q4{QuantType::kFp8E4M3, 1, 2, {2.f}, {7, 8}};
  b.quant_weights[{5, QuantType::kInt8}] = q8;
  b.quant_weights[{7, QuantType::kFp8E4M3}] = q4;
  const std::string sq = SerializeBlob(b);
  const auto qbytes =
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(sq.data()), sq.size());
  auto qback = ParseBlob(qbytes);
  ASSERT_TRUE(qback.ok()) << qback.status().ToString();
  ASSERT_EQ(qback->quant_weights.size(), 2u);
  const QuantWeight& r8 = qback->quant_weights.at({5, QuantType::kInt8});
  EXPECT_EQ(r8.bytes, q8.bytes);
  EXPECT_EQ(r8.scales, q8.scales);
  EXPECT_EQ(r8.n, 2);
  EXPECT_EQ(r8.k, 3);
  EXPECT_EQ(qback->quant_weights.at({7, QuantType::kFp8E4M3}).bytes, q4.bytes);
  auto ids = BlobWeightIds(qbytes);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, (std::vector<int>{3, 5, 7}));
  for (size_t cut : {sq.size() - 1, sq.size() - 3, sq.size() - 20}) {
    auto r = ParseBlob(qbytes.first(cut));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  }
  // An INT8 weight with one scale for two channels is refused.
  b.quant_weights[{5, QuantType::kInt8}].scales = {1.f};
  const std::string bad_scales = SerializeBlob(b);
  auto refused =
      ParseBlob({reinterpret_cast<const uint8_t*>(bad_scales.data()), bad_scales.size()});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("2x3 with 1 scales"), std::string::npos)
      << refused.status().ToString();
  for (size_t cut : {size_t{0}, size_t{7}, size_t{20}, s.size() - 1}) {
    auto r = ParseBlob(bytes.first(cut));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  }
  std::string bad = s;
  bad[0] = 'X';
  EXPECT_FALSE(
      ParseBlob(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bad.data()), bad.size()))
          .ok());
}

// Needs no GPU: the row counts Lower tunes at, and how a call's row count finds its tuning.
TEST(CudaBackend, GemmTuningRowsAndTheTacticAtOrAboveACallsRows) {
  const std::vector<int64_t> rows = GemmTuningRows(32768);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.front(), 32);
  EXPECT_EQ(rows.back(), 32768);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  for (int64_t p = 32; p <= 32768; p *= 2) {
    EXPECT_TRUE(std::binary_search(rows.begin(), rows.end(), p)) << p;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i] % 32, 0) << rows[i];
    if (i == 0) continue;
    // Below 1024 rows one per octave, then eight (steps of about 9 %), from 8192 four (19 %).
    if (rows[i] > 8192) {
      EXPECT_LE(rows[i] - rows[i - 1], rows[i - 1] * 19 / 100 + 32)
          << rows[i - 1] << " " << rows[i];
    } else if (rows[i] > 1024) {
      EXPECT_LE(rows[i] - rows[i - 1], rows[i - 1] / 10 + 32) << rows[i - 1] << " " << rows[i];
    } else {
      EXPECT_EQ(rows[i], 2 * rows[i - 1]);
    }
  }
  EXPECT_EQ(rows.size(), 38u);  // 32..512 (5), 1024..4096 eight per octave (24), 8192..16384 four
                                // per octave (8), 32768
  EXPECT_EQ(GemmTuningRows(100), (std::vector<int64_t>{32, 64, 100}));
  EXPECT_EQ(GemmTuningRows(1), (std::vector<int64_t>{1}));
  EXPECT_TRUE(GemmTuningRows(0).empty());

  GemmDesc d;
  d.n = 768;
  d.k = 768;
  d.epilogue = GemmEpilogue::kBias;
  auto algo = [](float us) {
    GemmAlgo a;
    a.valid = true;
    a.time_us = us;
    return a;
  };
  std::map<std::string, GemmAlgo> keys;
  for (int64_t m : {int64_t{128}, int64_t{2048}, int64_t{2464}, int64_t{4096}}) {
    d.m = m;
    keys[TacticKey(d)] = algo(static_cast<float>(m));
  }
  auto table = TacticTable::FromBlob(keys);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  auto tuned_at = [&](int64_t m) {
    d.m = m;
    const GemmAlgo* a = table->Find(d);
    return a ? static_cast<int64_t>(a->time_us) : int64_t{-1};
  };
  EXPECT_EQ(tuned_at(1), 128);
  EXPECT_EQ(tuned_at(128), 128);
  EXPECT_EQ(tuned_at(129), 2048);
  EXPECT_EQ(tuned_at(2048), 2048);
  EXPECT_EQ(tuned_at(2049), 2464);
  EXPECT_EQ(tuned_at(2656), 4096);
  EXPECT_EQ(tuned_at(9000), 4096);  // beyond every tuning: the largest
  GemmDesc other = d;
  other.n = 3072;
  EXPECT_EQ(table->Find(other), nullptr);

  // Plans keyed by power-of-two floors keep their meaning: bucket floor(log2 m) or none.
  GemmDesc shape = d;
  shape.m = 0;
  auto old = TacticTable::FromBlob({{shape.Key() + " mb=11", algo(11.f)}});
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  d.m = 2656;
  ASSERT_NE(old->Find(d), nullptr);
  EXPECT_EQ(old->Find(d)->time_us, 11.f);
  d.m = 4096;
  EXPECT_EQ(old->Find(d), nullptr);
  auto mixed = TacticTable::FromBlob(
      {{shape.Key() + " mb=11", algo(11.f)}, {shape.Key() + " rows=2048", algo(1.f)}});
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(mixed.status().message().find("mixes"), std::string::npos);
  for (const char* bad : {" rows=", " rows=x", " mb=99", " m=5", ""}) {
    auto r = TacticTable::FromBlob({{shape.Key() + bad, algo(1.f)}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find("tactic key"), std::string::npos);
  }
}

// Needs no GPU: the lowering moves each SkipLayerNorm's skip into the Linear before it.
TEST(CudaBackend, ResidualMovesIntoTheGemm) {
  std::mt19937 rng(5);
  auto g = MakeEncoder(rng);
  auto p = AnalyzeGraph(*g, Config(true));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  int fused_linear = 0, fused_norm = 0, skip_norm = 0;
  for (const LoweredOp& op : p->ops) {
    if (op.kind == OpKind::kLinear && op.fused_residual) {
      ++fused_linear;
      ASSERT_EQ(op.inputs.size(), 4u);
      EXPECT_GE(op.inputs[3], 0);
      bool extra = true;
      EXPECT_TRUE(LinearGemm(*p, op, 64, &extra).residual);
      EXPECT_FALSE(extra);
    }
    if (op.kind == OpKind::kLayerNorm && op.fused_residual) ++fused_norm;
    if (op.kind == OpKind::kSkipLayerNorm) ++skip_norm;
  }
  EXPECT_EQ(fused_linear, 2);  // one per layer (the FFN output already had its residual)
  EXPECT_EQ(fused_norm, 2);
  EXPECT_EQ(skip_norm, 0);

  // The Linear's output read elsewhere too (here: a graph output): the SkipLayerNorm stays.
  auto g2 = MakeEncoder(rng);
  for (const ir::Node& n : g2->nodes) {
    if (n.op_type == "SkipLayerNorm") {
      g2->outputs.push_back(n.inputs[0]);
      break;
    }
  }
  auto p2 = AnalyzeGraph(*g2, Config(true));
  ASSERT_TRUE(p2.ok()) << p2.status().ToString();
  int kept = 0;
  for (const LoweredOp& op : p2->ops) kept += op.kind == OpKind::kSkipLayerNorm;
  EXPECT_EQ(kept, 1);
}

// Needs no GPU: erf GELU on token rows takes the fused tanh-form epilogue unless exact_gelu; on
// batch rows (a head) it stays a separate exact pass.
TEST(CudaBackend, GeluEpilogueChoice) {
  Program p;
  p.activations[7] = {RowDomain::kTokens, 256};
  p.activations[8] = {RowDomain::kBatch, 256};
  LoweredOp op;
  op.kind = OpKind::kLinear;
  op.cols = 256;
  op.k = 128;
  op.inputs = {0, 1, 2};
  op.activation = Activation::kGelu;
  bool extra = false;
  op.outputs = {7};
  EXPECT_EQ(LinearGemm(p, op, 64, &extra).epilogue, GemmEpilogue::kBiasGeluTanh);
  EXPECT_FALSE(extra);
  p.exact_gelu = true;
  EXPECT_EQ(LinearGemm(p, op, 64, &extra).epilogue, GemmEpilogue::kBias);
  EXPECT_TRUE(extra);
  p.exact_gelu = false;
  op.outputs = {8};
  EXPECT_EQ(LinearGemm(p, op, 4, &extra).epilogue, GemmEpilogue::kBias);
  EXPECT_TRUE(extra);
}

// Needs no GPU: the embedding and keyword heads lower; a Squeeze of another axis or of a wider
// value, and a node reading a squeezed value, are refused by name.
TEST(CudaBackend, L2NormalizeAndSqueezeLower) {
  std::mt19937 rng(6);
  auto g = MakeEncoder(rng, true, true);
  auto p = AnalyzeGraph(*g, Config(true));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const ActivationInfo& emb = p->activations.at(g->outputs[2]);
  const ActivationInfo& kw = p->activations.at(g->outputs[3]);
  EXPECT_EQ(emb.domain, RowDomain::kBatch);
  EXPECT_EQ(emb.cols, kH);
  EXPECT_FALSE(emb.squeezed);
  EXPECT_EQ(kw.domain, RowDomain::kTokens);
  EXPECT_EQ(kw.cols, 1);
  EXPECT_TRUE(kw.squeezed);

  auto refused = [&](const std::function<void(ir::Graph&)>& edit, std::string_view what) {
    auto g2 = MakeEncoder(rng, true, true);
    edit(*g2);
    auto r = AnalyzeGraph(*g2, Config(true));
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented) << what;
    EXPECT_NE(r.status().message().find("queez"), std::string::npos) << r.status().message();
  };
  refused(
      [](ir::Graph& g2) {
        g2.values[g2.nodes.back().inputs[1]].constant.data_as<int64_t>()[0] = 1;
      },
      "axis 1");
  refused(
      [](ir::Graph& g2) {
        ir::Node& sq = g2.nodes.back();
        sq.inputs[0] = g2.outputs[0];  // the [B,S,H] hidden state
      },
      "wide input");
  refused(
      [](ir::Graph& g2) {
        ir::Node n;
        n.op_type = "L2Normalize";
        n.domain = std::string(ir::kSurgeDomain);
        n.name = "after_squeeze";
        n.inputs = {g2.outputs[3]};
        n.outputs = {g2.AddValue("bad", DType::kFloat32)};
        g2.AddNode(n);
      },
      "reads a squeezed value");
}

TEST(CudaBackend, TransposeWeightMovesEveryElement) {
  Tensor w(DType::kFloat32, {3, 5});
  for (int64_t i = 0; i < 15; ++i) w.data_as<float>()[i] = static_cast<float>(i + 1);
  Tensor t = TransposeWeight(w);
  ASSERT_EQ(t.shape(), (Shape{5, 3}));
  for (int64_t k = 0; k < 3; ++k) {
    for (int64_t n = 0; n < 5; ++n)
      EXPECT_EQ(t.data_as<float>()[n * 3 + k], w.data_as<float>()[k * 5 + n]);
  }
}

// The encoder with the pooled [CLS] output only (its last hidden state no output).
std::shared_ptr<ir::Graph> PooledOnly(std::mt19937& rng) {
  auto g = MakeEncoder(rng);
  g->outputs.erase(g->outputs.begin());
  return g;
}

// Needs no GPU: the last layer on first token rows where only they reach the outputs.
TEST(CudaBackend, LastLayerRunsOnFirstTokensWhereOnlyTheyReachTheOutputs) {
  std::mt19937 rng(9);
  auto g = PooledOnly(rng);
  auto before = AnalyzeGraph(*g, Config(true));
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_FALSE(before->first_token_only);
  auto p = AnalyzeGraph(*g, Config(true), true);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->first_token_only);
  const std::map<OpKind, std::string> names = {{OpKind::kLinear, "linear"},
                                               {OpKind::kAttention, "attention"},
                                               {OpKind::kGatherFirst, "gather"},
                                               {OpKind::kLayerNorm, "ln"},
                                               {OpKind::kSkipLayerNorm, "ln"}};
  std::vector<std::string> kinds;
  for (const LoweredOp& op : p->ops) {
    std::string k = names.count(op.kind) ? names.at(op.kind) : "other";
    if (op.first_token_only) k += "*";
    if (!op.outputs.empty() && op.outputs[0] >= 0 &&
        p->activations.at(op.outputs[0]).domain == RowDomain::kBatch)
      k += "[B]";
    kinds.push_back(k);
  }
  // Layer 1 on every token; layer 2's attention for the first query, its residual input gathered,
  // then the projection, LayerNorm, FFN and LayerNorm on first rows; the pooler as before. The
  // [CLS] Gather is gone: the last LayerNorm writes its output.
  EXPECT_EQ(kinds, (std::vector<std::string>{"other", "linear", "attention", "linear", "ln",
                                             "linear", "linear", "ln", "linear", "attention*[B]",
                                             "gather[B]", "linear*[B]", "ln*[B]", "linear*[B]",
                                             "linear*[B]", "ln*[B]", "linear[B]"}));
  const LoweredOp& last_ln = p->ops[15];
  const LoweredOp& pooler = p->ops[16];
  EXPECT_EQ(last_ln.outputs[0], pooler.inputs[0]);
  const LoweredOp& gather = p->ops[10];
  EXPECT_GE(gather.outputs[0], static_cast<int>(g->values.size()));  // an added activation
  EXPECT_EQ(gather.inputs[0], p->ops[8].inputs[0]);    // the layer's input, which QKV reads too
  EXPECT_EQ(p->ops[11].inputs[3], gather.outputs[0]);  // the projection's residual
  // FFN1's GELU stays the token rows' tanh-form epilogue on the first rows.
  bool extra = false;
  EXPECT_EQ(LinearGemm(*p, p->ops[13], 4, &extra).epilogue, GemmEpilogue::kBiasGeluTanh);
  EXPECT_FALSE(extra);

  // Outputs that read every token keep every op on every row: the last hidden state, or a
  // per-token head beside the pooled one.
  for (bool heads : {false, true}) {
    std::mt19937 r2(9);
    auto full = MakeEncoder(r2, true, heads);
    auto q = AnalyzeGraph(*full, Config(true), true);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_FALSE(q->first_token_only) << heads;
    for (const LoweredOp& op : q->ops) EXPECT_FALSE(op.first_token_only);
  }
}

// Needs no GPU: which weights a plan holds in both layouts, from the tunings of both, and which
// layout a call then runs.
TEST(CudaBackend, BothLayoutsWhereTheOtherIsFasterAtSomeTunedRowCount) {
  std::mt19937 rng(8);
  auto g = MakeEncoder(rng);
  auto p = AnalyzeGraph(*g, Config(true));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::vector<const LoweredOp*> linears;
  for (const LoweredOp& op : p->ops) {
    if (op.kind == OpKind::kLinear) linears.push_back(&op);
  }
  ASSERT_GE(linears.size(), 4u);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{128, 4}, {512, 8}};
  // Tunings are by GEMM shape: the two layers' Linears share them. The first layer's four
  // Linears have four shapes.
  auto shape_of = [&](const LoweredOp* op) {
    bool unused = false;
    return LinearGemm(*p, *op, 1, &unused).Key();
  };
  std::set<std::string> first_layer;
  for (size_t i = 0; i < 4; ++i) first_layer.insert(shape_of(linears[i]));
  ASSERT_EQ(first_layer.size(), 4u);
  // Every GEMM 10 us in its stored layout and 9.8 (2 % faster) in the other, except: the first
  // Linear's other layout 9 us (10 % faster) at 512 rows; the second's 8 us at 128 rows but
  // never tuned at 512; the third's other layout slower everywhere.
  std::map<std::string, GemmAlgo> tactics;
  auto put = [&](const GemmDesc& d, float us) {
    GemmAlgo a;
    a.valid = true;
    a.time_us = us;
    tactics[TacticKey(d)] = a;
  };
  std::set<std::string> seen;
  for (size_t i = 0; i < linears.size(); ++i) {
    if (!seen.insert(shape_of(linears[i])).second) continue;  // the first of a shape sets its own
    for (auto [tokens, batch] : shapes) {
      const GemmDesc d = LinearGemmAt(*p, *linears[i], tokens, batch);
      put(d, 10.f);
      float other = 9.8f;
      if (i == 0 && tokens == 512) other = 9.f;
      if (i == 1 && tokens == 128) other = 8.f;
      if (i == 1 && tokens == 512) continue;
      if (i == 2) other = 12.f;
      put(OtherLayout(d), other);
    }
  }
  auto weights_shaped_as = [&](std::set<size_t> firsts) {
    std::set<std::string> keys;
    for (size_t i : firsts) keys.insert(shape_of(linears[i]));
    std::set<int> out;
    for (const LoweredOp* op : linears) {
      if (keys.count(shape_of(op))) out.insert(op->inputs[1]);
    }
    return out;
  };
  const std::set<int> first = weights_shaped_as({0});
  EXPECT_EQ(first.size(), 2u);  // both layers' QKV
  EXPECT_EQ(WeightsWorthBothLayouts(*p, tactics, shapes, 0.03), first);
  // A gain threshold of 1 % takes every weight whose other layout is tuned and faster somewhere.
  std::set<int> all_faster;
  for (size_t i = 0; i < linears.size(); ++i) {
    if (!weights_shaped_as({1, 2}).count(linears[i]->inputs[1]))
      all_faster.insert(linears[i]->inputs[1]);
  }
  EXPECT_GE(all_faster.size(), 5u);  // two QKV, two FFN2, the pooler
  EXPECT_EQ(WeightsWorthBothLayouts(*p, tactics, shapes, 0.01), all_faster);
  EXPECT_TRUE(WeightsWorthBothLayouts(*p, {}, shapes, 0.03).empty());

  // At run time: the layout tuned faster at the call's row count (the tuning at or above it).
  auto table = TacticTable::FromBlob(tactics);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  bool unused = false;
  GemmDesc d = LinearGemm(*p, *linears[2], 100, &unused);
  EXPECT_FALSE(table->OtherLayoutFaster(d));  // 12 against 10 us
  EXPECT_TRUE(table->OtherLayoutFaster(OtherLayout(d)));
  d = LinearGemm(*p, *linears[1], 100, &unused);
  EXPECT_TRUE(table->OtherLayoutFaster(d));  // 8 against 10 us at 128 rows
  d = LinearGemm(*p, *linears[1], 300, &unused);
  EXPECT_FALSE(table->OtherLayoutFaster(d));  // no other tuning at 512 rows but 128's is not it
  EXPECT_EQ(OtherLayout(OtherLayout(d)).weight_nk, d.weight_nk);
  EXPECT_NE(OtherLayout(d).weight_nk, d.weight_nk);
}

// Tunings outlive the cache that made them (the process keeps them for every later build), are
// kept apart by device key, and a cache file written later holds the ones its build reused.
TEST(CudaBackend, TimingCacheKeepsTuningsForTheProcess) {
  GemmDesc d;
  d.m = 4096 + 7;  // a shape no other test tunes
  d.n = 768;
  d.k = 3072;
  d.residual = true;
  GemmAlgo algo;
  algo.valid = true;
  for (size_t i = 0; i < sizeof(algo.algo.data) / sizeof(algo.algo.data[0]); ++i)
    algo.algo.data[i] = 0x0102030405060708ull * (i + 1);
  algo.time_us = 12.5f;
  const std::string device = "sm_00 test device " + std::to_string(::getpid());
  {
    TimingCache first("", device);
    GemmAlgo none;
    EXPECT_FALSE(first.Lookup(d, &none));
    first.Insert(d, algo);
    ASSERT_TRUE(first.Save().ok());  // no path: nothing written
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / ("surge_timing_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove(path);
  TimingCache second(path, device);
  GemmAlgo got;
  ASSERT_TRUE(second.Lookup(d, &got));
  EXPECT_EQ(got.ToHex(), algo.ToHex());
  EXPECT_FLOAT_EQ(got.time_us, 12.5f);
  TimingCache other("", device + " other");
  EXPECT_FALSE(other.Lookup(d, &got));
  GemmDesc e = d;
  e.weight_nk = true;
  EXPECT_FALSE(second.Lookup(e, &got));
  ASSERT_TRUE(second.Save().ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(device + "\t" + d.Key() + "\t" + algo.ToHex()), std::string::npos)
      << text.str();
  std::filesystem::remove(path);
}

TEST(CudaBackend, LoadWithoutGpuIsUnavailable) {
  if (CudaDeviceAvailable().ok()) GTEST_SKIP() << "a GPU is present; this checks the no-GPU error";
  std::mt19937 rng(3);
  auto r = Build(MakeEncoder(rng), Config(true));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("no CUDA device"), std::string::npos) << r.status().message();
}

class CudaEncoderTest : public ::testing::Test {
 protected:
  void SetUp() override { SURGE_SKIP_WITHOUT_GPU(); }
  std::mt19937 rng_{42};
};

// With the demo model's heads: the L2-normalised [CLS] embedding and the squeezed keyword logits.
TEST_F(CudaEncoderTest, MatchesReferencePaddedAndPaddingFree) {
  auto g = MakeEncoder(rng_, true, true);
  const int64_t B = 5, S = 37;
  Batch batch = MakeBatch(rng_, B, S, {37, 20, 1, 33, 9});
  auto ref = RunReference(*g, batch.inputs);
  std::vector<int64_t> cls_rows;
  for (int64_t b = 0; b < B; ++b) cls_rows.push_back(b);
  std::vector<std::vector<Tensor>> results;
  for (bool padding_free : {false, true}) {
    auto engine = Build(g, Config(padding_free));
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    auto ctx = (*engine)->CreateContext();
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    for (int rep = 0; rep < 3; ++rep) {  // eager, then captured graph replays
      std::vector<Tensor> out;
      Status st = (*ctx)->Execute(batch.inputs, &out);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(out.size(), 4u);
      EXPECT_EQ(out[0].shape(), (Shape{B, S, kH}));
      EXPECT_EQ(out[1].shape(), (Shape{B, kH}));
      EXPECT_EQ(out[2].shape(), (Shape{B, kH}));
      EXPECT_EQ(out[3].shape(), (Shape{B, S}));
      EXPECT_LT(RelError(out[0], ref[0], kH, batch.real_rows), 1e-2)
          << "padding_free " << padding_free << " rep " << rep;
      EXPECT_LT(RelError(out[1], ref[1]), 1e-2) << "pooled, padding_free " << padding_free;
      EXPECT_LT(RelError(out[2], ref[2]), 1e-2) << "embedding, padding_free " << padding_free;
      EXPECT_LT(RelError(out[3], ref[3], 1, batch.real_rows), 1e-2)
          << "keyword, padding_free " << padding_free;
      for (int64_t b = 0; b < B; ++b) {
        double norm = 0;
        for (int64_t c = 0; c < kH; ++c) norm += std::pow(out[2].data_as<float>()[b * kH + c], 2);
        EXPECT_NEAR(std::sqrt(norm), 1.0, 2e-3) << "embedding row " << b;
      }
      if (rep == 2) results.push_back(out);
    }
  }
  // Padded and padding-free agree on every real token and on the pooled outputs.
  EXPECT_LT(RelError(results[1][0], results[0][0], kH, batch.real_rows), 5e-3);
  EXPECT_LT(RelError(results[1][1], results[0][1]), 5e-3);
  EXPECT_LT(RelError(results[1][2], results[0][2]), 5e-3);
  EXPECT_LT(RelError(results[1][3], results[0][3], 1, batch.real_rows), 5e-3);
  // Padding positions of the scattered output are zero in padding-free mode.
  EXPECT_EQ(results[1][0].data_as<float>()[(1 * S + 30) * kH], 0.f);
}

TEST_F(CudaEncoderTest, Bf16MatchesReference) {
  auto g = MakeEncoder(rng_);
  Batch batch = MakeBatch(rng_, 3, 16, {16, 5, 11});
  auto ref = RunReference(*g, batch.inputs);
  auto engine = Build(g, Config(true, Precision::kBf16));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto ctx = (*engine)->CreateContext();
  ASSERT_TRUE(ctx.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*ctx)->Execute(batch.inputs, &out).ok());
  EXPECT_LT(RelError(out[0], ref[0], kH, batch.real_rows), 5e-2);
}

TEST_F(CudaEncoderTest, ShapesChangeAndContextsShareTheEngine) {
  auto g = MakeEncoder(rng_);
  auto engine = Build(g, Config(true));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto c1 = (*engine)->CreateContext();
  auto c2 = (*engine)->CreateContext();
  ASSERT_TRUE(c1.ok() && c2.ok());
  for (auto [B, S] : {std::pair<int64_t, int64_t>{1, 1}, {8, 64}, {2, 17}, {8, 64}}) {
    std::vector<int64_t> lens;
    for (int64_t b = 0; b < B; ++b) lens.push_back(1 + (b * 7) % S);
    Batch batch = MakeBatch(rng_, B, S, lens);
    auto ref = RunReference(*g, batch.inputs);
    for (auto* ctx : {&*c1, &*c2}) {
      std::vector<Tensor> out;
      Status st = (*ctx)->Execute(batch.inputs, &out);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_LT(RelError(out[0], ref[0], kH, batch.real_rows), 1e-2) << B << "x" << S;
      EXPECT_LT(RelError(out[1], ref[1]), 1e-2) << B << "x" << S;
    }
  }
}

TEST_F(CudaEncoderTest, LeftPaddingFallsBackToPadded) {
  auto g = MakeEncoder(rng_);
  Batch batch = MakeBatch(rng_, 2, 12, {12, 12});
  batch.inputs[1].data_as<int64_t>()[12] = 0;  // batch 1, token 0 is padding
  batch.real_rows.erase(std::find(batch.real_rows.begin(), batch.real_rows.end(), 12));
  auto ref = RunReference(*g, batch.inputs);
  auto engine = Build(g, Config(true));
  ASSERT_TRUE(engine.ok());
  auto ctx = (*engine)->CreateContext();
  std::vector<Tensor> out;
  ASSERT_TRUE((*ctx)->Execute(batch.inputs, &out).ok());
  EXPECT_LT(RelError(out[0], ref[0], kH, batch.real_rows), 1e-2);
  EXPECT_LT(RelError(out[1], ref[1]), 1e-2);
}

// Masks with gaps (real tokens after padding, first token real): the packed form takes the real
// tokens wherever they are and matches the padded reference on each of them.
TEST_F(CudaEncoderTest, MaskWithGapsPacksEveryRealToken) {
  auto g = MakeEncoder(rng_);
  const int64_t B = 3, S = 24;
  Batch batch = MakeBatch(rng_, B, S, {S, S, S});
  int64_t* mask = batch.inputs[1].data_as<int64_t>();
  for (int64_t s = 0; s < S; ++s) {
    mask[0 * S + s] = s % 3 != 2;        // every third token padding
    mask[1 * S + s] = s < 5 || s >= 20;  // a run of padding inside
    mask[2 * S + s] = s < 17;            // padded on the right
  }
  batch.real_rows.clear();
  for (int64_t r = 0; r < B * S; ++r) {
    if (mask[r] != 0) batch.real_rows.push_back(r);
  }
  auto ref = RunReference(*g, batch.inputs);
  auto engine = Build(g, Config(true));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto ctx = (*engine)->CreateContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  for (int rep = 0; rep < 2; ++rep) {  // eager, then the captured graph
    std::vector<Tensor> out;
    Status st = (*ctx)->Execute(batch.inputs, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_LT(RelError(out[0], ref[0], kH, batch.real_rows), 1e-2) << "rep " << rep;
    EXPECT_LT(RelError(out[1], ref[1]), 1e-2) << "rep " << rep;
    // A padding token inside a row is not written in the packed form.
    EXPECT_EQ(out[0].data_as<float>()[(0 * S + 2) * kH], 0.f);
    EXPECT_EQ(out[0].data_as<float>()[(1 * S + 10) * kH], 0.f);
  }
}

// Weights held in both layouts. Forced here: every Linear weight in both, and one layout's
// tunings made slow in each of two plans, so that every Linear runs its second copy (transposed
// at load) in one of them. Both match the reference. A budget that holds the weights in one
// layout and one context, but not the second layouts too, loads with one layout.
TEST_F(CudaEncoderTest, WeightsInBothLayoutsRunEitherAndMatch) {
  auto g = MakeEncoder(rng_);
  const BuilderConfig c = Config(true);
  auto backend = CreateCudaBackend();
  setenv("SURGE_CUDA_BOTH_LAYOUTS", "all", 1);
  auto blob = backend->Lower(*g, c);
  unsetenv("SURGE_CUDA_BOTH_LAYOUTS");
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  auto parsed = ParseBlob({reinterpret_cast<const uint8_t*>(blob->data()), blob->size()});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto p = AnalyzeGraph(*g, c);
  ASSERT_TRUE(p.ok());
  std::set<int> linear_weights;
  for (const LoweredOp& op : p->ops) {
    if (op.kind == OpKind::kLinear) linear_weights.insert(op.inputs[1]);
  }
  EXPECT_EQ(parsed->weights_both, linear_weights);
  auto load = [&](const Blob& b, EngineOptions o = {}) {
    const std::string bytes = SerializeBlob(b);
    return backend->Load(
        g, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
        c, o);
  };
  std::vector<Batch> batches = {MakeBatch(rng_, 1, 1, {1}),
                                MakeBatch(rng_, 8, 64, std::vector<int64_t>(8, 64)),
                                MakeBatch(rng_, 3, 17, {17, 4, 9})};
  auto run_all = [&](BackendEngine& e, const std::string& what) {
    auto ctx = e.CreateContext();
    ASSERT_TRUE(ctx.ok()) << what << ": " << ctx.status().ToString();
    for (Batch& batch : batches) {
      auto ref = RunReference(*g, batch.inputs);
      for (int rep = 0; rep < 2; ++rep) {  // eager, then the captured graph
        std::vector<Tensor> out;
        Status st = (*ctx)->Execute(batch.inputs, &out);
        ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
        EXPECT_LT(RelError(out[0], ref[0], kH, batch.real_rows), 1e-2) << what;
        EXPECT_LT(RelError(out[1], ref[1]), 1e-2) << what;
      }
    }
  };
  for (int slow : {0, 1}) {
    Blob b = *parsed;
    for (auto& [key, algo] : b.tactics) {
      if (key.find(fmt::format(" wt={} ", slow)) != std::string::npos) algo.time_us = 1e6f;
    }
    auto e = load(b);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    const std::string d = (*e)->Describe();
    EXPECT_NE(d.find("in their second layout"), std::string::npos) << d;
    EXPECT_NE(d.find("W also"), std::string::npos) << d;
    run_all(**e, fmt::format("layout wt={} slow", slow));
  }
  // The smallest budget (to 64 KiB) at which the plan in one layout loads and makes a context.
  Blob one = *parsed;
  one.weights_both.clear();
  auto fits = [&](const Blob& b, size_t budget) {
    EngineOptions o;
    o.memory_budget_bytes = budget;
    auto e = load(b, o);
    return e.ok() && (*e)->CreateContext().ok();
  };
  size_t lo = 0, hi = size_t{4} << 30;
  ASSERT_TRUE(fits(one, hi));
  while (hi - lo > (64u << 10)) {
    const size_t mid = lo + (hi - lo) / 2;
    (fits(one, mid) ? hi : lo) = mid;
  }
  EngineOptions tight;
  tight.memory_budget_bytes = hi;
  auto e = load(*parsed, tight);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ((*e)->Describe().find("second layout"), std::string::npos) << (*e)->Describe();
  run_all(**e, "budget for one layout");
  tight.memory_budget_bytes = hi + (16u << 20);
  auto roomy = load(*parsed, tight);
  ASSERT_TRUE(roomy.ok()) << roomy.status().ToString();
  EXPECT_NE((*roomy)->Describe().find("in their second layout"), std::string::npos);
}

// The pooled-only encoder with its last layer on first token rows (the default) against the
// reference and against the same plan built with every op on every token, padded and packed,
// eager and replayed.
TEST_F(CudaEncoderTest, FirstTokenOnlyLastLayerMatches) {
  auto g = PooledOnly(rng_);
  for (bool padding_free : {false, true}) {
    setenv("SURGE_CUDA_FIRST_TOKEN_ONLY", "0", 1);
    auto every = Build(g, Config(padding_free));
    unsetenv("SURGE_CUDA_FIRST_TOKEN_ONLY");
    auto first = Build(g, Config(padding_free));
    ASSERT_TRUE(every.ok() && first.ok());
    EXPECT_EQ((*every)->Describe().find("first query only"), std::string::npos);
    EXPECT_NE((*first)->Describe().find("first query only"), std::string::npos)
        << (*first)->Describe();
    EXPECT_NE((*first)->Describe().find("(first token rows only)"), std::string::npos);
    auto ce = (*every)->CreateContext();
    auto cf = (*first)->CreateContext();
    ASSERT_TRUE(ce.ok() && cf.ok());
    for (auto [B, S] : {std::pair<int64_t, int64_t>{1, 1}, {5, 37}, {8, 64}, {3, 9}}) {
      std::vector<int64_t> lens;
      for (int64_t b = 0; b < B; ++b) lens.push_back(1 + (b * 11 + 5) % S);
      Batch batch = MakeBatch(rng_, B, S, lens);
      auto ref = RunReference(*g, batch.inputs);
      for (int rep = 0; rep < 2; ++rep) {
        std::vector<Tensor> oe, of;
        ASSERT_TRUE((*ce)->Execute(batch.inputs, &oe).ok());
        Status st = (*cf)->Execute(batch.inputs, &of);
        ASSERT_TRUE(st.ok()) << st.ToString();
        ASSERT_EQ(of.size(), 1u);
        EXPECT_EQ(of[0].shape(), (Shape{B, kH}));
        EXPECT_LT(RelError(of[0], ref[0]), 1e-2) << B << "x" << S << " pf " << padding_free;
        EXPECT_LT(RelError(of[0], oe[0]), 2e-3) << B << "x" << S << " pf " << padding_free;
      }
    }
  }
}

TEST_F(CudaEncoderTest, BadInputsAndBudget) {
  auto g = MakeEncoder(rng_);
  auto engine = Build(g, Config(true));
  ASSERT_TRUE(engine.ok());
  auto ctx = (*engine)->CreateContext();
  Batch batch = MakeBatch(rng_, 2, 8, {8, 3});
  batch.inputs[0].data_as<int64_t>()[5] = kVocab + 3;
  std::vector<Tensor> out;
  Status st = (*ctx)->Execute(batch.inputs, &out);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  EXPECT_NE(st.message().find("at flat index 5"), std::string::npos) << st.message();
  batch.inputs[0].data_as<int64_t>()[5] = -1;
  st = (*ctx)->Execute(batch.inputs, &out);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  EXPECT_NE(st.message().find("-1 at flat index 5"), std::string::npos) << st.message();
  batch.inputs[0].data_as<int64_t>()[5] = int64_t{1} << 40;
  batch.inputs[0].data_as<int64_t>()[9] = -(int64_t{1} << 40);
  st = (*ctx)->Execute(batch.inputs, &out);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  EXPECT_NE(st.message().find("does not fit int32"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("at index 5"), std::string::npos) << st.message();
  batch.inputs[0].data_as<int64_t>()[5] = 1;
  batch.inputs[0].data_as<int64_t>()[9] = kVocab - 1;  // the largest valid id
  st = (*ctx)->Execute(batch.inputs, &out);
  EXPECT_TRUE(st.ok()) << "the context runs on after refused inputs: " << st.ToString();
  Batch big = MakeBatch(rng_, 9, 8, std::vector<int64_t>(9, 8));
  EXPECT_EQ((*ctx)->Execute(big.inputs, &out).code(), StatusCode::kOutOfRange);
  // A budget that holds the weights but not a context.
  EngineOptions opts;
  opts.memory_budget_bytes = 2u << 20;
  auto small = Build(g, Config(true), opts);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  auto c = (*small)->CreateContext();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("budget"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace surge::engine::cuda::testing
