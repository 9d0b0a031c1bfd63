// The calibration cache file: round trip, and every way a file can be wrong (missing, not a
// cache, truncated, corrupt, other version, malformed payload); the model hash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/mmap_file.h"
#include "engine/plan/plan_file.h"
#include "engine/quant/calibration_cache.h"

namespace surge::engine::quant {
namespace {

namespace fs = std::filesystem;

CalibrationCache Sample() {
  CalibrationCache c;
  c.model_hash = "0123456789abcdef0123456789abcdef";
  c.model = "tests/model.onnx";
  c.surge_version = "0.1.0";
  c.batches = 3;
  c.sequences = 24;
  c.tokens = 700;
  std::mt19937 g(1);
  std::normal_distribution<float> d(0.f, 2.f);
  for (const char* name : {"/layer.0/x", "/layer.1/x"}) {
    TensorStats s{AbsHistogram(256), 0, 0};
    std::vector<float> v(4000);
    for (float& x : v) x = d(g);
    s.hist.Add(v);
    s.min = *std::min_element(v.begin(), v.end());
    s.max = *std::max_element(v.begin(), v.end());
    c.tensors.emplace(name, std::move(s));
  }
  TensorMap batch;
  Tensor ids(DType::kInt64, {2, 3});
  for (int i = 0; i < 6; ++i) ids.data_as<int64_t>()[i] = 100 + i;
  Tensor mask(DType::kInt32, {2, 3});
  for (int i = 0; i < 6; ++i) mask.data_as<int32_t>()[i] = i != 5;
  Tensor f(DType::kFloat32, {2});
  f.data_as<float>()[0] = 0.25f;
  f.data_as<float>()[1] = -3.5f;
  batch.emplace("input_ids", ids);
  batch.emplace("attention_mask", mask);
  batch.emplace("extra", f);
  c.holdout.push_back(batch);
  return c;
}

std::span<const uint8_t> Span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

void ExpectSame(const CalibrationCache& a, const CalibrationCache& b) {
  EXPECT_EQ(a.model_hash, b.model_hash);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.surge_version, b.surge_version);
  EXPECT_EQ(a.batches, b.batches);
  EXPECT_EQ(a.sequences, b.sequences);
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, s] : a.tensors) {
    const TensorStats& t = b.tensors.at(name);
    EXPECT_EQ(s.hist.counts(), t.hist.counts()) << name;
    EXPECT_EQ(s.hist.range(), t.hist.range()) << name;
    EXPECT_EQ(s.hist.max_abs(), t.hist.max_abs()) << name;
    EXPECT_EQ(s.hist.total(), t.hist.total()) << name;
    EXPECT_EQ(s.min, t.min) << name;
    EXPECT_EQ(s.max, t.max) << name;
  }
  ASSERT_EQ(a.holdout.size(), b.holdout.size());
  for (size_t i = 0; i < a.holdout.size(); ++i) {
    ASSERT_EQ(a.holdout[i].size(), b.holdout[i].size());
    for (const auto& [name, t] : a.holdout[i]) {
      const Tensor& u = b.holdout[i].at(name);
      ASSERT_EQ(t.dtype(), u.dtype()) << name;
      ASSERT_EQ(t.shape(), u.shape()) << name;
      EXPECT_EQ(std::memcmp(t.data(), u.data(), t.nbytes()), 0) << name;
    }
  }
}

class CacheFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("surge_cache_test." + std::to_string(getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string Error(const std::string& bytes) {
    auto r = ReadCache(Write("c.calib", bytes));
    EXPECT_FALSE(r.ok());
    return r.ok() ? "" : r.status().ToString();
  }
  fs::path dir_;
};

TEST_F(CacheFile, RoundTripsInMemoryAndOnDisk) {
  const CalibrationCache c = Sample();
  const std::string bytes = SerializeCache(c);
  auto back = ParseCache(Span(bytes), "memory");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSame(c, *back);
  const std::string path = (dir_ / "model.calib").string();
  ASSERT_TRUE(WriteCache(c, path).ok());
  auto disk = ReadCache(path);
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  ExpectSame(c, *disk);
  // Serialisation is deterministic: a cache rewritten from a read one is byte-identical.
  EXPECT_EQ(SerializeCache(*disk), bytes);
}

TEST_F(CacheFile, MissingFile) {
  auto r = ReadCache((dir_ / "nope.calib").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
}

TEST_F(CacheFile, NotACache) {
  EXPECT_NE(Error("{\"tensors\": {}}").find("is not a calibration cache"), std::string::npos);
  EXPECT_NE(Error("").find("is not a calibration cache"), std::string::npos);
}

TEST_F(CacheFile, TruncatedAnywhere) {
  const std::string bytes = SerializeCache(Sample());
  for (size_t keep : {size_t{12}, size_t{31}, size_t{32}, bytes.size() / 2, bytes.size() - 1}) {
    const std::string e = Error(bytes.substr(0, keep));
    EXPECT_NE(e.find("truncated"), std::string::npos) << keep << ": " << e;
  }
  const std::string longer = Error(bytes + "x");
  EXPECT_NE(longer.find("announces"), std::string::npos) << longer;
}

TEST_F(CacheFile, CorruptPayload) {
  std::string bytes = SerializeCache(Sample());
  bytes[bytes.size() - 40] ^= 0x04;
  const std::string e = Error(bytes);
  EXPECT_NE(e.find("is corrupt: checksum"), std::string::npos) << e;
}

TEST_F(CacheFile, OtherFormatVersion) {
  std::string bytes = SerializeCache(Sample());
  bytes[8] = 9;
  auto r = ParseCache(Span(bytes), "v9.calib");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("format version 9"), std::string::npos);
}

// A payload with a valid header and checksum but malformed content.
std::string Wrap(const std::string& payload) {
  std::string out(kCalibrationMagic);
  auto put = [&](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(kCalibrationCacheVersion);
  put(uint32_t{0});
  put(uint64_t{payload.size()});
  put(plan::Checksum(Span(payload)));
  return out + payload;
}

TEST_F(CacheFile, MalformedPayloadsNameTheField) {
  const std::string head =
      R"({"model_hash":"h","model":"m","surge_version":"v","batches":1,"sequences":1,"tokens":1,)";
  EXPECT_NE(Error(Wrap("not json")).find("not JSON"), std::string::npos);
  EXPECT_NE(Error(Wrap(R"({"model":"m"})")).find("'model_hash' is missing"), std::string::npos);
  EXPECT_NE(Error(Wrap(head + R"("tensors":[],"holdout":[]})")).find("'tensors'"),
            std::string::npos);
  const std::string t = R"("tensors":{"x":{"min":0,"max":1,"range":1,"max_abs":1,"non_finite":0,)";
  EXPECT_NE(Error(Wrap(head + t + R"("counts":[1,-2]}},"holdout":[]})")).find("tensor 'x'"),
            std::string::npos);
  EXPECT_NE(Error(Wrap(head + t + R"("counts":[1,2,3]}},"holdout":[]})")).find("even number"),
            std::string::npos);
  EXPECT_NE(Error(Wrap(head + t + R"("counts":[1,2]}}})")).find("'holdout'"), std::string::npos);
  const std::string ok_t = t + R"("counts":[1,2]}},)";
  EXPECT_NE(
      Error(Wrap(head + ok_t + R"("holdout":[{"ids":{"dtype":"int64","shape":[2],"data":[1]}}]})"))
          .find("has shape [2] but 1 values"),
      std::string::npos);
  EXPECT_NE(Error(Wrap(head + ok_t +
                       R"("holdout":[{"ids":{"dtype":"float16","shape":[1],"data":[1]}}]})"))
                .find("dtype float16"),
            std::string::npos);
  // The same with valid content parses.
  auto ok = ParseCache(Span(Wrap(head + ok_t + R"("holdout":[]})")), "ok");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->tensors.at("x").hist.total(), 3u);
}

TEST(ModelHash, SameGraphSameHashChangedWeightOtherHash) {
  auto make = [](float w0) {
    ir::Graph g;
    int x = g.AddInput("x", DType::kFloat32, {ir::Dim::Symbol("batch"), 4});
    Tensor w(DType::kFloat32, {4, 2});
    for (int i = 0; i < 8; ++i) w.data_as<float>()[i] = 0.1f * i;
    w.data_as<float>()[0] = w0;
    int wc = g.AddConstant("w", w);
    ir::Node n;
    n.op_type = "MatMul";
    n.name = "mm";
    n.inputs = {x, wc};
    n.outputs = {g.AddValue("y", DType::kFloat32, ir::SymShape{ir::Dim::Symbol("batch"), 2})};
    g.AddNode(n);
    g.outputs = {n.outputs[0]};
    return g;
  };
  auto a = ModelHash(make(1.f)), b = ModelHash(make(1.f)), c = ModelHash(make(1.0001f));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_EQ(a->size(), 32u);
}

}  // namespace
}  // namespace surge::engine::quant
