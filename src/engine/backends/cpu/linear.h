// Linear (Y = act(X·W + B) + R) on oneDNN matmul. At build time the weight [K,N] is reordered
// into the blocked layout oneDNN picks for the profile's opt M (format_tag::any) and stored in the
// plan; at run time one primitive per distinct M is created on first use and cached (thread-safe).
// Bias and activation (gelu_erf, gelu_tanh, tanh, relu) and the residual add are oneDNN post-ops.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "engine/backends/cpu/kernels.h"

namespace surge::engine::cpu {

struct LinearSpec {
  int64_t k = 0, n = 0;
  bool has_bias = false;
  bool has_residual = false;
  Activation act = Activation::kNone;
};

// Weights as stored in the plan: a oneDNN memory descriptor (raw bytes of the C struct, valid for
// the same oneDNN version) and the data in that layout.
struct PackedWeights {
  std::string desc;  // empty: plain row-major [K,N]
  std::vector<uint8_t> data;
  std::string impl;  // oneDNN implementation chosen at build time, for Describe()
};

// Reorders row-major w[K,N] into the layout oneDNN prefers for M = m_opt.
Result<PackedWeights> PackLinearWeights(const LinearSpec& spec, const float* w, int64_t m_opt);

// oneDNN's version as "major.minor.patch" and the descriptor size: plans record both.
std::string OneDnnVersion();
size_t OneDnnDescSize();

class LinearKernel {
 public:
  // `packed_desc` empty means `weights` is plain [K,N] row-major. `weights` must stay valid and
  // 64-byte aligned for the kernel's life (the caller copies when it is not aligned).
  static Result<std::unique_ptr<LinearKernel>> Create(const LinearSpec& spec,
                                                      std::string_view packed_desc,
                                                      const void* weights, size_t weight_bytes);
  ~LinearKernel();

  // y[M,N] = act(x[M,K]·W + bias) + residual. Thread-safe.
  Status Run(const float* x, const float* bias, const float* residual, float* y, int64_t m) const;
  const LinearSpec& spec() const { return spec_; }
  std::string Describe() const;

 private:
  struct Impl;
  explicit LinearKernel(std::unique_ptr<Impl> impl, LinearSpec spec);
  std::unique_ptr<Impl> impl_;
  LinearSpec spec_;
};

}  // namespace surge::engine::cpu
