#include "engine/backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "core/aligned_buffer.h"
#include "core/logging.h"
#include "engine/backends/cpu/blob_io.h"
#include "engine/backends/cpu/isa.h"
#include "engine/backends/cpu/linear.h"
#include "engine/backends/cpu/memory_plan.h"
#include "engine/backends/cpu/node_kernels.h"
#include "engine/backends/cpu/parallel.h"
#include "engine/backends/cpu/quant_linear.h"
#include "engine/ir/eval.h"

namespace surge::engine::cpu {
namespace {

constexpr uint32_t kBlobMagic = 0x55504353;  // "SCPU"
constexpr uint32_t kBlobVersion = 1;
// Plans with INT8/BF16 Linear weights: each weight entry's format byte is followed by the scales.
// FP32 plans keep writing version 1, so they stay readable by builds without the quantised kernels.
constexpr uint32_t kBlobVersionQuant = 2;
// Version 3: a quantised entry's scales are followed by its weight range (uint8 w_max; INT8 127
// or 63, Int8WeightMax of the CPU that packed it; 0 for BF16). Version 2 INT8 is full range.
constexpr uint32_t kBlobVersionQuantRange = 3;
constexpr int64_t kDefaultOptTokens = 1024;  // M for weight packing without a profile

enum class Kernel : uint8_t {
  kGeneric = 0,
  kLinear = 1,  // surge::Linear or ONNX MatMul with a constant 2-D float weight
  kLayerNorm = 2,
  kSkipLayerNorm = 3,
  kEmbedLayerNorm = 4,
  kGelu = 5,
  kAttention = 6,
  kLinearInt8 = 7,  // the same nodes as kLinear, INT8 weights and activations
  kLinearBf16 = 8,  // the same nodes as kLinear, BF16 weights and activations
};
constexpr uint8_t kMaxKernel = 8;

std::string_view KernelName(Kernel k) {
  switch (k) {
    case Kernel::kGeneric:
      return "generic(reference)";
    case Kernel::kLinear:
      return "linear(onednn)";
    case Kernel::kLayerNorm:
      return "layer_norm";
    case Kernel::kSkipLayerNorm:
      return "skip_layer_norm";
    case Kernel::kEmbedLayerNorm:
      return "embed_layer_norm";
    case Kernel::kGelu:
      return "gelu";
    case Kernel::kAttention:
      return "attention";
    case Kernel::kLinearInt8:
      return "linear(onednn int8)";
    case Kernel::kLinearBf16:
      return "linear(onednn bf16)";
  }
  return "?";
}

std::string ArchName(Isa isa) { return fmt::format("x86_64-{}", IsaName(isa)); }

bool IsLinearKernel(Kernel k) {
  return k == Kernel::kLinear || k == Kernel::kLinearInt8 || k == Kernel::kLinearBf16;
}

Kernel KernelOf(LinearPrecision p) {
  switch (p) {
    case LinearPrecision::kInt8:
      return Kernel::kLinearInt8;
    case LinearPrecision::kBf16:
      return Kernel::kLinearBf16;
    case LinearPrecision::kFp32:
      break;
  }
  return Kernel::kLinear;
}

bool IsSurge(const ir::Node& n, std::string_view op) {
  return n.domain == ir::kSurgeDomain && n.op_type == op;
}

const ir::Value* ValueAt(const ir::Graph& g, int id) {
  return id >= 0 && id < static_cast<int>(g.values.size()) ? &g.values[id] : nullptr;
}

// Float32 unless known otherwise.
bool MaybeF32(const ir::Graph& g, int id) {
  const ir::Value* v = ValueAt(g, id);
  return v != nullptr && (v->dtype == DType::kFloat32 || v->dtype == DType::kUndefined);
}

// The Linear spec of a node that can run on oneDNN with its constant weight, or nullopt.
std::optional<LinearSpec> LinearSpecOf(const ir::Graph& g, const ir::Node& n) {
  const bool linear = IsSurge(n, "Linear");
  const bool matmul = n.domain.empty() && n.op_type == "MatMul";
  if (!linear && !matmul) return std::nullopt;
  const ir::Value* w = ValueAt(g, n.input(1));
  if (w == nullptr || !w->is_constant() || w->constant.dtype() != DType::kFloat32 ||
      w->constant.rank() != 2 || !MaybeF32(g, n.input(0))) {
    return std::nullopt;
  }
  LinearSpec spec;
  spec.k = w->constant.dim(0);
  spec.n = w->constant.dim(1);
  if (linear) {
    Result<Activation> act = ParseActivation(n.GetString("activation", "none"));
    if (!act.ok()) return std::nullopt;
    spec.act = *act;
    spec.has_bias = n.input(2) >= 0;
    spec.has_residual = n.input(3) >= 0;
  }
  return spec;
}

Kernel ChooseKernel(const ir::Graph& g, const ir::Node& n, Isa isa) {
  if (LinearSpecOf(g, n)) return Kernel::kLinear;
  if (n.domain != ir::kSurgeDomain || isa == Isa::kNone) return Kernel::kGeneric;
  if (n.op_type == "LayerNorm" && MaybeF32(g, n.input(0))) return Kernel::kLayerNorm;
  if (n.op_type == "SkipLayerNorm" && MaybeF32(g, n.input(0))) return Kernel::kSkipLayerNorm;
  if (n.op_type == "EmbedLayerNorm") return Kernel::kEmbedLayerNorm;
  if (n.op_type == "Gelu" && MaybeF32(g, n.input(0))) return Kernel::kGelu;
  if (n.op_type == "Attention" && MaybeF32(g, n.input(0))) return Kernel::kAttention;
  return Kernel::kGeneric;
}

// The precisions this backend builds, and what the machine needs for them.
Status CheckPrecision(Precision p, Isa isa) {
  switch (p) {
    case Precision::kFp32:
    case Precision::kInt8:
      return Status::Ok();
    case Precision::kBf16:
      if (isa != Isa::kAvx512 || !CpuHasBf16()) {
        return FailedPreconditionError(
            "cpu backend: precision bf16 needs AVX-512 BF16, which this CPU{} does not offer "
            "(build fp32 or int8)",
            isa != DetectIsa() ? " (limited by SURGE_CPU_ISA)" : "");
      }
      return Status::Ok();
    case Precision::kFp16:
    case Precision::kFp8:
      break;
  }
  return InvalidArgumentError(
      "cpu backend does not run precision {} (it runs fp32, bf16 and int8; fp16 and fp8 are "
      "GPU precisions: --backend cuda)",
      PrecisionName(p));
}

// The precision a Linear node runs at: the quantisation spec's entry for it in int8/bf16 builds,
// else the build's base (fp32 for int8 builds, whose unlisted layers stay float).
Result<LinearPrecision> LinearPrecisionOf(const ir::Node& n, const BuilderConfig& config, Isa isa) {
  if (config.precision == Precision::kFp32) return LinearPrecision::kFp32;
  const Precision base = config.precision == Precision::kBf16 ? Precision::kBf16 : Precision::kFp32;
  const Precision p = config.quant.LayerOr(n.name, base);
  switch (p) {
    case Precision::kFp32:
      return LinearPrecision::kFp32;
    case Precision::kInt8:
      return LinearPrecision::kInt8;
    case Precision::kBf16:
      SURGE_RETURN_IF_ERROR(CheckPrecision(p, isa).WithContext(fmt::format("layer '{}'", n.name)));
      return LinearPrecision::kBf16;
    case Precision::kFp16:
    case Precision::kFp8:
      break;
  }
  return InvalidArgumentError("cpu backend: layer '{}' is marked {}, which the CPU does not run",
                              n.name, PrecisionName(p));
}

// Symbol values at the profile's opt shapes (inputs without a profile entry bind nothing).
ir::SymbolBindings OptBindings(const ir::Graph& g, const Profile& profile) {
  ir::SymbolBindings b;
  for (int id : g.inputs) {
    const ir::Value& v = g.values[id];
    const InputProfile* p = profile.Find(v.name);
    if (p == nullptr || !v.shape || p->opt.size() != v.shape->size()) continue;
    for (size_t i = 0; i < p->opt.size(); ++i) {
      if ((*v.shape)[i].IsSymbol()) b[(*v.shape)[i].Symbols()[0]] = p->opt[i];
    }
  }
  return b;
}

int64_t OptRows(const ir::Graph& g, const ir::Node& n, const ir::SymbolBindings& b, int64_t k) {
  const ir::Value* x = ValueAt(g, n.input(0));
  if (x != nullptr && x->shape && k > 0) {
    Result<Shape> s = ir::EvalShape(*x->shape, b);
    if (s.ok() && NumElements(*s) > 0) return NumElements(*s) / k;
  }
  return kDefaultOptTokens;
}

struct WeightEntry {
  uint32_t node = 0;
  LinearSpec spec;
  std::string desc;
  std::span<const uint8_t> data;
  std::string impl;
};

// A Linear weight as Lower writes it.
struct PackedEntry {
  uint32_t node = 0;
  LinearSpec spec;
  LinearPrecision precision = LinearPrecision::kFp32;
  float x_scale = 0.f, y_scale = 0.f;
  std::vector<float> w_scales;
  int w_max = 0;
  std::string desc, impl;
  std::vector<uint8_t> data;
};

void WriteWeightTable(BlobWriter& w, const std::vector<PackedEntry>& entries,
                      const std::vector<uint64_t>& offsets, bool quant_format) {
  for (size_t j = 0; j < entries.size(); ++j) {
    const PackedEntry& e = entries[j];
    w.Put<uint32_t>(e.node);
    w.Put<int64_t>(e.spec.k);
    w.Put<int64_t>(e.spec.n);
    w.Put<uint8_t>(e.spec.has_bias);
    w.Put<uint8_t>(e.spec.has_residual);
    w.Put<uint8_t>(static_cast<uint8_t>(e.spec.act));
    w.Put<uint8_t>(static_cast<uint8_t>(e.precision));
    if (quant_format && e.precision != LinearPrecision::kFp32) {
      w.Put<float>(e.x_scale);
      w.Put<float>(e.y_scale);
      w.Put<uint32_t>(static_cast<uint32_t>(e.w_scales.size()));
      for (float f : e.w_scales) w.Put<float>(f);
      w.Put<uint8_t>(static_cast<uint8_t>(e.w_max));  // 0 for BF16
    }
    w.Str(e.desc);
    w.Str(e.impl);
    w.Put<uint64_t>(offsets[j]);
    w.Put<uint64_t>(e.data.size());
  }
}

class CpuEngine;
class CpuBackend;

// Per-binding execution plan: concrete shapes and arena offsets of planned values.
struct ExecPlan {
  std::vector<int64_t> key;                  // symbol values it was made for
  std::vector<std::optional<Shape>> shapes;  // per value
  std::vector<int64_t> offset;               // per value, -1 when not in the arena
  int64_t arena_bytes = 0;
};

class CpuContext final : public BackendContext {
 public:
  friend class CpuBackend;
  explicit CpuContext(const CpuEngine* engine) : engine_(engine) {}
  Status Execute(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) override;

 private:
  // The plan for these input shapes (the cached one when the symbols bind the same values).
  Result<const ExecPlan*> PlanFor(std::span<const Shape> input_shapes);

  const CpuEngine* engine_;
  std::optional<ExecPlan> plan_;  // the last binding's plan
  AlignedBuffer arena_;
  AlignedBuffer scratch_;  // quantised Linear inputs
  std::vector<Tensor> values_;
};

class CpuEngine final : public BackendEngine {
 public:
  std::shared_ptr<const ir::Graph> graph;
  Isa isa = Isa::kNone;
  int num_threads = 0;
  std::vector<Kernel> kernels;                               // per node
  std::vector<std::unique_ptr<LinearKernel>> linears;        // per node (null unless kLinear)
  std::vector<std::unique_ptr<QuantLinearKernel>> qlinears;  // per node (kLinearInt8/Bf16)
  std::vector<DType> value_dtype;  // per value: what planned kernels write (int8: requantised)
  std::vector<int> last_use;       // per value: last step reading it
  std::vector<bool> is_output;     // per value
  std::vector<AlignedBuffer> owned_weights;  // copies of unaligned packed weights
  std::vector<std::string> symbols;          // symbol names, sorted

  Result<std::unique_ptr<BackendContext>> CreateContext() override {
    return std::unique_ptr<BackendContext>(new CpuContext(this));
  }

  std::string Describe() const override {
    std::string s = fmt::format("cpu backend: isa {} (oneDNN {}), {} threads\n", IsaName(isa),
                                OneDnnVersion(), num_threads > 0 ? num_threads : NumThreads());
    std::map<std::string_view, int> counts;
    for (size_t i = 0; i < graph->nodes.size(); ++i) {
      const ir::Node& n = graph->nodes[i];
      counts[KernelName(kernels[i])]++;
      s += fmt::format("  [{}] {}{}{} '{}': {}", i, n.domain,
                       n.domain.empty() ? "" : "::", n.op_type, n.name, KernelName(kernels[i]));
      if (linears[i]) {
        s += " ";
        s += linears[i]->Describe();
      }
      if (qlinears[i]) {
        s += " ";
        s += qlinears[i]->Describe();
      }
      s += "\n";
    }
    s += "kernels:";
    for (const auto& [k, c] : counts) s += fmt::format(" {}={}", k, c);
    s += fmt::format("\nactivation arena: planned per input shape; {} bytes at opt\n",
                     opt_arena_bytes);
    return s;
  }

  int64_t opt_arena_bytes = 0;
};

Result<const ExecPlan*> CpuContext::PlanFor(std::span<const Shape> input_shapes) {
  const ir::Graph& g = *engine_->graph;
  ir::SymbolBindings bindings;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ir::Value& v = g.values[g.inputs[i]];
    if (!v.shape) continue;
    const Shape& actual = input_shapes[i];
    if (actual.size() != v.shape->size()) {
      return InvalidArgumentError("input '{}' has shape {}, expected rank {} ({})", v.name,
                                  ShapeToString(actual), v.shape->size(),
                                  ir::SymShapeToString(*v.shape));
    }
    for (size_t d = 0; d < actual.size(); ++d) {
      const ir::Dim& dim = (*v.shape)[d];
      if (dim.IsStatic() && dim.StaticValue() != actual[d]) {
        return InvalidArgumentError("input '{}' has shape {}, expected {}", v.name,
                                    ShapeToString(actual), ir::SymShapeToString(*v.shape));
      }
      if (!dim.IsSymbol()) continue;
      const std::string name = dim.Symbols()[0];
      auto [it, fresh] = bindings.emplace(name, actual[d]);
      if (!fresh && it->second != actual[d]) {
        return InvalidArgumentError("input '{}' binds '{}' to {} but another input bound it to {}",
                                    v.name, name, actual[d], it->second);
      }
    }
  }
  std::vector<int64_t> key;
  for (const std::string& s : engine_->symbols) {
    auto it = bindings.find(s);
    key.push_back(it == bindings.end() ? -1 : it->second);
  }
  if (plan_ && plan_->key == key) return &*plan_;

  ExecPlan p;
  p.key = key;
  const size_t nv = g.values.size();
  p.shapes.resize(nv);
  p.offset.assign(nv, -1);
  for (size_t v = 0; v < nv; ++v) {
    if (g.values[v].shape && !g.values[v].is_constant()) {
      Result<Shape> s = ir::EvalShape(*g.values[v].shape, bindings);
      if (s.ok()) p.shapes[v] = *s;
    }
  }
  std::vector<BufferRequest> requests;
  std::vector<int> request_value;
  std::vector<int> request_of(nv, -1);
  const int steps = static_cast<int>(g.nodes.size());
  for (int i = 0; i < steps; ++i) {
    const ir::Node& n = g.nodes[i];
    const Kernel k = engine_->kernels[i];
    if (k == Kernel::kGeneric) continue;
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const int v = n.outputs[o];
      if (v < 0 || !p.shapes[v]) continue;
      BufferRequest r;
      r.bytes =
          NumElements(*p.shapes[v]) * static_cast<int64_t>(DTypeSize(engine_->value_dtype[v]));
      r.first = i;
      r.last = engine_->is_output[v] ? steps : std::max(i, engine_->last_use[v]);
      // Elementwise-safe kernels may write over their first input when it dies here.
      if (o == 0 && (k == Kernel::kGelu || k == Kernel::kSkipLayerNorm)) {
        const int in = n.input(0);
        if (in >= 0 && request_of[in] >= 0 && engine_->last_use[in] == i &&
            !engine_->is_output[in] && p.shapes[in] == p.shapes[v]) {
          r.inplace = request_of[in];
        }
      }
      request_of[v] = static_cast<int>(requests.size());
      requests.push_back(r);
      request_value.push_back(v);
    }
  }
  MemoryPlan mp = PlanMemory(requests);
  for (size_t r = 0; r < requests.size(); ++r) p.offset[request_value[r]] = mp.offsets[r];
  p.arena_bytes = mp.arena_bytes;
  plan_ = std::move(p);
  return &*plan_;
}

Status CpuContext::Execute(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  const CpuEngine& e = *engine_;
  const ir::Graph& g = *e.graph;
  if (inputs.size() != g.inputs.size()) {
    return InvalidArgumentError("expected {} inputs, got {}", g.inputs.size(), inputs.size());
  }
  SetNumThreads(e.num_threads);
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  SURGE_ASSIGN_OR_RETURN(const ExecPlan* plan, PlanFor(shapes));
  if (arena_.size() < static_cast<size_t>(plan->arena_bytes)) {
    arena_.Reserve(static_cast<size_t>(plan->arena_bytes));
  }
  values_.assign(g.values.size(), Tensor());
  for (size_t i = 0; i < g.inputs.size(); ++i) values_[g.inputs[i]] = inputs[i];
  auto get = [&](int id) -> const Tensor* {
    if (id < 0) return nullptr;
    const ir::Value& v = g.values[id];
    if (v.is_constant()) return &v.constant;
    return values_[id].defined() ? &values_[id] : nullptr;
  };
  std::vector<const Tensor*> in;
  std::vector<Tensor> out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    in.clear();
    for (int id : n.inputs) in.push_back(get(id));
    out.clear();
    const OutputAllocator alloc = [&](size_t index, const Shape& shape) {
      const int v = index < n.outputs.size() ? n.outputs[index] : -1;
      const DType dt = v >= 0 ? e.value_dtype[v] : DType::kFloat32;
      if (v >= 0 && plan->offset[v] >= 0 && plan->shapes[v] == shape) {
        return Tensor::View(dt, shape, arena_.data() + plan->offset[v]);
      }
      return Tensor(dt, shape);
    };
    Status s;
    switch (e.kernels[i]) {
      case Kernel::kLinear:
        s = RunLinearNode(n, *e.linears[i], in, alloc, &out);
        break;
      case Kernel::kLinearInt8:
      case Kernel::kLinearBf16:
        s = RunQuantLinearNode(n, *e.qlinears[i], in, alloc, &scratch_, &out);
        break;
      case Kernel::kLayerNorm:
        s = RunLayerNormNode(e.isa, n, in, alloc, &out);
        break;
      case Kernel::kSkipLayerNorm:
        s = RunSkipLayerNormNode(e.isa, n, in, alloc, &out);
        break;
      case Kernel::kEmbedLayerNorm:
        s = RunEmbedLayerNormNode(e.isa, n, in, alloc, &out);
        break;
      case Kernel::kGelu:
        s = RunGeluNode(e.isa, n, in, alloc, &out);
        break;
      case Kernel::kAttention:
        s = RunAttentionNode(e.isa, n, in, alloc, &out);
        break;
      case Kernel::kGeneric:
        s = RunGenericNode(n, in, &out);
        break;
    }
    if (!s.ok()) return s;
    for (size_t o = 0; o < n.outputs.size() && o < out.size(); ++o) {
      if (n.outputs[o] >= 0) values_[n.outputs[o]] = std::move(out[o]);
    }
    // Drop values whose last reader ran (frees generic kernels' owned outputs early).
    for (int id : n.inputs) {
      if (id >= 0 && e.last_use[id] == static_cast<int>(i) && !e.is_output[id]) {
        values_[id] = Tensor();
      }
    }
  }
  outputs->clear();
  for (int id : g.outputs) {
    const Tensor* t = get(id);
    if (t == nullptr) {
      return InternalError("graph output '{}' was not computed", g.values[id].name);
    }
    outputs->push_back(*t);
  }
  return Status::Ok();
}

// The blob's leading fields: magic and version checked, the ISA name not yet parsed.
struct BlobHeader {
  uint32_t version = 0;
  std::string isa_name, dnnl_version;
  uint32_t desc_size = 0, num_nodes = 0;
};

Result<BlobHeader> ReadBlobHeader(BlobReader& r) {
  BlobHeader h;
  SURGE_ASSIGN_OR_RETURN(uint32_t magic, r.Get<uint32_t>());
  if (magic != kBlobMagic) {
    return DataLossError("CPU tactics blob: bad magic {:#x} (expected {:#x})", magic, kBlobMagic);
  }
  SURGE_ASSIGN_OR_RETURN(h.version, r.Get<uint32_t>());
  if (h.version != kBlobVersion && h.version != kBlobVersionQuant &&
      h.version != kBlobVersionQuantRange) {
    return FailedPreconditionError(
        "CPU tactics blob version {} is not supported (this build reads versions {} to {}); "
        "rebuild the plan",
        h.version, kBlobVersion, kBlobVersionQuantRange);
  }
  SURGE_ASSIGN_OR_RETURN(h.isa_name, r.Str(64));
  SURGE_ASSIGN_OR_RETURN(h.dnnl_version, r.Str(64));
  SURGE_ASSIGN_OR_RETURN(h.desc_size, r.Get<uint32_t>());
  SURGE_ASSIGN_OR_RETURN(h.num_nodes, r.Get<uint32_t>());
  return h;
}

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  std::string DeviceArch() const override { return ArchName(DefaultIsa()); }

  Result<std::string> Lower(const ir::Graph& graph, const BuilderConfig& config) override {
    const Isa isa = DefaultIsa();
    SURGE_RETURN_IF_ERROR(CheckPrecision(config.precision, isa));
    if (config.precision == Precision::kInt8 && config.quant.empty()) {
      return FailedPreconditionError(
          "cpu backend: precision int8 needs calibration (activation thresholds for the inputs of "
          "the quantised layers): run `surge calibrate` and build with --calibration CACHE");
    }
    const ir::SymbolBindings opt = OptBindings(graph, config.profile);
    std::vector<Kernel> kernels(graph.nodes.size(), Kernel::kGeneric);
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      const ir::Node& n = graph.nodes[i];
      Kernel k = ChooseKernel(graph, n, isa);
      if (k == Kernel::kGeneric && !ir::CanEval(n)) {
        return UnimplementedError("cpu backend: no kernel for op {}{}{} (node '{}')", n.domain,
                                  n.domain.empty() ? "" : "::", n.op_type, n.name);
      }
      if (k == Kernel::kLinear) {
        SURGE_ASSIGN_OR_RETURN(LinearPrecision lp, LinearPrecisionOf(n, config, isa));
        k = KernelOf(lp);
      }
      kernels[i] = k;
    }
    // Which values each node reads as its first input; an INT8 Linear whose output only feeds
    // INT8 Linears (as X) writes INT8 at their input scale.
    const std::vector<std::vector<int>> consumers = graph.Consumers();
    std::vector<bool> is_output(graph.values.size(), false);
    for (int id : graph.outputs) is_output[id] = true;
    auto input_amax = [&](const ir::Node& n) -> Result<float> {
      const std::string& x = graph.values[n.input(0)].name;
      const float amax = config.quant.AmaxOf(x);
      if (!(amax > 0) || !std::isfinite(amax)) {
        return FailedPreconditionError(
            "cpu backend: layer '{}' is int8 but its input '{}' has no calibrated threshold (the "
            "calibration cache does not cover it; recalibrate this model)",
            n.name, x);
      }
      return amax;
    };
    std::vector<PackedEntry> entries;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      if (!IsLinearKernel(kernels[i])) continue;
      const ir::Node& n = graph.nodes[i];
      PackedEntry e;
      e.node = static_cast<uint32_t>(i);
      e.spec = *LinearSpecOf(graph, n);
      const Tensor& wt = graph.values[n.input(1)].constant;
      const int64_t m = OptRows(graph, n, opt, e.spec.k);
      if (kernels[i] == Kernel::kLinear) {
        Result<PackedWeights> pw = PackLinearWeights(e.spec, wt.data_as<float>(), m);
        if (!pw.ok()) return pw.status().WithContext(fmt::format("node '{}'", n.name));
        e.desc = std::move(pw->desc);
        e.impl = std::move(pw->impl);
        e.data = std::move(pw->data);
        entries.push_back(std::move(e));
        continue;
      }
      QuantLinearSpec qs;
      qs.base = e.spec;
      qs.precision =
          kernels[i] == Kernel::kLinearInt8 ? LinearPrecision::kInt8 : LinearPrecision::kBf16;
      if (qs.precision == LinearPrecision::kInt8) {
        SURGE_ASSIGN_OR_RETURN(float amax, input_amax(n));
        qs.x_scale = amax / 127.f;
        const int y = n.outputs[0];
        bool requant = !is_output[y] && !consumers[y].empty();
        for (int c : consumers[y]) {
          const ir::Node& cn = graph.nodes[c];
          requant = requant && kernels[c] == Kernel::kLinearInt8 && cn.input(0) == y &&
                    cn.input(2) != y && cn.input(3) != y;
        }
        if (requant) {
          SURGE_ASSIGN_OR_RETURN(float y_amax, input_amax(graph.nodes[consumers[y][0]]));
          qs.y_scale = y_amax / 127.f;
        }
      }
      Result<PackedQuantWeights> pw = PackQuantLinearWeights(qs, wt.data_as<float>(), m);
      if (!pw.ok()) return pw.status().WithContext(fmt::format("node '{}'", n.name));
      e.precision = qs.precision;
      e.x_scale = qs.x_scale;
      e.y_scale = qs.y_scale;
      e.w_scales = std::move(pw->w_scales);
      e.w_max = pw->w_max;
      e.desc = std::move(pw->desc);
      e.impl = std::move(pw->impl);
      e.data = std::move(pw->data);
      entries.push_back(std::move(e));
    }
    const bool quant_format = std::any_of(entries.begin(), entries.end(), [](const PackedEntry& e) {
      return e.precision != LinearPrecision::kFp32;
    });
    BlobWriter w;
    w.Put<uint32_t>(kBlobMagic);
    w.Put<uint32_t>(quant_format ? kBlobVersionQuantRange : kBlobVersion);
    w.Str(IsaName(isa));
    w.Str(OneDnnVersion());
    w.Put<uint32_t>(static_cast<uint32_t>(OneDnnDescSize()));
    w.Put<uint32_t>(static_cast<uint32_t>(graph.nodes.size()));
    for (Kernel k : kernels) w.Put<uint8_t>(static_cast<uint8_t>(k));
    // Weight table, then the data region at 64-byte aligned offsets from the blob start. The
    // table's size does not depend on the offsets, so a first serialisation measures it.
    w.Put<uint32_t>(static_cast<uint32_t>(entries.size()));
    std::vector<uint64_t> offsets(entries.size(), 0);
    BlobWriter probe;
    WriteWeightTable(probe, entries, offsets, quant_format);
    const size_t table_end = w.size() + probe.size();
    uint64_t offset = AlignUp(table_end);
    for (size_t j = 0; j < entries.size(); ++j) {
      offsets[j] = offset;
      offset = AlignUp(offset + entries[j].data.size());
    }
    WriteWeightTable(w, entries, offsets, quant_format);
    SURGE_CHECK(w.size() == table_end, "blob table size mismatch");
    for (size_t j = 0; j < entries.size(); ++j) {
      w.PadTo(kAlignment);
      SURGE_CHECK(w.size() == offsets[j], "blob offset mismatch");
      w.Raw(entries[j].data.data(), entries[j].data.size());
    }
    SURGE_LOG_DEBUG("cpu backend: lowered {} nodes, {} packed Linear weights, isa {}",
                    graph.nodes.size(), entries.size(), IsaName(isa));
    return w.Take();
  }

  // Every Linear kernel reads its weight packed from the blob (Load refuses a Linear node without
  // one), so a weight read only by such nodes is left out of the plan's weights section.
  Result<std::vector<int>> ConstantsKeptByTactics(const ir::Graph& graph, const BuilderConfig&,
                                                  std::span<const uint8_t> tactics) override {
    BlobReader r(tactics);
    SURGE_ASSIGN_OR_RETURN(BlobHeader header, ReadBlobHeader(r));
    if (header.num_nodes != graph.nodes.size()) {
      return DataLossError("CPU tactics blob describes {} nodes, the graph has {}",
                           header.num_nodes, graph.nodes.size());
    }
    std::vector<bool> packed(graph.nodes.size(), false);
    for (uint32_t i = 0; i < header.num_nodes; ++i) {
      SURGE_ASSIGN_OR_RETURN(uint8_t k, r.Get<uint8_t>());
      packed[i] = k <= kMaxKernel && IsLinearKernel(static_cast<Kernel>(k));
    }
    const std::vector<std::vector<int>> consumers = graph.Consumers();
    std::vector<int> kept;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      const int w = packed[i] ? graph.nodes[i].input(1) : -1;
      if (w < 0 || !graph.values[w].is_constant()) continue;
      const bool only_packed =
          std::all_of(consumers[w].begin(), consumers[w].end(), [&](int c) { return packed[c]; });
      const bool output =
          std::find(graph.outputs.begin(), graph.outputs.end(), w) != graph.outputs.end();
      if (only_packed && !output && std::find(kept.begin(), kept.end(), w) == kept.end()) {
        kept.push_back(w);
      }
    }
    return kept;
  }

  Result<std::unique_ptr<BackendEngine>> Load(std::shared_ptr<const ir::Graph> graph,
                                              std::span<const uint8_t> tactics,
                                              const BuilderConfig& built_with,
                                              const EngineOptions& options) override {
    if (graph == nullptr) return InvalidArgumentError("cpu backend: no graph");
    const ir::Graph& g = *graph;
    BlobReader r(tactics);
    SURGE_ASSIGN_OR_RETURN(BlobHeader header, ReadBlobHeader(r));
    const uint32_t version = header.version;
    const std::string& isa_name = header.isa_name;
    Result<Isa> isa = ParseIsa(isa_name);
    if (!isa.ok()) return DataLossError("CPU tactics blob: unknown ISA '{}'", isa_name);
    // DefaultIsa() is what this CPU offers, lowered by SURGE_CPU_ISA when that is set.
    if (static_cast<int>(*isa) > static_cast<int>(DefaultIsa())) {
      return FailedPreconditionError(
          "plan was built for {} but this CPU supports only {}{}; rebuild the plan on this machine",
          ArchName(*isa), ArchName(DefaultIsa()),
          DefaultIsa() != DetectIsa() ? " (limited by SURGE_CPU_ISA)" : "");
    }
    const std::string& dnnl_version = header.dnnl_version;
    const uint32_t desc_size = header.desc_size, num_nodes = header.num_nodes;
    if (num_nodes != g.nodes.size()) {
      return DataLossError("CPU tactics blob describes {} nodes, the graph has {}", num_nodes,
                           g.nodes.size());
    }
    auto e = std::make_unique<CpuEngine>();
    e->graph = graph;
    e->isa = *isa;
    e->num_threads = options.num_threads > 0 ? options.num_threads : built_with.num_threads;
    e->kernels.resize(num_nodes);
    e->linears.resize(num_nodes);
    e->qlinears.resize(num_nodes);
    e->value_dtype.assign(g.values.size(), DType::kFloat32);
    for (uint32_t i = 0; i < num_nodes; ++i) {
      SURGE_ASSIGN_OR_RETURN(uint8_t k, r.Get<uint8_t>());
      if (k > kMaxKernel) return DataLossError("CPU tactics blob: node {} has kernel id {}", i, k);
      e->kernels[i] = static_cast<Kernel>(k);
      const Kernel want = ChooseKernel(g, g.nodes[i], *isa);
      const bool quant_linear = want == Kernel::kLinear && IsLinearKernel(e->kernels[i]);
      if (e->kernels[i] != Kernel::kGeneric && e->kernels[i] != want && !quant_linear) {
        return DataLossError("CPU tactics blob: node {} ('{}', {}) cannot use kernel {}", i,
                             g.nodes[i].name, g.nodes[i].op_type, KernelName(e->kernels[i]));
      }
    }
    SURGE_ASSIGN_OR_RETURN(uint32_t num_weights, r.Get<uint32_t>());
    if (num_weights > num_nodes) {
      return DataLossError("CPU tactics blob: {} weights for {} nodes", num_weights, num_nodes);
    }
    for (uint32_t j = 0; j < num_weights; ++j) {
      WeightEntry we;
      SURGE_ASSIGN_OR_RETURN(we.node, r.Get<uint32_t>());
      SURGE_ASSIGN_OR_RETURN(we.spec.k, r.Get<int64_t>());
      SURGE_ASSIGN_OR_RETURN(we.spec.n, r.Get<int64_t>());
      SURGE_ASSIGN_OR_RETURN(uint8_t has_bias, r.Get<uint8_t>());
      SURGE_ASSIGN_OR_RETURN(uint8_t has_res, r.Get<uint8_t>());
      SURGE_ASSIGN_OR_RETURN(uint8_t act, r.Get<uint8_t>());
      SURGE_ASSIGN_OR_RETURN(uint8_t format, r.Get<uint8_t>());
      if (version == kBlobVersion) format = 0;  // version 1 wrote 0 here
      if (format > static_cast<uint8_t>(LinearPrecision::kBf16)) {
        return DataLossError("CPU tactics blob: weight entry {} has format {}", j, format);
      }
      const auto precision = static_cast<LinearPrecision>(format);
      QuantLinearSpec qs;
      std::vector<float> w_scales;
      qs.precision = precision;
      if (precision != LinearPrecision::kFp32) {
        SURGE_ASSIGN_OR_RETURN(qs.x_scale, r.Get<float>());
        SURGE_ASSIGN_OR_RETURN(qs.y_scale, r.Get<float>());
        SURGE_ASSIGN_OR_RETURN(uint32_t num_scales, r.Get<uint32_t>());
        if (num_scales > r.remaining() / sizeof(float)) {
          return DataLossError("CPU tactics blob: weight entry {} claims {} scales", j, num_scales);
        }
        w_scales.resize(num_scales);
        for (float& f : w_scales) {
          SURGE_ASSIGN_OR_RETURN(f, r.Get<float>());
        }
      }
      int w_max = precision == LinearPrecision::kInt8 ? 127 : 0;
      if (precision != LinearPrecision::kFp32 && version >= kBlobVersionQuantRange) {
        SURGE_ASSIGN_OR_RETURN(uint8_t m, r.Get<uint8_t>());
        if (precision == LinearPrecision::kInt8) w_max = m;
      }
      if (precision == LinearPrecision::kInt8) {
        if (w_max < 1 || w_max > 127) {
          return DataLossError("CPU tactics blob: weight entry {} has INT8 weight range {}", j,
                               w_max);
        }
        if (w_max > Int8WeightMax()) {
          return FailedPreconditionError(
              "plan's INT8 weights use the range [-{0},{0}] (packed on a CPU with VNNI); this CPU "
              "has no VNNI, where oneDNN's 16-bit pair sums would saturate on them; rebuild the "
              "plan on this machine",
              w_max);
        }
        qs.w_max = w_max;
      }
      SURGE_ASSIGN_OR_RETURN(we.desc, r.Str(4096));
      SURGE_ASSIGN_OR_RETURN(we.impl, r.Str(4096));
      SURGE_ASSIGN_OR_RETURN(uint64_t off, r.Get<uint64_t>());
      SURGE_ASSIGN_OR_RETURN(uint64_t size, r.Get<uint64_t>());
      SURGE_ASSIGN_OR_RETURN(we.data, r.At(off, size));
      if (we.node >= num_nodes || e->kernels[we.node] != KernelOf(precision) ||
          e->linears[we.node] || e->qlinears[we.node]) {
        return DataLossError(
            "CPU tactics blob: weight entry {} names node {} which is not a "
            "Linear without weights",
            j, we.node);
      }
      std::optional<LinearSpec> expect = LinearSpecOf(g, g.nodes[we.node]);
      if (act > 4 || !expect || expect->k != we.spec.k || expect->n != we.spec.n ||
          expect->has_bias != (has_bias != 0) || expect->has_residual != (has_res != 0) ||
          static_cast<uint8_t>(expect->act) != act) {
        return DataLossError("CPU tactics blob: weight entry {} does not match node '{}'", j,
                             g.nodes[we.node].name);
      }
      we.spec = *expect;
      if (!we.desc.empty() && (desc_size != OneDnnDescSize() || dnnl_version != OneDnnVersion())) {
        return FailedPreconditionError(
            "plan's packed weights are for oneDNN {} (descriptor {} bytes); this build has "
            "oneDNN {} ({} bytes); rebuild the plan",
            dnnl_version, desc_size, OneDnnVersion(), OneDnnDescSize());
      }
      const void* data = we.data.data();
      if (reinterpret_cast<uintptr_t>(data) % kAlignment != 0) {
        AlignedBuffer copy(we.data.size());
        std::memcpy(copy.data(), we.data.data(), we.data.size());
        data = copy.data();
        e->owned_weights.push_back(std::move(copy));
      }
      if (precision != LinearPrecision::kFp32) {
        if (precision == LinearPrecision::kBf16 && !CpuHasBf16()) {
          return FailedPreconditionError(
              "plan runs BF16 GEMMs (node '{}'), which need AVX-512 BF16; this CPU lacks it; "
              "rebuild the plan as fp32 or int8",
              g.nodes[we.node].name);
        }
        qs.base = we.spec;
        Result<std::unique_ptr<QuantLinearKernel>> qk =
            QuantLinearKernel::Create(qs, we.desc, data, we.data.size(), std::move(w_scales));
        if (!qk.ok()) {
          return qk.status().WithContext(fmt::format("node '{}'", g.nodes[we.node].name));
        }
        if ((*qk)->int8_output()) e->value_dtype[g.nodes[we.node].outputs[0]] = DType::kInt8;
        e->qlinears[we.node] = std::move(qk).value();
        continue;
      }
      Result<std::unique_ptr<LinearKernel>> lk =
          LinearKernel::Create(we.spec, we.desc, data, we.data.size());
      if (!lk.ok()) {
        return lk.status().WithContext(fmt::format("node '{}'", g.nodes[we.node].name));
      }
      e->linears[we.node] = std::move(lk).value();
    }
    for (uint32_t i = 0; i < num_nodes; ++i) {
      if (IsLinearKernel(e->kernels[i]) && !e->linears[i] && !e->qlinears[i]) {
        return DataLossError("CPU tactics blob: Linear node '{}' has no weights", g.nodes[i].name);
      }
    }
    // An INT8 output may only feed INT8 Linears as their X.
    const std::vector<std::vector<int>> consumers = g.Consumers();
    for (size_t v = 0; v < g.values.size(); ++v) {
      if (e->value_dtype[v] != DType::kInt8) continue;
      bool ok =
          std::find(g.outputs.begin(), g.outputs.end(), static_cast<int>(v)) == g.outputs.end();
      for (int c : consumers[v]) {
        const int producer = g.values[v].producer;
        ok = ok && e->kernels[c] == Kernel::kLinearInt8 &&
             g.nodes[c].input(0) == static_cast<int>(v) && e->qlinears[c] && producer >= 0 &&
             e->qlinears[producer] &&
             e->qlinears[c]->spec().x_scale == e->qlinears[producer]->spec().y_scale;
      }
      if (!ok) {
        return DataLossError(
            "CPU tactics blob: value '{}' is written as int8 but is read by something other "
            "than an INT8 Linear",
            g.values[v].name);
      }
    }
    // Lifetimes: the last step reading each value; graph outputs live to the end.
    e->last_use.assign(g.values.size(), -1);
    e->is_output.assign(g.values.size(), false);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int id : g.nodes[i].inputs) {
        if (id >= 0) e->last_use[id] = static_cast<int>(i);
      }
    }
    for (int id : g.outputs) e->is_output[id] = true;
    std::vector<std::string> symbols;
    for (int id : g.inputs) {
      if (!g.values[id].shape) continue;
      for (const ir::Dim& d : *g.values[id].shape) {
        if (d.IsSymbol()) symbols.push_back(d.Symbols()[0]);
      }
    }
    std::sort(symbols.begin(), symbols.end());
    symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());
    e->symbols = std::move(symbols);
    // Arena size at the profile's opt shapes, for Describe().
    std::vector<Shape> opt_shapes;
    for (int id : g.inputs) {
      const InputProfile* p = built_with.profile.Find(g.values[id].name);
      if (p == nullptr) break;
      opt_shapes.push_back(p->opt);
    }
    if (opt_shapes.size() == g.inputs.size()) {
      CpuContext probe(e.get());
      Result<const ExecPlan*> plan = probe.PlanFor(opt_shapes);
      if (plan.ok()) e->opt_arena_bytes = (*plan)->arena_bytes;
    }
    return std::unique_ptr<BackendEngine>(std::move(e));
  }
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace surge::engine::cpu
