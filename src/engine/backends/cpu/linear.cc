#include "engine/backends/cpu/linear.h"

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/logging.h"

namespace surge::engine::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DT = memory::data_type;

dnnl::engine& CpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::primitive_attr MakeAttr(const LinearSpec& spec, int64_t m) {
  dnnl::post_ops ops;
  switch (spec.act) {
    case Activation::kGelu:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
      break;
    case Activation::kGeluTanh:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
      break;
    case Activation::kTanh:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_tanh, 0.f, 0.f);
      break;
    case Activation::kRelu:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      break;
    case Activation::kNone:
      break;
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
  memory::desc chosen = pd.weights_desc();
  if (chosen == PlainWeights(spec)) {
    out.data.resize(spec.k * spec.n * sizeof(float));
    std::memcpy(out.data.data(), w, out.data.size());
    return out;
  }
  try {
    dnnl::stream stream(CpuEngine());
    memory src(PlainWeights(spec), CpuEngine(), const_cast<float*>(w));
    AlignedBuffer buf(chosen.get_size());
    memory dst(chosen, CpuEngine(), buf.data());
    dnnl::reorder(src, dst).execute(stream, src, dst);
    stream.wait();
    out.data.assign(buf.data(), buf.data() + chosen.get_size());
    out.desc.assign(reinterpret_cast<const char*>(&chosen.data), sizeof(chosen.data));
  } catch (const dnnl::error& e) {
    return InternalError("oneDNN weight reorder [{}x{}]: {}", spec.k, spec.n, e.what());
  }
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
  if (packed_desc.empty()) {
    impl->weights_desc = PlainWeights(spec);
  } else {
    if (packed_desc.size() != sizeof(dnnl_memory_desc_t)) {
      return DataLossError("packed weight descriptor has {} bytes, this oneDNN expects {}",
                           packed_desc.size(), sizeof(dnnl_memory_desc_t));
    }
    dnnl_memory_desc_t raw;
    std::memcpy(&raw, packed_desc.data(), sizeof(raw));
    impl->weights_desc = memory::desc(raw);
    if (impl->weights_desc.dims() != memory::dims{spec.k, spec.n} ||
        impl->weights_desc.data_type() != DT::f32) {
      return DataLossError("packed weight descriptor does not describe f32 [{}x{}]", spec.k,
                           spec.n);
    }
  }
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
        if (impl_->plain_copy.size() == 0) {
          const memory::desc plain_desc = PlainWeights(spec_);
          impl_->plain_copy.Reserve(plain_desc.get_size());
          try {
            dnnl::stream stream(CpuEngine());
            memory src(impl_->weights_desc, CpuEngine(), const_cast<void*>(impl_->weights));
            memory dst(plain_desc, CpuEngine(), impl_->plain_copy.data());
            dnnl::reorder(src, dst).execute(stream, src, dst);
            stream.wait();
          } catch (const dnnl::error& e) {
            return InternalError("oneDNN weight reorder to plain: {}", e.what());
          }
        }
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
