#include "engine/backends/cpu/linear.h"

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/logging.h"
#include "engine/backends/cpu/onednn_weights.h"

namespace surge::engine::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DT = memory::data_type;

dnnl::engine& CpuEngine() { return onednn::Engine(); }

dnnl::primitive_attr MakeAttr(const LinearSpec& spec, int64_t m) {
  dnnl::post_ops ops;
  if (spec.act != Activation::kNone) {
    ops.append_eltwise(1.f, onednn::EltwiseOf(spec.act), 0.f, 0.f);
  }
  if (spec.has_residual) {
    ops.append_binary(dnnl::algorithm::binary_add, memory::desc({m, spec.n}, DT::f32, Tag::ab));
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  return attr;
}

Result<dnnl::matmul::primitive_desc> MakePd(const LinearSpec& spec, int64_t m,
                                            const memory::desc& weights) {
  try {
    memory::desc src({m, spec.k}, DT::f32, Tag::ab);
    memory::desc dst({m, spec.n}, DT::f32, Tag::ab);
    dnnl::primitive_attr attr = MakeAttr(spec, m);
    if (spec.has_bias) {
      memory::desc bias({1, spec.n}, DT::f32, Tag::ab);
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, bias, dst), attr,
                                          CpuEngine());
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, CpuEngine());
  } catch (const dnnl::error& e) {
    return InternalError("oneDNN matmul [{}x{}]x[{}x{}]: {}", m, spec.k, spec.k, spec.n, e.what());
  }
}

memory::desc PlainWeights(const LinearSpec& spec) {
  return memory::desc({spec.k, spec.n}, DT::f32, Tag::ab);
}

}  // namespace

std::string OneDnnVersion() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}

size_t OneDnnDescSize() { return sizeof(dnnl_memory_desc_t); }

Result<PackedWeights> PackLinearWeights(const LinearSpec& spec, const float* w, int64_t m_opt) {
  memory::desc any({spec.k, spec.n}, DT::f32, Tag::any);
  SURGE_ASSIGN_OR_RETURN(auto pd, MakePd(spec, std::max<int64_t>(m_opt, 1), any));
  PackedWeights out;
  out.impl = pd.impl_info_str();
  Status st = onednn::PackWeights(PlainWeights(spec), w, pd.weights_desc(), &out.data, &out.desc);
  if (!st.ok()) return st.WithContext(fmt::format("[{}x{}]", spec.k, spec.n));
  return out;
}

struct LinearKernel::Impl {
  memory::desc weights_desc;
  const void* weights = nullptr;
  AlignedBuffer plain_copy;  // when a packed layout is refused at some M, the plain weights
  mutable std::mutex mu;
  mutable std::map<int64_t, std::shared_ptr<dnnl::matmul>> prims;
  mutable std::map<int64_t, bool> plain_for;  // per M: primitive uses plain_copy
  std::string impl_name;
};

LinearKernel::LinearKernel(std::unique_ptr<Impl> impl, LinearSpec spec)
    : impl_(std::move(impl)), spec_(spec) {}
LinearKernel::~LinearKernel() = default;

Result<std::unique_ptr<LinearKernel>> LinearKernel::Create(const LinearSpec& spec,
                                                           std::string_view packed_desc,
                                                           const void* weights,
                                                           size_t weight_bytes) {
  auto impl = std::make_unique<Impl>();
  SURGE_ASSIGN_OR_RETURN(impl->weights_desc,
                         onednn::StoredWeightsDesc(packed_desc, PlainWeights(spec),
                                                   fmt::format("f32 [{}x{}]", spec.k, spec.n)));
  if (impl->weights_desc.get_size() != weight_bytes) {
    return DataLossError("Linear weights: {} bytes stored, layout needs {}", weight_bytes,
                         impl->weights_desc.get_size());
  }
  impl->weights = weights;
  return std::unique_ptr<LinearKernel>(new LinearKernel(std::move(impl), spec));
}

Status LinearKernel::Run(const float* x, const float* bias, const float* residual, float* y,
                         int64_t m) const {
  if (m == 0) return Status::Ok();
  std::shared_ptr<dnnl::matmul> prim;
  bool plain = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->prims.find(m);
    if (it == impl_->prims.end()) {
      Result<dnnl::matmul::primitive_desc> pd = MakePd(spec_, m, impl_->weights_desc);
      if (!pd.ok()) {
        // The packed layout is not accepted at this M: fall back to plain weights.
        SURGE_RETURN_IF_ERROR(onednn::EnsurePlainCopy(impl_->weights_desc, impl_->weights,
                                                      PlainWeights(spec_), &impl_->plain_copy));
        SURGE_ASSIGN_OR_RETURN(pd, MakePd(spec_, m, PlainWeights(spec_)));
        plain = true;
      }
      impl_->impl_name = pd->impl_info_str();
      it = impl_->prims.emplace(m, std::make_shared<dnnl::matmul>(*pd)).first;
      impl_->plain_for[m] = plain;
    }
    prim = it->second;
    plain = impl_->plain_for[m];
  }
  try {
    dnnl::engine& eng = CpuEngine();
    dnnl::stream stream(eng);
    memory::desc src_d({m, spec_.k}, DT::f32, Tag::ab);
    memory::desc dst_d({m, spec_.n}, DT::f32, Tag::ab);
    memory src(src_d, eng, const_cast<float*>(x));
    memory dst(dst_d, eng, y);
    memory w = plain ? memory(PlainWeights(spec_), eng, impl_->plain_copy.data())
                     : memory(impl_->weights_desc, eng, const_cast<void*>(impl_->weights));
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst}};
    if (spec_.has_bias) {
      args.emplace(DNNL_ARG_BIAS,
                   memory({{1, spec_.n}, DT::f32, Tag::ab}, eng, const_cast<float*>(bias)));
    }
    if (spec_.has_residual) {
      const int post_index = spec_.act == Activation::kNone ? 0 : 1;
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(post_index) | DNNL_ARG_SRC_1,
                   memory(dst_d, eng, const_cast<float*>(residual)));
    }
    prim->execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    return InternalError("oneDNN matmul M={} K={} N={}: {}", m, spec_.k, spec_.n, e.what());
  }
  return Status::Ok();
}

std::string LinearKernel::Describe() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return fmt::format("onednn_matmul K={} N={} weights={} impl={}", spec_.k, spec_.n,
                     impl_->weights_desc == PlainWeights(spec_) ? "plain" : "packed",
                     impl_->impl_name.empty() ? "(not yet run)" : impl_->impl_name);
}

}  // namespace surge::engine::cpu
