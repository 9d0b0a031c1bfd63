// A BERT-base-shaped fused encoder built directly in the IR (12 layers, hidden 768, 12 heads,
// FFN 3072, vocab 21128, weights ~ N(0, 0.02), LayerNorm scales ~ 1) with a pooled ([CLS] →
// dense → tanh) output: the model of the quantisation GPU tests and benchmark when no model
// folder is given. Header-only; deterministic for a given seed.
#pragma once

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/ir/graph.h"

namespace surge::engine::bench {

struct BertShape {
  int64_t hidden = 768, heads = 12, ffn = 3072, vocab = 21128, layers = 12, max_pos = 512;
};

inline std::shared_ptr<ir::Graph> BertEncoderGraph(uint32_t seed, const BertShape& s = {}) {
  std::mt19937 rng(seed);
  auto g = std::make_shared<ir::Graph>();
  std::normal_distribution<float> nd(0.f, 0.02f);
  auto w = [&](const std::string& name, Shape shape, float mean = 0.f) {
    Tensor t(DType::kFloat32, std::move(shape));
    for (float& v : t.span<float>()) v = mean + nd(rng);
    return g->AddConstant(name, t);
  };
  const ir::Dim b = ir::Dim::Symbol("batch"), q = ir::Dim::Symbol("seq");
  const ir::SymShape bs = {b, q};
  const int ids = g->AddInput("input_ids", DType::kInt64, bs);
  const int types = g->AddInput("token_type_ids", DType::kInt64, bs);
  const int mask = g->AddInput("attention_mask", DType::kInt64, bs);
  auto node = [&](std::string op, std::vector<int> in, std::map<std::string, ir::Attribute> attrs,
                  ir::SymShape shape, std::string domain = "surge") {
    ir::Node n;
    n.op_type = op;
    n.domain = domain;
    n.name = g->UniqueName(op);
    n.inputs = std::move(in);
    n.attrs = std::move(attrs);
    n.outputs = {g->AddValue(n.name + "_out", DType::kFloat32, std::move(shape))};
    g->AddNode(n);
    return g->nodes.back().outputs[0];
  };
  const int64_t h = s.hidden;
  const ir::SymShape tok = {b, q, h};
  int x = node("EmbedLayerNorm",
               {ids, types, -1, w("word", {s.vocab, h}), w("pos", {s.max_pos, h}),
                w("type", {2, h}), w("eg", {h}, 1.f), w("eb", {h}), mask},
               {{"epsilon", 1e-12}}, tok);
  for (int64_t l = 0; l < s.layers; ++l) {
    const int qkv =
        node("Linear", {x, w("wqkv", {h, 3 * h}), w("bqkv", {3 * h})}, {}, {b, q, 3 * h});
    const int att = node("Attention", {qkv, mask}, {{"num_heads", s.heads}}, tok);
    const int proj = node("Linear", {att, w("wo", {h, h}), w("bo", {h})}, {}, tok);
    const int ln1 = node("SkipLayerNorm", {proj, x, w("g1", {h}, 1.f), w("b1", {h})},
                         {{"epsilon", 1e-12}}, tok);
    const int ff = node("Linear", {ln1, w("w1", {h, s.ffn}), w("bf1", {s.ffn})},
                        {{"activation", std::string("gelu")}}, {b, q, s.ffn});
    const int ff2 = node("Linear", {ff, w("w2", {s.ffn, h}), w("bf2", {h})}, {}, tok);
    x = node("SkipLayerNorm", {ff2, ln1, w("g2", {h}, 1.f), w("b2", {h})}, {{"epsilon", 1e-12}},
             tok);
  }
  Tensor zero(DType::kInt64, Shape{});
  const int cls =
      node("Gather", {x, g->AddConstant("zero", zero)}, {{"axis", int64_t{1}}}, {b, h}, "");
  g->outputs.push_back(node("Linear", {cls, w("wp", {h, h}), w("bp", {h})},
                            {{"activation", std::string("tanh")}}, {b, h}));
  // Node names as an optimised import has them: unique (quantised layers are addressed by them).
  g->MakeNodeNamesUnique();
  return g;
}

// Random token batches for the graph above: ids in [1, vocab), type 0, mask 1 on the first
// lengths[i] tokens of row i (all of them when `lengths` is empty).
inline std::map<std::string, Tensor, std::less<>> BertInputs(std::mt19937& rng, int64_t batch,
                                                             int64_t seq, int64_t vocab,
                                                             std::vector<int64_t> lengths = {}) {
  Tensor ids(DType::kInt64, {batch, seq}), types(DType::kInt64, {batch, seq}),
      mask(DType::kInt64, {batch, seq});
  std::uniform_int_distribution<int64_t> id(1, vocab - 1);
  for (int64_t r = 0; r < batch; ++r) {
    const int64_t len = lengths.empty() ? seq : lengths[r];
    for (int64_t c = 0; c < seq; ++c) {
      const bool real = c < len;
      ids.data_as<int64_t>()[r * seq + c] = real ? id(rng) : 0;
      types.data_as<int64_t>()[r * seq + c] = 0;
      mask.data_as<int64_t>()[r * seq + c] = real;
    }
  }
  return {{"input_ids", ids}, {"token_type_ids", types}, {"attention_mask", mask}};
}

// `count` batches of BertInputs; with `padding`, row lengths uniform in [seq/4, seq].
inline std::vector<std::map<std::string, Tensor, std::less<>>> BertBatches(
    uint32_t seed, int count, int64_t batch, int64_t seq, int64_t vocab, bool padding) {
  std::mt19937 rng(seed);
  std::vector<std::map<std::string, Tensor, std::less<>>> out;
  for (int i = 0; i < count; ++i) {
    std::vector<int64_t> lens;
    for (int64_t b = 0; padding && b < batch; ++b) {
      lens.push_back(std::uniform_int_distribution<int64_t>(seq / 4, seq)(rng));
    }
    out.push_back(BertInputs(rng, batch, seq, vocab, lens));
  }
  return out;
}

}  // namespace surge::engine::bench
