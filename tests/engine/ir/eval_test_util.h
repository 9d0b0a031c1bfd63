// Helpers for the reference-evaluation tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "engine/ir/eval.h"

namespace surge::engine::ir::testing {

template <typename T>
Tensor Make(DType dtype, Shape shape, std::vector<T> values) {
  Tensor t(dtype, shape);
  SURGE_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "bad test tensor");
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
  return t;
}
inline Tensor F32(Shape shape, std::vector<float> v) { return Make(DType::kFloat32, shape, v); }
inline Tensor I64(Shape shape, std::vector<int64_t> v) { return Make(DType::kInt64, shape, v); }
inline Tensor I32(Shape shape, std::vector<int32_t> v) { return Make(DType::kInt32, shape, v); }
inline Tensor Bool(Shape shape, std::vector<uint8_t> v) {
  Tensor t(DType::kBool, shape);
  for (size_t i = 0; i < v.size(); ++i) t.data_as<bool>()[i] = v[i] != 0;
  return t;
}

inline Node MakeNode(std::string op, std::map<std::string, Attribute> attrs = {},
                     std::string domain = "", int num_outputs = 1) {
  Node n;
  n.op_type = std::move(op);
  n.domain = std::move(domain);
  n.name = "n0";
  n.attrs = std::move(attrs);
  for (int i = 0; i < num_outputs; ++i) n.outputs.push_back(i);
  return n;
}

// Evaluates and asserts success; returns the outputs.
inline std::vector<Tensor> Eval(const Node& node, std::vector<Tensor> inputs) {
  std::vector<Tensor> out;
  Status s = EvalNode(node, inputs, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// Evaluates and returns the error (fails the test on success).
inline Status EvalError(const Node& node, std::vector<Tensor> inputs) {
  std::vector<Tensor> out;
  Status s = EvalNode(node, inputs, &out);
  EXPECT_FALSE(s.ok()) << node.op_type << " unexpectedly succeeded";
  return s;
}

// Evaluates and fails the test on success, where the error itself is not examined.
inline void ExpectEvalFails(const Node& node, std::vector<Tensor> inputs) {
  (void)EvalError(node, std::move(inputs));
}

inline std::vector<double> Values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.GetDouble(i);
  return v;
}

inline void ExpectNear(const Tensor& t, Shape shape, std::vector<double> expected,
                       double tol = 1e-5) {
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(static_cast<size_t>(t.numel()), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(t.GetDouble(static_cast<int64_t>(i)), expected[i],
                tol * std::max(1.0, std::abs(expected[i])))
        << "at " << i;
  }
}

}  // namespace surge::engine::ir::testing
