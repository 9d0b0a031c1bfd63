// The shared op-test harness for the CPU backend: random inputs (never zeros), the reference
// (ir::EvalNode) and the CPU kernel on the same node, compared element by element.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/backends/cpu/isa.h"
#include "engine/backends/cpu/node_kernels.h"
#include "engine/ir/eval.h"

namespace surge::engine::cpu::testing {

// The ISAs this CPU can run, best first.
inline std::vector<Isa> AvailableIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    if (CpuSupports(isa)) out.push_back(isa);
  }
  return out;
}

class Rng {
 public:
  explicit Rng(uint32_t seed) : gen_(seed) {}
  // Uniform magnitude in [0.05, scale], random sign: never zero.
  Tensor Floats(Shape shape, float scale = 1.0f) {
    Tensor t(DType::kFloat32, shape);
    std::uniform_real_distribution<float> mag(0.05f, scale);
    std::bernoulli_distribution neg(0.5);
    for (float& v : t.span<float>()) v = neg(gen_) ? -mag(gen_) : mag(gen_);
    return t;
  }
  Tensor Ints(Shape shape, int64_t lo, int64_t hi) {
    Tensor t(DType::kInt64, shape);
    std::uniform_int_distribution<int64_t> d(lo, hi);
    for (int64_t& v : t.span<int64_t>()) v = d(gen_);
    return t;
  }
  std::mt19937& gen() { return gen_; }

 private:
  std::mt19937 gen_;
};

inline ir::Node SurgeNode(std::string op, std::map<std::string, ir::Attribute> attrs,
                          int num_inputs, int num_outputs = 1) {
  ir::Node n;
  n.op_type = std::move(op);
  n.domain = std::string(ir::kSurgeDomain);
  n.name = "test_" + n.op_type;
  n.attrs = std::move(attrs);
  for (int i = 0; i < num_inputs; ++i) n.inputs.push_back(i);
  for (int i = 0; i < num_outputs; ++i) n.outputs.push_back(num_inputs + i);
  return n;
}

inline OutputAllocator OwnedOutputs() {
  return [](size_t, const Shape& shape) { return Tensor(DType::kFloat32, shape); };
}

// Max |a-b| / max(1, |ref|) over all elements; fails on shape mismatch.
inline void ExpectClose(const Tensor& got, const Tensor& ref, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  double worst = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.GetDouble(i), g = got.GetDouble(i);
    const double err = std::abs(g - r) / std::max(1.0, std::abs(r));
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": worst error at element " << at << " (got "
                        << (at >= 0 ? got.GetDouble(at) : 0) << ", reference "
                        << (at >= 0 ? ref.GetDouble(at) : 0) << ")";
}

// Runs `node` through the reference and through `run` (the CPU kernel) and compares every output.
template <typename RunFn>
void CheckOp(const ir::Node& node, const std::vector<Tensor>& inputs, RunFn run, double tol,
             const std::string& what) {
  std::vector<Tensor> ref;
  Status rs = ir::EvalNode(node, inputs, &ref);
  ASSERT_TRUE(rs.ok()) << what << ": reference failed: " << rs.ToString();
  std::vector<const Tensor*> in;
  for (const Tensor& t : inputs) in.push_back(t.defined() ? &t : nullptr);
  std::vector<Tensor> got;
  Status s = run(std::span<const Tensor* const>(in), &got);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
  ASSERT_LE(got.size(), ref.size()) << what;
  ASSERT_FALSE(got.empty()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ExpectClose(got[i], ref[i], tol, what + " output " + std::to_string(i));
  }
}

}  // namespace surge::engine::cpu::testing
