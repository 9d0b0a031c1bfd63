#include "engine/runtime/graph_codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "fake_backend.h"

namespace surge::engine {
namespace {

using ir::Dim;

std::span<const uint8_t> Span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// A graph exercising every value and attribute feature the codec carries.
ir::Graph RichGraph() {
  ir::Graph g = testing::MakeTestGraph();
  g.opset = 18;
  g.metadata["producer"] = "test";
  int shape_v = g.AddValue("shape_of_a", DType::kInt64, ir::SymShape{Dim(2)});
  g.values[shape_v].sym_data =
      std::vector<Dim>{Dim::Symbol("batch"), Dim::Symbol("batch") * Dim::Symbol("seq") + Dim(2)};
  ir::Node n;
  n.op_type = "Shape";
  n.name = "shape_node";
  n.inputs = {g.inputs[0]};
  n.outputs = {shape_v};
  n.attrs["i"] = int64_t{-7};
  n.attrs["f"] = 0.125;
  n.attrs["s"] = std::string("gelu");
  n.attrs["ints"] = std::vector<int64_t>{1, -2, 3};
  n.attrs["floats"] = std::vector<double>{1.5, -2.25};
  n.attrs["strings"] = std::vector<std::string>{"x", "", "yz"};
  Tensor t(DType::kInt32, {2, 2});
  for (int i = 0; i < 4; ++i) t.data_as<int32_t>()[i] = 10 * i - 5;
  n.attrs["t"] = t;
  g.AddNode(std::move(n));
  Tensor big(DType::kFloat32, {3, 5});
  for (int i = 0; i < 15; ++i) big.data_as<float>()[i] = 0.1f * i;
  g.AddConstant("big", big);
  g.outputs.push_back(shape_v);
  return g;
}

// Copies the weights into 64-byte-aligned memory, as the plan does.
struct Aligned {
  explicit Aligned(const std::string& s) : buf(s.size()) {
    if (!s.empty()) std::memcpy(buf.data(), s.data(), s.size());
  }
  std::span<const uint8_t> span() const { return {buf.data(), buf.size()}; }
  AlignedBuffer buf;
};

TEST(GraphCodec, RoundTripKeepsEverything) {
  const ir::Graph g = RichGraph();
  auto enc = EncodeGraph(g);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  Aligned weights(enc->weights);
  auto dec = DecodeGraph(Span(enc->graph), weights.span());
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(ir::DumpText(*dec), ir::DumpText(g));
  EXPECT_EQ(dec->opset, 18);
  EXPECT_EQ(dec->metadata.at("producer"), "test");
  EXPECT_EQ(dec->inputs, g.inputs);
  EXPECT_EQ(dec->outputs, g.outputs);
  const ir::Value& sv = dec->values[dec->FindValue("shape_of_a")];
  ASSERT_TRUE(sv.sym_data.has_value());
  EXPECT_EQ((*sv.sym_data)[1].ToString(),
            g.values[g.FindValue("shape_of_a")].sym_data->at(1).ToString());
  const ir::Node& n = dec->nodes.back();
  EXPECT_EQ(n.GetInt("i", 0), -7);
  EXPECT_EQ(n.GetFloat("f", 0), 0.125);
  EXPECT_EQ(n.GetString("s", ""), "gelu");
  EXPECT_EQ(n.GetInts("ints"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(n.GetFloats("floats"), (std::vector<double>{1.5, -2.25}));
  EXPECT_EQ(std::get<std::vector<std::string>>(n.attrs.at("strings")),
            (std::vector<std::string>{"x", "", "yz"}));
  const Tensor* t = n.GetTensor("t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape(), (Shape{2, 2}));
  EXPECT_EQ(t->data_as<int32_t>()[3], 25);
  const Tensor& big = dec->values[dec->FindValue("big")].constant;
  EXPECT_EQ(big.shape(), (Shape{3, 5}));
  EXPECT_FLOAT_EQ(big.data_as<float>()[14], 1.4f);
  // Zero-copy: the constant views the weights bytes.
  auto* p = static_cast<const uint8_t*>(big.data());
  EXPECT_TRUE(p >= weights.buf.data() && p < weights.buf.data() + weights.buf.size());
  for (int id : dec->inputs) EXPECT_EQ(dec->values[id].producer, -1);
  EXPECT_EQ(dec->values[dec->outputs[0]].producer, 3);
}

TEST(GraphCodec, ConstantsLeftToTheTacticsKeepDtypeAndShapeOnly) {
  const ir::Graph g = RichGraph();
  const int big_id = g.FindValue("big");
  auto full = EncodeGraph(g);
  auto enc = EncodeGraph(g, std::vector<int>{big_id});
  ASSERT_TRUE(full.ok() && enc.ok()) << enc.status().ToString();
  // The 60 bytes of "big" (and their alignment padding) are not in the weights section.
  EXPECT_LE(enc->weights.size() + 60, full->weights.size());
  Aligned weights(enc->weights);
  auto dec = DecodeGraph(Span(enc->graph), weights.span());
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  const ir::Value& big = dec->values[dec->FindValue("big")];
  EXPECT_TRUE(big.is_constant());
  EXPECT_TRUE(big.constant.empty());
  EXPECT_EQ(big.constant.dtype(), DType::kFloat32);
  EXPECT_EQ(big.constant.shape(), (Shape{3, 5}));
  // The other constants keep their data.
  for (const ir::Value& v : dec->values) {
    if (v.is_constant() && v.name != "big") {
      EXPECT_FALSE(v.constant.empty()) << v.name;
    }
  }
  EXPECT_EQ(ir::DumpText(*dec), ir::DumpText(g));
  // Only constants can be left out; a decoded data-less constant cannot be encoded again.
  EXPECT_FALSE(EncodeGraph(g, std::vector<int>{g.inputs[0]}).ok());
  EXPECT_FALSE(EncodeGraph(g, std::vector<int>{static_cast<int>(g.values.size())}).ok());
  auto again = EncodeGraph(*dec);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("has no data"), std::string::npos);
}

TEST(GraphCodec, EveryTruncationFailsCleanly) {
  auto enc = EncodeGraph(RichGraph());
  ASSERT_TRUE(enc.ok());
  Aligned weights(enc->weights);
  for (size_t keep = 0; keep < enc->graph.size(); ++keep) {
    auto dec = DecodeGraph(Span(enc->graph.substr(0, keep)), weights.span());
    ASSERT_FALSE(dec.ok()) << keep;
    EXPECT_EQ(dec.status().code(), StatusCode::kDataLoss) << keep;
  }
}

TEST(GraphCodec, ByteFlipsNeverCrash) {
  auto enc = EncodeGraph(RichGraph());
  ASSERT_TRUE(enc.ok());
  Aligned weights(enc->weights);
  int rejected = 0;
  for (size_t i = 0; i < enc->graph.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::string bytes = enc->graph;
      bytes[i] = static_cast<char>(bytes[i] ^ mask);
      rejected += !DecodeGraph(Span(bytes), weights.span()).ok();
    }
  }
  // Most flips land in names or values and decode to another valid graph; structural ones fail.
  EXPECT_GT(rejected, 0);
}

TEST(GraphCodec, ConstantOutsideWeightsIsRejected) {
  auto enc = EncodeGraph(RichGraph());
  ASSERT_TRUE(enc.ok());
  Aligned short_weights(enc->weights.substr(0, 64));
  auto dec = DecodeGraph(Span(enc->graph), short_weights.span());
  ASSERT_FALSE(dec.ok());
  EXPECT_NE(dec.status().message().find("lies outside"), std::string::npos)
      << dec.status().message();
}

TEST(GraphCodec, BadIdsAreRejected) {
  ir::Graph g = testing::MakeTestGraph();
  g.outputs.push_back(999);
  auto enc = EncodeGraph(g);
  ASSERT_TRUE(enc.ok());
  Aligned weights(enc->weights);
  auto dec = DecodeGraph(Span(enc->graph), weights.span());
  ASSERT_FALSE(dec.ok());
  EXPECT_NE(dec.status().message().find("graph output refers to value 999"), std::string::npos)
      << dec.status().message();
}

TEST(GraphCodec, UnknownOpIsRejected) {
  ir::Graph g = testing::MakeTestGraph();
  g.nodes[0].op_type = "NoSuchOp";
  auto enc = EncodeGraph(g);
  ASSERT_TRUE(enc.ok());
  Aligned weights(enc->weights);
  auto dec = DecodeGraph(Span(enc->graph), weights.span());
  ASSERT_FALSE(dec.ok());
  EXPECT_NE(dec.status().message().find("NoSuchOp"), std::string::npos);
}

}  // namespace
}  // namespace surge::engine
