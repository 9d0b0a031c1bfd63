#include "engine/backends/cpu/quant_linear.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>

#include "core/logging.h"
#include "engine/backends/cpu/isa.h"
#include "engine/backends/cpu/onednn_weights.h"

namespace surge::engine::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DT = memory::data_type;

dnnl::engine& Eng() { return onednn::Engine(); }

DT LowType(const QuantLinearSpec& s) {
  return s.precision == LinearPrecision::kInt8 ? DT::s8 : DT::bf16;
}

DT DstType(const QuantLinearSpec& s) {
  return s.precision == LinearPrecision::kInt8 && s.y_scale > 0 ? DT::s8 : DT::f32;
}

memory::desc PlainWeights(const QuantLinearSpec& s) {
  return memory::desc({s.base.k, s.base.n}, LowType(s), Tag::ab);
}

// Post-ops: activation, residual add, requantisation (in that order); output scales for INT8.
dnnl::primitive_attr MakeAttr(const QuantLinearSpec& s, int64_t m,
                              const std::vector<float>& scales) {
  dnnl::post_ops ops;
  if (s.base.act != Activation::kNone)
    ops.append_eltwise(1.f, onednn::EltwiseOf(s.base.act), 0.f, 0.f);
  if (s.base.has_residual) {
    ops.append_binary(dnnl::algorithm::binary_add, memory::desc({m, s.base.n}, DT::f32, Tag::ab));
  }
  if (DstType(s) == DT::s8) {
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, 1.f / s.y_scale, 0.f);
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  if (s.precision == LinearPrecision::kInt8) attr.set_output_scales(1 << 1, scales);
  return attr;
}

Result<dnnl::matmul::primitive_desc> MakePd(const QuantLinearSpec& s, int64_t m,
                                            const memory::desc& weights,
                                            const std::vector<float>& scales) {
  try {
    memory::desc src({m, s.base.k}, LowType(s), Tag::ab);
    memory::desc dst({m, s.base.n}, DstType(s), Tag::ab);
    dnnl::primitive_attr attr = MakeAttr(s, m, scales);
    if (s.base.has_bias) {
      memory::desc bias({1, s.base.n}, DT::f32, Tag::ab);
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, bias, dst), attr, Eng());
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, Eng());
  } catch (const dnnl::error& e) {
    return InternalError("oneDNN {} matmul [{}x{}]x[{}x{}]: {}", LinearPrecisionName(s.precision),
                         m, s.base.k, s.base.k, s.base.n, e.what());
  }
}

// The reorder that turns float32 X [m,K] into the kernel's input type (scaled by 1/x_scale for
// INT8).
Result<dnnl::reorder> MakeInputReorder(const QuantLinearSpec& s, int64_t m) {
  try {
    memory::desc from({m, s.base.k}, DT::f32, Tag::ab);
    memory::desc to({m, s.base.k}, LowType(s), Tag::ab);
    dnnl::primitive_attr attr;
    if (s.precision == LinearPrecision::kInt8) attr.set_output_scales(0, {1.f / s.x_scale});
    return dnnl::reorder(dnnl::reorder::primitive_desc(Eng(), from, Eng(), to, attr));
  } catch (const dnnl::error& e) {
    return InternalError("oneDNN reorder f32 -> {} [{}x{}]: {}", LinearPrecisionName(s.precision),
                         m, s.base.k, e.what());
  }
}

Status CheckSpec(const QuantLinearSpec& s) {
  if (s.precision == LinearPrecision::kFp32) {
    return InvalidArgumentError("quantised Linear: precision fp32 belongs to the float kernel");
  }
  if (s.base.k <= 0 || s.base.n <= 0) {
    return InvalidArgumentError("quantised Linear: K={} N={} must be positive", s.base.k, s.base.n);
  }
  if (s.precision == LinearPrecision::kInt8) {
    if (!(s.x_scale > 0) || !std::isfinite(s.x_scale)) {
      return InvalidArgumentError("INT8 Linear: input scale {} must be a positive number",
                                  s.x_scale);
    }
    if (!(s.y_scale >= 0) || !std::isfinite(s.y_scale)) {
      return InvalidArgumentError("INT8 Linear: output scale {} must be >= 0", s.y_scale);
    }
  }
  return Status::Ok();
}

std::vector<float> OutputScales(const QuantLinearSpec& s, const std::vector<float>& w_scales) {
  std::vector<float> out(w_scales.size());
  for (size_t i = 0; i < w_scales.size(); ++i) out[i] = s.x_scale * w_scales[i];
  return out;
}

uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace

std::string_view LinearPrecisionName(LinearPrecision p) {
  switch (p) {
    case LinearPrecision::kInt8:
      return "int8";
    case LinearPrecision::kBf16:
      return "bf16";
    case LinearPrecision::kFp32:
      break;
  }
  return "fp32";
}

void QuantizeWeightsPerChannel(const float* w, int64_t k, int64_t n, int8_t* q, float* scales,
                               int qmax) {
  const float top = static_cast<float>(std::clamp(qmax, 1, 127));
  for (int64_t j = 0; j < n; ++j) scales[j] = 0.f;
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < n; ++j) scales[j] = std::max(scales[j], std::abs(w[i * n + j]));
  }
  for (int64_t j = 0; j < n; ++j) scales[j] = scales[j] > 0 ? scales[j] / top : 1.f;
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const float v = std::nearbyint(w[i * n + j] / scales[j]);
      q[i * n + j] = static_cast<int8_t>(std::clamp(v, -top, top));
    }
  }
}

int Int8WeightMax() {
  const int cpu = CpuHasVnni() ? 127 : 63;
  if (const char* v = std::getenv("SURGE_CPU_INT8_WEIGHT_MAX")) {
    // Only lowers it: 63 packs plans that load on CPUs with and without VNNI.
    if (std::string_view(v) == "63") return 63;
  }
  return cpu;
}

Result<PackedQuantWeights> PackQuantLinearWeights(const QuantLinearSpec& spec, const float* w,
                                                  int64_t m_opt) {
  SURGE_RETURN_IF_ERROR(CheckSpec(spec));
  const int64_t k = spec.base.k, n = spec.base.n;
  PackedQuantWeights out;
  AlignedBuffer plain(static_cast<size_t>(k * n) *
                      (spec.precision == LinearPrecision::kInt8 ? 1 : 2));
  if (spec.precision == LinearPrecision::kInt8) {
    out.w_scales.resize(n);
    out.w_max = Int8WeightMax();
    QuantizeWeightsPerChannel(w, k, n, reinterpret_cast<int8_t*>(plain.data()), out.w_scales.data(),
                              Int8WeightMax());
  } else {
    auto* b = reinterpret_cast<uint16_t*>(plain.data());
    for (int64_t i = 0; i < k * n; ++i) b[i] = ToBf16(w[i]);
  }
  memory::desc any({k, n}, LowType(spec), Tag::any);
  SURGE_ASSIGN_OR_RETURN(
      auto pd, MakePd(spec, std::max<int64_t>(m_opt, 1), any, OutputScales(spec, out.w_scales)));
  out.impl = pd.impl_info_str();
  Status st = onednn::PackWeights(PlainWeights(spec), plain.data(), pd.weights_desc(), &out.data,
                                  &out.desc);
  if (!st.ok()) {
    return st.WithContext(fmt::format("{} [{}x{}]", LinearPrecisionName(spec.precision), k, n));
  }
  return out;
}

struct QuantLinearKernel::Impl {
  memory::desc weights_desc;
  const void* weights = nullptr;
  std::vector<float> w_scales;
  std::vector<float> out_scales;    // x_scale * w_scales (INT8)
  std::vector<float> bias_divisor;  // 1 / out_scales: the bias in accumulator units (INT8)
  AlignedBuffer plain_copy;         // plain weights, when the packed layout is refused at some M
  mutable std::mutex mu;
  struct PerM {
    std::shared_ptr<dnnl::matmul> matmul;
    std::shared_ptr<dnnl::reorder> input;
    bool plain = false;
  };
  mutable std::map<int64_t, PerM> prims;
  mutable std::string impl_name;
};

QuantLinearKernel::QuantLinearKernel(std::unique_ptr<Impl> impl, QuantLinearSpec spec)
    : impl_(std::move(impl)), spec_(spec) {}
QuantLinearKernel::~QuantLinearKernel() = default;

Result<std::unique_ptr<QuantLinearKernel>> QuantLinearKernel::Create(const QuantLinearSpec& spec,
                                                                     std::string_view packed_desc,
                                                                     const void* weights,
                                                                     size_t weight_bytes,
                                                                     std::vector<float> w_scales) {
  SURGE_RETURN_IF_ERROR(CheckSpec(spec));
  auto impl = std::make_unique<Impl>();
  SURGE_ASSIGN_OR_RETURN(
      impl->weights_desc,
      onednn::StoredWeightsDesc(packed_desc, PlainWeights(spec),
                                fmt::format("{} [{}x{}]", LinearPrecisionName(spec.precision),
                                            spec.base.k, spec.base.n)));
  if (impl->weights_desc.get_size() != weight_bytes) {
    return DataLossError("{} Linear weights: {} bytes stored, layout needs {}",
                         LinearPrecisionName(spec.precision), weight_bytes,
                         impl->weights_desc.get_size());
  }
  if (spec.precision == LinearPrecision::kInt8) {
    if (static_cast<int64_t>(w_scales.size()) != spec.base.n) {
      return DataLossError("INT8 Linear: {} weight scales for N={}", w_scales.size(), spec.base.n);
    }
    for (float s : w_scales) {
      if (!(s > 0) || !std::isfinite(s)) {
        return DataLossError("INT8 Linear: weight scale {} is not a positive number", s);
      }
    }
    impl->out_scales = OutputScales(spec, w_scales);
    impl->bias_divisor.resize(impl->out_scales.size());
    for (size_t i = 0; i < impl->out_scales.size(); ++i) {
      impl->bias_divisor[i] = 1.f / impl->out_scales[i];
    }
  } else if (!w_scales.empty()) {
    return DataLossError("BF16 Linear: unexpected weight scales");
  }
  impl->w_scales = std::move(w_scales);
  impl->weights = weights;
  return std::unique_ptr<QuantLinearKernel>(new QuantLinearKernel(std::move(impl), spec));
}

Status QuantLinearKernel::Run(const void* x, bool x_is_int8, const float* bias,
                              const float* residual, void* y, int64_t m,
                              AlignedBuffer* scratch) const {
  if (m == 0) return Status::Ok();
  const bool int8 = spec_.precision == LinearPrecision::kInt8;
  if (x_is_int8 && !int8) {
    return InvalidArgumentError("BF16 Linear: input must be float32, got int8");
  }
  Impl::PerM per_m;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->prims.find(m);
    if (it == impl_->prims.end()) {
      Impl::PerM fresh;
      Result<dnnl::matmul::primitive_desc> pd =
          MakePd(spec_, m, impl_->weights_desc, impl_->out_scales);
      if (!pd.ok()) {
        // The packed layout is not accepted at this M: fall back to plain weights.
        SURGE_RETURN_IF_ERROR(onednn::EnsurePlainCopy(impl_->weights_desc, impl_->weights,
                                                      PlainWeights(spec_), &impl_->plain_copy));
        SURGE_ASSIGN_OR_RETURN(pd, MakePd(spec_, m, PlainWeights(spec_), impl_->out_scales));
        fresh.plain = true;
      }
      impl_->impl_name = pd->impl_info_str();
      fresh.matmul = std::make_shared<dnnl::matmul>(*pd);
      SURGE_ASSIGN_OR_RETURN(dnnl::reorder r, MakeInputReorder(spec_, m));
      fresh.input = std::make_shared<dnnl::reorder>(std::move(r));
      it = impl_->prims.emplace(m, std::move(fresh)).first;
    }
    per_m = it->second;
  }
  const size_t low_bytes = static_cast<size_t>(m * spec_.base.k) * (int8 ? 1 : 2);
  std::vector<float> scaled_bias;
  try {
    dnnl::engine& eng = Eng();
    dnnl::stream stream(eng);
    const memory::desc low_d({m, spec_.base.k}, LowType(spec_), Tag::ab);
    memory src;
    if (x_is_int8) {
      src = memory(low_d, eng, const_cast<void*>(x));
    } else {
      if (scratch->size() < low_bytes) scratch->Reserve(low_bytes);
      src = memory(low_d, eng, scratch->data());
      memory from({{m, spec_.base.k}, DT::f32, Tag::ab}, eng, const_cast<void*>(x));
      per_m.input->execute(stream, from, src);
    }
    const memory::desc dst_d({m, spec_.base.n}, DstType(spec_), Tag::ab);
    memory dst(dst_d, eng, y);
    memory w = per_m.plain ? memory(PlainWeights(spec_), eng, impl_->plain_copy.data())
                           : memory(impl_->weights_desc, eng, const_cast<void*>(impl_->weights));
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst}};
    if (spec_.base.has_bias) {
      const float* b = bias;
      if (int8) {
        // oneDNN adds the bias to the accumulator before the output scales.
        scaled_bias.resize(spec_.base.n);
        for (int64_t i = 0; i < spec_.base.n; ++i)
          scaled_bias[i] = bias[i] * impl_->bias_divisor[i];
        b = scaled_bias.data();
      }
      args.emplace(DNNL_ARG_BIAS,
                   memory({{1, spec_.base.n}, DT::f32, Tag::ab}, eng, const_cast<float*>(b)));
    }
    if (spec_.base.has_residual) {
      const int post_index = spec_.base.act == Activation::kNone ? 0 : 1;
      args.emplace(
          DNNL_ARG_ATTR_MULTIPLE_POST_OP(post_index) | DNNL_ARG_SRC_1,
          memory({{m, spec_.base.n}, DT::f32, Tag::ab}, eng, const_cast<float*>(residual)));
    }
    per_m.matmul->execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    return InternalError("oneDNN {} matmul M={} K={} N={}: {}",
                         LinearPrecisionName(spec_.precision), m, spec_.base.k, spec_.base.n,
                         e.what());
  }
  return Status::Ok();
}

std::string QuantLinearKernel::Describe() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::string s = fmt::format("onednn_matmul_{} K={} N={} weights={}",
                              LinearPrecisionName(spec_.precision), spec_.base.k, spec_.base.n,
                              impl_->weights_desc == PlainWeights(spec_) ? "plain" : "packed");
  if (spec_.precision == LinearPrecision::kInt8) {
    s += fmt::format(
        " x_scale={:.4g} out={}", spec_.x_scale,
        spec_.y_scale > 0 ? fmt::format("int8(scale {:.4g})", spec_.y_scale) : std::string("fp32"));
    if (spec_.w_max < 127) s += fmt::format(" (weights in [-{0},{0}]: no VNNI)", spec_.w_max);
  }
  s += " impl=" + (impl_->impl_name.empty() ? std::string("(not yet run)") : impl_->impl_name);
  return s;
}

}  // namespace surge::engine::cpu
