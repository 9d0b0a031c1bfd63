// ONNX importer: hand-made protos for each feature and each kind of bad input.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <string>

#include "engine/import/importer.h"
#include "engine/passes/passes.h"

namespace surge::engine::import {
namespace {

namespace fs = std::filesystem;

class OnnxImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           fmt::format("onnx_import_{}_{}",
                       ::testing::UnitTest::GetInstance()->current_test_info()->name(), getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // X[batch,4] float -> MatMul(X, W[4,2]) -> Y.
  static onnx::ModelProto TinyModel(int64_t opset = 17) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.set_producer_name("test");
    auto* g = m.mutable_graph();
    g->set_name("tiny");
    auto* x = g->add_input();
    x->set_name("X");
    auto* tt = x->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("batch");
    tt->mutable_shape()->add_dim()->set_dim_value(4);
    auto* w = g->add_initializer();
    w->set_name("W");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(4);
    w->add_dims(2);
    std::vector<float> wv(8);
    for (int i = 0; i < 8; ++i) wv[i] = 0.5f * i - 1.0f;
    w->set_raw_data(std::string(reinterpret_cast<const char*>(wv.data()), 32));
    auto* n = g->add_node();
    n->set_name("mm");
    n->set_op_type("MatMul");
    n->add_input("X");
    n->add_input("W");
    n->add_output("Y");
    g->add_output()->set_name("Y");
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    return m;
  }

  std::string Write(const onnx::ModelProto& m, const std::string& name = "model.onnx") {
    std::string bytes;
    EXPECT_TRUE(m.SerializeToString(&bytes));
    return WriteBytes(bytes, name);
  }
  std::string WriteBytes(const std::string& bytes, const std::string& name) {
    fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary).write(bytes.data(), bytes.size());
    return p.string();
  }

  fs::path dir_;
};

TEST_F(OnnxImportTest, ImportsTinyModel) {
  auto g = ImportOnnx(Write(TinyModel()));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->inputs.size(), 1u);
  EXPECT_EQ(g->values[g->inputs[0]].name, "X");
  EXPECT_EQ(ir::SymShapeToString(*g->values[g->inputs[0]].shape), "[batch,4]");
  ASSERT_EQ(g->outputs.size(), 1u);
  EXPECT_EQ(g->values[g->outputs[0]].name, "Y");
  EXPECT_EQ(g->opset, 17);
  int w = g->FindValue("W");
  ASSERT_GE(w, 0);
  ASSERT_TRUE(g->values[w].is_constant());
  EXPECT_FLOAT_EQ(g->values[w].constant.data_as<float>()[3], 0.5f);
  ASSERT_TRUE(passes::InferShapes(*g).ok());
  EXPECT_EQ(ir::SymShapeToString(*g->values[g->outputs[0]].shape), "[batch,2]");
  EXPECT_EQ(g->values[g->outputs[0]].dtype, DType::kFloat32);
}

TEST_F(OnnxImportTest, RejectsOpsetsOutside13To20) {
  for (int64_t opset : {11, 12, 21}) {
    auto g = ImportOnnx(Write(TinyModel(opset)));
    ASSERT_FALSE(g.ok()) << opset;
    EXPECT_NE(g.status().message().find(fmt::format("opset {}", opset)), std::string::npos)
        << g.status().message();
    EXPECT_NE(g.status().message().find("13..20"), std::string::npos);
  }
  for (int64_t opset : {13, 18, 20}) EXPECT_TRUE(ImportOnnx(Write(TinyModel(opset))).ok());
}

TEST_F(OnnxImportTest, UnknownOpNamesOpNodeAndOpset) {
  auto m = TinyModel(18);
  m.mutable_graph()->mutable_node(0)->set_op_type("FrobnicateV2");
  auto g = ImportOnnx(Write(m));
  ASSERT_FALSE(g.ok());
  const std::string& msg = g.status().message();
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(msg.find("FrobnicateV2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'mm'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("opset 18"), std::string::npos) << msg;
}

TEST_F(OnnxImportTest, NonDefaultDomainIsNamed) {
  auto m = TinyModel();
  m.mutable_graph()->mutable_node(0)->set_domain("com.microsoft");
  auto g = ImportOnnx(Write(m));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("com.microsoft"), std::string::npos) << g.status().message();
}

TEST_F(OnnxImportTest, SubgraphsAreUnsupported) {
  auto m = TinyModel();
  auto* n = m.mutable_graph()->add_node();
  n->set_name("branch");
  n->set_op_type("If");
  n->add_input("Y");
  n->add_output("Z");
  auto* a = n->add_attribute();
  a->set_name("then_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("then");
  auto g = ImportOnnx(Write(m));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("control flow"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("branch"), std::string::npos);
}

TEST_F(OnnxImportTest, EveryTruncationIsAnErrorNotACrash) {
  std::string bytes;
  ASSERT_TRUE(TinyModel().SerializeToString(&bytes));
  int failures = 0;
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto g = ImportOnnx(WriteBytes(bytes.substr(0, len), "cut.onnx"));
    EXPECT_FALSE(g.ok()) << "prefix of " << len << " bytes imported";
    failures += !g.ok();
  }
  EXPECT_EQ(failures, static_cast<int>(bytes.size()));
  auto g = ImportOnnx(WriteBytes(bytes.substr(0, bytes.size() / 2), "half.onnx"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(g.status().message().find("half.onnx"), std::string::npos);
}

TEST_F(OnnxImportTest, GarbageBytesAreAnError) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::string bytes(64 + trial * 13, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    EXPECT_FALSE(ImportOnnx(WriteBytes(bytes, "garbage.onnx")).ok());
  }
  EXPECT_EQ(ImportOnnx((dir_ / "missing.onnx").string()).status().code(), StatusCode::kNotFound);
}

TEST_F(OnnxImportTest, WrongInitializerSizeIsAnError) {
  auto m = TinyModel();
  m.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(28, '\0'));
  auto g = ImportOnnx(Write(m));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(g.status().message().find("'W'"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("32 bytes"), std::string::npos) << g.status().message();

  auto m2 = TinyModel();
  auto* w = m2.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  for (int i = 0; i < 7; ++i) w->add_float_data(1.0f);
  g = ImportOnnx(Write(m2));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("float_data has 7"), std::string::npos)
      << g.status().message();
}

TEST_F(OnnxImportTest, HugeClaimedDimsAreAnErrorNotAnAllocation) {
  for (bool external : {false, true}) {
    auto m = TinyModel();
    auto* w = m.mutable_graph()->mutable_initializer(0);
    w->clear_dims();
    w->add_dims(int64_t{1} << 20);
    w->add_dims(int64_t{1} << 19);  // 2^39 floats = 2 TiB
    if (external) {
      WriteBytes(std::string(32, '\0'), "w.bin");
      w->clear_raw_data();
      w->set_data_location(onnx::TensorProto::EXTERNAL);
      auto* e = w->add_external_data();
      e->set_key("location");
      e->set_value("w.bin");
    }
    auto g = ImportOnnx(Write(m));
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kDataLoss) << g.status().ToString();
    EXPECT_NE(g.status().message().find("'W'"), std::string::npos);
  }
  auto m = TinyModel();
  m.mutable_graph()->mutable_initializer(0)->add_dims(int64_t{1} << 62);
  EXPECT_FALSE(ImportOnnx(Write(m)).ok());
}

TEST_F(OnnxImportTest, TypedInitializerFields) {
  auto m = TinyModel();
  auto* g = m.mutable_graph();
  auto* w = g->mutable_initializer(0);
  w->clear_raw_data();
  for (int i = 0; i < 8; ++i) w->add_float_data(static_cast<float>(i));
  auto add = [&](const char* name, int type, int n) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    t->add_dims(n);
    return t;
  };
  auto* i64 = add("i64", onnx::TensorProto::INT64, 2);
  i64->add_int64_data(-5);
  i64->add_int64_data(1LL << 40);
  auto* i32 = add("i32", onnx::TensorProto::INT32, 1);
  i32->add_int32_data(-7);
  auto* i8 = add("i8", onnx::TensorProto::INT8, 1);
  i8->add_int32_data(-3);
  auto* u8 = add("u8", onnx::TensorProto::UINT8, 1);
  u8->add_int32_data(200);
  auto* b = add("b", onnx::TensorProto::BOOL, 2);
  b->add_int32_data(1);
  b->add_int32_data(0);
  auto* f16 = add("f16", onnx::TensorProto::FLOAT16, 1);
  f16->add_int32_data(FloatToHalf(1.5f));
  auto* bf16 = add("bf16", onnx::TensorProto::BFLOAT16, 1);
  bf16->add_int32_data(FloatToBFloat16(-2.25f));
  auto* f64 = add("f64", onnx::TensorProto::DOUBLE, 1);
  f64->add_double_data(3.25);
  auto* raw16 = add("raw16", onnx::TensorProto::FLOAT16, 2);
  uint16_t halves[2] = {FloatToHalf(0.5f), FloatToHalf(-4.0f)};
  raw16->set_raw_data(std::string(reinterpret_cast<const char*>(halves), 4));

  auto r = ImportOnnx(Write(m));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto c = [&](const char* name) -> const Tensor& {
    return r->values[r->FindValue(name)].constant;
  };
  EXPECT_EQ(c("W").data_as<float>()[7], 7.0f);
  EXPECT_EQ(c("i64").data_as<int64_t>()[0], -5);
  EXPECT_EQ(c("i64").data_as<int64_t>()[1], 1LL << 40);
  EXPECT_EQ(c("i32").data_as<int32_t>()[0], -7);
  EXPECT_EQ(c("i8").data_as<int8_t>()[0], -3);
  EXPECT_EQ(c("u8").data_as<uint8_t>()[0], 200);
  EXPECT_EQ(c("b").dtype(), DType::kBool);
  EXPECT_EQ(c("b").GetInt(0), 1);
  EXPECT_EQ(c("b").GetInt(1), 0);
  EXPECT_EQ(c("f16").dtype(), DType::kFloat16);
  EXPECT_EQ(c("f16").GetDouble(0), 1.5);
  EXPECT_EQ(c("bf16").GetDouble(0), -2.25);
  EXPECT_EQ(c("f64").GetDouble(0), 3.25);
  EXPECT_EQ(c("raw16").GetDouble(1), -4.0);
}

TEST_F(OnnxImportTest, ConstantNodesBecomeConstants) {
  auto m = TinyModel();
  auto* g = m.mutable_graph();
  auto* shape = g->add_node();
  shape->set_op_type("Constant");
  shape->add_output("target");
  auto* a = shape->add_attribute();
  a->set_name("value_ints");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(-1);
  a->add_ints(1);
  auto* scale = g->add_node();
  scale->set_op_type("Constant");
  scale->add_output("scale");
  auto* fa = scale->add_attribute();
  fa->set_name("value_float");
  fa->set_type(onnx::AttributeProto::FLOAT);
  fa->set_f(0.25f);
  auto* r = g->add_node();
  r->set_op_type("Reshape");
  r->add_input("Y");
  r->add_input("target");
  r->add_output("R");
  auto* mul = g->add_node();
  mul->set_op_type("Mul");
  mul->add_input("R");
  mul->add_input("scale");
  mul->add_output("Out");
  g->mutable_output(0)->set_name("Out");
  auto graph = ImportOnnx(Write(m));
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  EXPECT_EQ(graph->OpCounts().count("Constant"), 0u);
  int t = graph->FindValue("target");
  ASSERT_TRUE(graph->values[t].is_constant());
  EXPECT_EQ(graph->values[t].constant.GetInt(0), -1);
  EXPECT_EQ(graph->values[graph->FindValue("scale")].constant.GetDouble(0), 0.25);
  ASSERT_TRUE(passes::InferShapes(*graph).ok());
  EXPECT_EQ(ir::SymShapeToString(*graph->values[graph->outputs[0]].shape), "[2*batch,1]");
}

TEST_F(OnnxImportTest, InitializerListedAsInputIsAConstant) {
  auto m = TinyModel();
  auto* in = m.mutable_graph()->add_input();
  in->set_name("W");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(4);
  tt->mutable_shape()->add_dim()->set_dim_value(2);
  auto g = ImportOnnx(Write(m));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->inputs.size(), 1u);
  EXPECT_TRUE(g->values[g->FindValue("W")].is_constant());
}

TEST_F(OnnxImportTest, UnnamedAndOddDimsBecomeSymbols) {
  auto m = TinyModel();
  auto* shape =
      m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(0)->set_dim_param("batch size-1");
  auto g = ImportOnnx(Write(m));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const ir::Dim& d = (*g->values[g->inputs[0]].shape)[0];
  EXPECT_FALSE(d.IsStatic());
  EXPECT_EQ(ir::Dim::Parse(d.ToString()).value(), d);
  shape->mutable_dim(0)->clear_dim_param();
  g = ImportOnnx(Write(m));
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE((*g->values[g->inputs[0]].shape)[0].IsStatic());
}

TEST_F(OnnxImportTest, DuplicateNamesAreErrors) {
  auto m = TinyModel();
  *m.mutable_graph()->add_input() = m.graph().input(0);
  auto g = ImportOnnx(Write(m));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("'X' is declared twice"), std::string::npos)
      << g.status().message();
  auto m2 = TinyModel();
  m2.mutable_graph()->mutable_node(0)->set_output(0, "W");
  g = ImportOnnx(Write(m2));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("produced twice"), std::string::npos);
}

TEST_F(OnnxImportTest, UndefinedValueIsAnError) {
  auto m = TinyModel();
  m.mutable_graph()->mutable_node(0)->set_input(1, "nowhere");
  auto g = ImportOnnx(Write(m));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nowhere"), std::string::npos);
  auto m2 = TinyModel();
  m2.mutable_graph()->mutable_output(0)->set_name("nothing");
  g = ImportOnnx(Write(m2));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nothing"), std::string::npos);
}

// External data: W's 32 bytes at `offset` of `location`.
class OnnxExternalTest : public OnnxImportTest {
 protected:
  onnx::ModelProto Model(const std::string& location, int64_t offset, int64_t length) {
    auto m = TinyModel();
    auto* w = m.mutable_graph()->mutable_initializer(0);
    w->clear_raw_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto kv = [&](const char* k, std::string v) {
      auto* e = w->add_external_data();
      e->set_key(k);
      e->set_value(std::move(v));
    };
    kv("location", location);
    kv("offset", std::to_string(offset));
    if (length >= 0) kv("length", std::to_string(length));
    return m;
  }
  void WriteWeights(const std::string& name, size_t pad) {
    std::string bytes(pad, 'x');
    for (int i = 0; i < 8; ++i) {
      float f = static_cast<float>(i) + 0.5f;
      bytes.append(reinterpret_cast<const char*>(&f), 4);
    }
    WriteBytes(bytes, name);
  }
};

TEST_F(OnnxExternalTest, ReadsExternalData) {
  WriteWeights("weights/w.bin", 16);
  auto g = ImportOnnx(Write(Model("weights/w.bin", 16, 32)));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->values[g->FindValue("W")].constant.data_as<float>()[7], 7.5f);
}

TEST_F(OnnxExternalTest, InMemoryModels) {
  WriteWeights("w.bin", 0);
  std::string bytes;
  ASSERT_TRUE(Model("w.bin", 0, 32).SerializeToString(&bytes));
  std::span<const uint8_t> span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto g = ImportOnnxFromBytes(span, dir_.string());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->values[g->FindValue("W")].constant.data_as<float>()[1], 1.5f);
  g = ImportOnnxFromBytes(span, "");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("external data"), std::string::npos);
  EXPECT_FALSE(ImportOnnxFromBytes(span.first(span.size() / 2), dir_.string()).ok());
}

TEST_F(OnnxExternalTest, OutOfRangeOffsetsAndLengthsAreErrors) {
  WriteWeights("w.bin", 0);
  for (auto [offset, length] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 32}, {100, 32}, {0, 40}, {0, 16}, {int64_t{1} << 62, 32}}) {
    auto g = ImportOnnx(Write(Model("w.bin", offset, length)));
    ASSERT_FALSE(g.ok()) << offset << "+" << length;
    EXPECT_NE(g.status().message().find("'W'"), std::string::npos) << g.status().message();
  }
  auto g = ImportOnnx(Write(Model("w.bin", 8, -1)));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("outside"), std::string::npos) << g.status().message();
}

TEST_F(OnnxExternalTest, PathsMustStayInsideTheModelFolder) {
  WriteWeights("w.bin", 0);
  fs::create_directories(dir_ / "sub");
  for (const std::string& loc :
       std::vector<std::string>{"../w.bin", "sub/../../w.bin", (dir_ / "w.bin").string()}) {
    std::string path = Write(Model(loc, 0, 32), "sub/model.onnx");
    auto g = ImportOnnx(path);
    ASSERT_FALSE(g.ok()) << loc;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << g.status().ToString();
  }
  auto g = ImportOnnx(Write(Model("absent.bin", 0, 32)));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
  g = ImportOnnx(Write(Model("w.bin", -1, 32)));
  ASSERT_FALSE(g.ok());
}

TEST_F(OnnxImportTest, InlinesModelLocalFunctions) {
  auto m = TinyModel();
  auto* f = m.add_functions();
  f->set_name("ScaledRelu");
  f->set_domain("custom.fn");
  f->add_input("a");
  f->add_output("b");
  f->add_attribute("alpha");
  auto* relu = f->add_node();
  relu->set_op_type("Relu");
  relu->add_input("a");
  relu->add_output("r");
  auto* lr = f->add_node();
  lr->set_op_type("LeakyRelu");
  lr->add_input("r");
  lr->add_output("b");
  auto* ref = lr->add_attribute();
  ref->set_name("alpha");
  ref->set_type(onnx::AttributeProto::FLOAT);
  ref->set_ref_attr_name("alpha");
  auto* call = m.mutable_graph()->add_node();
  call->set_name("call");
  call->set_op_type("ScaledRelu");
  call->set_domain("custom.fn");
  call->add_input("Y");
  call->add_output("Z");
  auto* alpha = call->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.5f);
  m.mutable_graph()->mutable_output(0)->set_name("Z");
  auto* op = m.add_opset_import();
  op->set_domain("custom.fn");
  op->set_version(1);
  auto g = ImportOnnx(Write(m));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto counts = g->OpCounts();
  EXPECT_EQ(counts["Relu"], 1);
  EXPECT_EQ(counts["LeakyRelu"], 1);
  for (const auto& n : g->nodes) {
    if (n.op_type == "LeakyRelu") {
      EXPECT_EQ(n.GetFloat("alpha", 0), 0.5);
    }
  }
  EXPECT_EQ(g->values[g->outputs[0]].name, "Z");
  ASSERT_TRUE(passes::InferShapes(*g).ok());
  EXPECT_EQ(ir::SymShapeToString(*g->values[g->outputs[0]].shape), "[batch,2]");
}

}  // namespace
}  // namespace surge::engine::import
