// The host side of a CUDA request (input_index.h): integer inputs read as int32 with their ranges
// checked, and the packed form's index arrays against a plain per-token loop. No GPU needed.
#include "engine/backends/cuda/input_index.h"

#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <string>
#include <vector>

namespace surge::engine::cuda {
namespace {

template <typename T>
Tensor Of(DType dtype, const std::vector<T>& v) {
  Tensor t(dtype, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data_as<T>()[i] = v[i];
  return t;
}

Tensor Int64s(const std::vector<int64_t>& v) { return Of(DType::kInt64, v); }

TEST(InputIndex, ReadIntsConvertsEveryIntegerDtype) {
  std::vector<int32_t> out(5);
  ASSERT_TRUE(ReadInts(Int64s({0, -7, INT32_MAX, INT32_MIN, 42}), "ids", out.data()).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{0, -7, INT32_MAX, INT32_MIN, 42}));
  auto first3 = [&] { return std::vector<int32_t>(out.begin(), out.begin() + 3); };
  ASSERT_TRUE(ReadInts(Of<int32_t>(DType::kInt32, {-5, 5, 15}), "ids", out.data()).ok());
  EXPECT_EQ(first3(), (std::vector<int32_t>{-5, 5, 15}));
  ASSERT_TRUE(ReadInts(Of<uint8_t>(DType::kBool, {1, 0, 1}), "attention_mask", out.data()).ok());
  EXPECT_EQ(first3(), (std::vector<int32_t>{1, 0, 1}));
  ASSERT_TRUE(
      ReadInts(Of<float>(DType::kFloat32, {1.f, 0.f, 0.5f}), "attention_mask", out.data()).ok());
  EXPECT_EQ(first3(), (std::vector<int32_t>{1, 0, 1}));
  Status st = ReadInts(Tensor(DType::kFloat16, {3}), "attention_mask", out.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("attention_mask"), std::string::npos) << st.message();
}

TEST(InputIndex, ReadIntsNamesTheFirstValueOutsideInt32) {
  std::vector<int32_t> out(1000);
  for (int64_t bad : {int64_t{INT32_MAX} + 1, int64_t{INT32_MIN} - 1, int64_t{1} << 40,
                      -(int64_t{1} << 40), INT64_MAX, INT64_MIN}) {
    std::vector<int64_t> v(1000, 3);
    v[617] = bad;
    v[900] = bad;  // only the first is named
    Status st = ReadInts(Int64s(v), "input_ids", out.data());
    EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << bad;
    EXPECT_NE(st.message().find("input 'input_ids': value " + std::to_string(bad) +
                                " at index 617 does not fit int32"),
              std::string::npos)
        << st.message();
  }
}

TEST(InputIndex, CheckRangeNamesTheFirstValueOutside) {
  std::vector<int32_t> v(333);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i % 100);
  EXPECT_TRUE(CheckRange(v, 100, "id").ok());
  EXPECT_TRUE(CheckRange({}, 100, "id").ok());
  for (int32_t bad : {100, 101, INT32_MAX, -1, INT32_MIN}) {
    std::vector<int32_t> w = v;
    w[250] = bad;
    w[300] = 100;
    Status st = CheckRange(w, 100, "input 'input_ids': id");
    EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << bad;
    EXPECT_NE(st.message().find("input 'input_ids': id " + std::to_string(bad) +
                                " at flat index 250 is out of range [0, 100)"),
              std::string::npos)
        << st.message();
  }
  // A limit of zero admits nothing; one beyond int32 admits every non-negative value.
  EXPECT_EQ(CheckRange(v, 0, "id").code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(CheckRange(std::vector<int32_t>{0, INT32_MAX}, int64_t{1} << 40, "id").ok());
  EXPECT_EQ(CheckRange(std::vector<int32_t>{0, -1}, int64_t{1} << 40, "id").code(),
            StatusCode::kOutOfRange);
}

TEST(InputIndex, PackRealTokensMatchesAPerTokenLoop) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t B = 1 + rng() % 9, S = 1 + rng() % 70;
    std::vector<int32_t> mask(B * S);
    for (int64_t b = 0; b < B; ++b) {
      const int kind = static_cast<int>(rng() % 4);
      const int64_t len = rng() % (S + 1);
      for (int64_t s = 0; s < S; ++s) {
        int32_t real = 0;
        if (kind == 0) real = s < len;                         // padded on the right
        if (kind == 1) real = rng() % 3 != 0;                  // gaps anywhere
        if (kind == 2) real = s >= S - len;                    // padded on the left
        if (kind == 3) real = s < len ? (s % 2 ? 2 : -1) : 0;  // other non-zero values
        mask[b * S + s] = real;
      }
    }
    std::vector<int32_t> cu(B + 1, -1), cls(B, -1), rows(B * S, -1);
    const int64_t t = PackRealTokens(mask.data(), B, S, cu.data(), cls.data(), rows.data());
    std::vector<int32_t> want_cu, want_rows;
    for (int64_t b = 0; b < B; ++b) {
      want_cu.push_back(static_cast<int32_t>(want_rows.size()));
      for (int64_t s = 0; s < S; ++s) {
        if (mask[b * S + s] != 0) want_rows.push_back(static_cast<int32_t>(b * S + s));
      }
    }
    want_cu.push_back(static_cast<int32_t>(want_rows.size()));
    ASSERT_EQ(t, static_cast<int64_t>(want_rows.size())) << "trial " << trial;
    EXPECT_EQ(cu, want_cu) << "trial " << trial;
    EXPECT_EQ(cls, std::vector<int32_t>(want_cu.begin(), want_cu.end() - 1)) << "trial " << trial;
    EXPECT_EQ(std::vector<int32_t>(rows.begin(), rows.begin() + t), want_rows) << "trial " << trial;
  }
}

}  // namespace
}  // namespace surge::engine::cuda
