#include "engine/backends/cpu/onednn_weights.h"

#include <cstring>

namespace surge::engine::cpu::onednn {

dnnl::engine& Engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::algorithm EltwiseOf(Activation act) {
  switch (act) {
    case Activation::kGelu:
      return dnnl::algorithm::eltwise_gelu_erf;
    case Activation::kGeluTanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case Activation::kTanh:
      return dnnl::algorithm::eltwise_tanh;
    case Activation::kRelu:
      return dnnl::algorithm::eltwise_relu;
    case Activation::kNone:
      break;
  }
  return dnnl::algorithm::undef;
}

Status Reorder(const dnnl::memory::desc& from, const void* src, const dnnl::memory::desc& to,
               void* dst) {
  try {
    dnnl::stream stream(Engine());
    dnnl::memory s(from, Engine(), const_cast<void*>(src));
    dnnl::memory d(to, Engine(), dst);
    dnnl::reorder(s, d).execute(stream, s, d);
    stream.wait();
  } catch (const dnnl::error& e) {
    return InternalError("oneDNN weight reorder: {}", e.what());
  }
  return Status::Ok();
}

Status PackWeights(const dnnl::memory::desc& plain, const void* src,
                   const dnnl::memory::desc& chosen, std::vector<uint8_t>* data,
                   std::string* desc) {
  desc->clear();
  if (chosen == plain) {
    const auto* p = static_cast<const uint8_t*>(src);
    data->assign(p, p + plain.get_size());
    return Status::Ok();
  }
  AlignedBuffer buf(chosen.get_size());
  SURGE_RETURN_IF_ERROR(Reorder(plain, src, chosen, buf.data()));
  data->assign(buf.data(), buf.data() + chosen.get_size());
  desc->assign(reinterpret_cast<const char*>(&chosen.data), sizeof(chosen.data));
  return Status::Ok();
}

Result<dnnl::memory::desc> StoredWeightsDesc(std::string_view bytes,
                                             const dnnl::memory::desc& plain,
                                             std::string_view what) {
  if (bytes.empty()) return plain;
  if (bytes.size() != sizeof(dnnl_memory_desc_t)) {
    return DataLossError("packed weight descriptor has {} bytes, this oneDNN expects {}",
                         bytes.size(), sizeof(dnnl_memory_desc_t));
  }
  dnnl_memory_desc_t raw;
  std::memcpy(&raw, bytes.data(), sizeof(raw));
  dnnl::memory::desc d(raw);
  if (d.dims() != plain.dims() || d.data_type() != plain.data_type()) {
    return DataLossError("packed weight descriptor does not describe {}", what);
  }
  return d;
}

Status EnsurePlainCopy(const dnnl::memory::desc& packed, const void* weights,
                       const dnnl::memory::desc& plain, AlignedBuffer* plain_copy) {
  if (plain_copy->size() != 0) return Status::Ok();
  plain_copy->Reserve(plain.get_size());
  Status st = Reorder(packed, weights, plain, plain_copy->data());
  if (!st.ok()) return InternalError("oneDNN weight reorder to plain: {}", st.message());
  return Status::Ok();
}

}  // namespace surge::engine::cpu::onednn
