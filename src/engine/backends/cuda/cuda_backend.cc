#include "engine/backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <tuple>

#include "core/logging.h"
#include "engine/backends/cuda/attention_kernels.h"
#include "engine/backends/cuda/bias_act_kernels.h"
#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/embed_layer_norm_kernels.h"
#include "engine/backends/cuda/gemm.h"
#include "engine/backends/cuda/host_convert.h"
#include "engine/backends/cuda/input_index.h"
#include "engine/backends/cuda/layer_norm_kernels.h"
#include "engine/backends/cuda/lowering.h"
#include "engine/backends/cuda/pack_kernels.h"
#include "engine/backends/cuda/quant_linear.h"

namespace surge::engine::cuda {
namespace {

constexpr size_t kGemmWorkspaceBytes = 32u << 20;
// Packed token counts are rounded up to this many rows so that one captured CUDA graph serves
// every batch whose real-token count falls in the same bucket.
constexpr int64_t kTokenBucket = 32;
constexpr size_t kAlign = 256;
constexpr size_t kPinnedOutputBytes = 4u << 20;
// A Linear weight is held in both layouts where the other one's tuned GEMM is at least this
// fraction faster at one of the row counts tuned (below it, tuning noise).
constexpr double kBothLayoutsGain = 0.03;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct HostFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
using DevicePtr = std::unique_ptr<void, DeviceFree>;
using PinnedPtr = std::unique_ptr<void, HostFree>;

Result<DevicePtr> DeviceAlloc(size_t bytes, std::string_view what) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("cuda: allocating {} MiB for {} failed: {}", bytes >> 20, what,
                              cudaGetErrorString(err)));
  }
  return DevicePtr(p);
}

struct Extent {
  int64_t batch = 0, seq = 0;
};

Result<Extent> ProfileShape(const Program& p, const BuilderConfig& c, bool max) {
  for (const InputProfile& ip : c.profile.inputs) {
    if (ip.name == p.ids_name) {
      const Shape& s = max ? ip.max : ip.opt;
      if (s.size() == 2 && s[0] > 0 && s[1] > 0) return Extent{s[0], s[1]};
    }
  }
  return InvalidArgumentError(
      "cuda backend needs an optimisation profile for '{}' ([batch, seq]; e.g. --profile "
      "{}:1x1,8x128,64x512): activation memory is sized from its max and GEMMs are tuned at its "
      "opt",
      p.ids_name, p.ids_name);
}

class CudaEngine;

// Per-request shape: what the captured graphs are keyed by.
struct RunShape {
  int64_t batch = 0, seq = 0, token_rows = 0;  // token_rows: B*S padded, bucketed T packed
  bool packed = false;
  auto Tie() const { return std::tie(batch, seq, token_rows, packed); }
  bool operator<(const RunShape& o) const { return Tie() < o.Tie(); }
};

// Offsets of the int32 index arrays inside one pinned host block and its device twin.
struct IndexLayout {
  size_t ids, types, positions, row_index, scatter_index, cu_seqlens, key_mask, cls_index, bytes;
  explicit IndexLayout(int64_t bs, int64_t b) {
    size_t off = 0;
    auto take = [&](int64_t n) {
      const size_t at = off;
      off += AlignUp(static_cast<size_t>(n) * 4);
      return at;
    };
    ids = take(bs);
    types = take(bs);
    positions = take(bs);
    row_index = take(bs);
    scatter_index = take(bs);
    cu_seqlens = take(b + 1);
    key_mask = take(bs);
    cls_index = take(b);
    bytes = off;
  }
};

class CudaContext : public BackendContext {
 public:
  CudaContext(std::shared_ptr<const CudaEngine> engine) : engine_(std::move(engine)) {}
  ~CudaContext() override;
  Status Init();
  Status Execute(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) override;

 private:
  Status RunOps(const RunShape& shape, bool capturing);
  // With SURGE_CUDA_OP_TIMES=1, eager runs record an event before each kernel group; the totals
  // per group are logged after the run (a diagnostic for tuning, off by default), with the host's
  // share of the call: preparing the index arrays, launching, waiting for the device.
  using HostClock = std::chrono::steady_clock;
  void Mark(const char* label, bool capturing);
  void LogOpTimes(HostClock::time_point start, HostClock::time_point launch,
                  HostClock::time_point launched, HostClock::time_point done);
  void* Act(int value) const;
  // A Linear's cuBLASLt plan at desc.m rows and the copy of its weight (value id `weight`) that
  // plan reads: where the engine holds the weight in both layouts, the one tuned faster at that
  // row count. Made once per op and row count.
  struct LinearPlan {
    std::unique_ptr<GemmPlan> plan;
    const void* weight = nullptr;
  };
  Result<const LinearPlan*> Plan(size_t op_index, int weight, GemmDesc desc);

  std::shared_ptr<const CudaEngine> engine_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  DevicePtr arena_, gemm_ws_, index_dev_, outputs_dev_;
  PinnedPtr index_host_;
  // Pinned float32 copies of the small graph outputs (at most kPinnedOutputBytes each at the
  // profile max), downloaded inside the captured graph; larger outputs are copied after it.
  PinnedPtr outputs_host_;
  std::vector<size_t> pinned_offset_;  // per graph output: offset in outputs_host_, or npos
  size_t reserved_ = 0;
  bool use_graphs_ = true;
  bool op_times_ = false;
  std::vector<std::pair<const char*, cudaEvent_t>> marks_;
  std::vector<cudaEvent_t> event_pool_;
  std::map<std::pair<size_t, int64_t>, LinearPlan> gemm_plans_;
  QuantLinearRunner quant_runner_;
  std::map<RunShape, cudaGraphExec_t> graphs_;
  std::set<RunShape> uncapturable_;
};

class CudaEngine : public BackendEngine, public std::enable_shared_from_this<CudaEngine> {
 public:
  Status Init(std::shared_ptr<const ir::Graph> graph, std::span<const uint8_t> blob,
              const BuilderConfig& config, const EngineOptions& options);
  Result<std::unique_ptr<BackendContext>> CreateContext() override;
  std::string Describe() const override;

  const ir::Graph& graph() const { return *graph_; }
  const Program& program() const { return program_; }
  const Extent& max() const { return max_; }
  const std::map<int, size_t>& act_offset() const { return act_offset_; }
  const QuantLinears& quant() const { return quant_; }
  size_t arena_bytes() const { return arena_bytes_; }
  const std::vector<size_t>& output_offsets() const { return output_offsets_; }
  size_t outputs_bytes() const { return outputs_bytes_; }
  const void* Weight(int v) const { return v < 0 ? nullptr : weight_ptr_.at(v); }
  // A Linear weight's copy in the other layout than the op's (null where the engine holds one).
  const void* OtherLayoutWeight(int v) const {
    auto it = other_layout_ptr_.find(v);
    return it == other_layout_ptr_.end() ? nullptr : it->second;
  }
  const TacticTable& tactics() const { return tactics_; }
  // Reserves device bytes against the budget; the error says what would not fit.
  Status Reserve(size_t bytes, std::string_view what) const;
  void Release(size_t bytes) const { reserved_ -= bytes; }
  // Device bytes one execution context reserves.
  size_t ContextBytes() const;

 private:
  void PlanArena();
  // The second copies of Blob::weights_both (of those `bytes` holds in the device type).
  Status LoadOtherLayouts(const Blob& b, const std::map<int, std::vector<uint8_t>>& bytes);

  std::shared_ptr<const ir::Graph> graph_;
  Program program_;
  QuantLinears quant_;  // INT8/FP8 Linear layers (int8/fp8 builds)
  Extent max_;
  DevicePtr weights_;
  size_t weights_bytes_ = 0;
  std::map<int, const void*> weight_ptr_;
  // Weights held in both layouts (Blob::weights_both), the second copy.
  DevicePtr other_layout_;
  size_t other_layout_bytes_ = 0;
  std::map<int, const void*> other_layout_ptr_;
  TacticTable tactics_;
  std::map<int, size_t> act_offset_;
  size_t arena_bytes_ = 0;
  std::vector<size_t> output_offsets_;  // per graph output: float32 staging offset
  size_t outputs_bytes_ = 0;
  size_t budget_ = 0;
  mutable std::atomic<size_t> reserved_{0};
};

// ---------------------------------------------------------------------------------------------
// Engine

int64_t RowsCap(const ActivationInfo& a, const Extent& max) {
  return a.domain == RowDomain::kTokens ? max.batch * max.seq + 1 : max.batch;
}

void CudaEngine::PlanArena() {
  // Liveness over op order; graph outputs live to the end. Largest first, lowest free offset.
  const int n_ops = static_cast<int>(program_.ops.size());
  std::map<int, std::pair<int, int>> life;  // value -> [birth, death]
  for (int i = 0; i < n_ops; ++i) {
    const LoweredOp& op = program_.ops[i];
    for (int o : op.outputs) {
      if (o >= 0) life[o] = {i, i};
    }
    for (int in : op.inputs) {
      auto it = life.find(in);
      if (it != life.end()) it->second.second = i;
    }
  }
  for (int o : graph_->outputs) life[o].second = n_ops;
  std::vector<std::pair<size_t, int>> order;
  for (const auto& [v, info] : program_.activations) {
    order.push_back({AlignUp(RowsCap(info, max_) * info.cols * 2), v});
  }
  std::sort(order.begin(), order.end(), std::greater<>());
  struct Placed {
    size_t off, size;
    int birth, death;
  };
  std::vector<Placed> placed;
  for (const auto& [size, v] : order) {
    const auto [birth, death] = life[v];
    std::vector<std::pair<size_t, size_t>> busy;
    for (const Placed& p : placed) {
      if (p.birth <= death && birth <= p.death) busy.push_back({p.off, p.off + p.size});
    }
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (const auto& [b, e] : busy) {
      if (off + size <= b) break;
      off = std::max(off, e);
    }
    placed.push_back({off, size, birth, death});
    act_offset_[v] = off;
    arena_bytes_ = std::max(arena_bytes_, off + size);
  }
  outputs_bytes_ = 0;
  for (int o : graph_->outputs) {
    const ActivationInfo& a = program_.activations.at(o);
    output_offsets_.push_back(outputs_bytes_);
    // float32 staging, plus room for the scattered FP16/BF16 rows before conversion.
    outputs_bytes_ +=
        AlignUp(RowsCap(a, max_) * a.cols * 4) + AlignUp(RowsCap(a, max_) * a.cols * 2);
  }
}

Status CudaEngine::Reserve(size_t bytes, std::string_view what) const {
  const size_t now = reserved_.fetch_add(bytes) + bytes;
  if (budget_ != 0 && now > budget_) {
    reserved_ -= bytes;
    return Status(
        StatusCode::kResourceExhausted,
        fmt::format("cuda: {} needs {:.1f} MiB but the device memory budget of {:.1f} "
                    "MiB has only {:.1f} MiB left (weights {:.1f} MiB; activations are "
                    "sized for the profile max {}x{}); raise the budget or lower the "
                    "profile max",
                    what, bytes / 1048576.0, budget_ / 1048576.0,
                    (budget_ - (now - bytes)) / 1048576.0,
                    (weights_bytes_ + quant_.device_bytes()) / 1048576.0, max_.batch, max_.seq));
  }
  return Status::Ok();
}

Status CudaEngine::Init(std::shared_ptr<const ir::Graph> graph, std::span<const uint8_t> blob,
                        const BuilderConfig& config, const EngineOptions& options) {
  graph_ = std::move(graph);
  SURGE_ASSIGN_OR_RETURN(Blob b, ParseBlob(blob));
  SURGE_ASSIGN_OR_RETURN(program_,
                         AnalyzeGraph(*graph_, QuantBaseConfig(config), b.first_token_only));
  if (b.dtype != program_.dtype) {
    return DataLossError("cuda plan: tactics were built for another precision than the config");
  }
  SURGE_ASSIGN_OR_RETURN(max_, ProfileShape(program_, config, true));
  SURGE_ASSIGN_OR_RETURN(tactics_, TacticTable::FromBlob(b.tactics));
  program_.exact_gelu = b.exact_gelu;
  for (LoweredOp& op : program_.ops) {
    if (op.kind == OpKind::kLinear) op.weight_nk = b.weights_nk.count(op.inputs[1]) > 0;
  }
  budget_ = options.memory_budget_bytes ? options.memory_budget_bytes : config.memory_budget_bytes;
  // The quantised layers first: which of them run quantised decides which weights the device
  // needs in its own type.
  SURGE_ASSIGN_OR_RETURN(quant_,
                         QuantLinears::Analyze(*graph_, program_, config, true, &b.quant_weights));
  if (!quant_.empty()) {
    cublasLtHandle_t lt = nullptr;
    SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&lt));
    Status st = quant_.Prepare(lt, kGemmWorkspaceBytes, max_.batch * max_.seq + 1, max_.batch);
    cublasLtDestroy(lt);
    SURGE_RETURN_IF_ERROR(st);
    SURGE_RETURN_IF_ERROR(Reserve(quant_.device_bytes(), "the quantised weights"));
  }
  // Weights in the device type or float32: the blob's bytes, or converted now for blobs without
  // them; a layer the plan quantised that runs FP16 after all (QuantLinears::FallbackReason)
  // reads its quantised weight dequantised.
  const std::set<int> read = WeightsOutsideQuantisedGemms(program_, quant_);
  std::map<int, std::vector<uint8_t>> bytes;
  size_t total = 0;
  for (const auto& [v, f32] : program_.weights) {
    if (!read.count(v)) continue;
    auto it = b.weights.find(v);
    const Tensor& c = graph_->values[v].constant;
    const bool nk = b.weights_nk.count(v) > 0;
    if (it != b.weights.end()) {
      bytes[v] = std::move(it->second);
    } else if (!c.empty()) {
      SURGE_ASSIGN_OR_RETURN(bytes[v],
                             ConvertWeight(nk ? TransposeWeight(c) : c, f32, program_.dtype));
    } else {
      const QuantWeight* q = nullptr;
      for (const auto& [key, w] : b.quant_weights) {
        if (key.first == v) q = &w;
      }
      if (q == nullptr) {
        return DataLossError(
            "cuda plan: weight '{}' is neither in the tactics nor in the plan's weights",
            graph_->values[v].name);
      }
      SURGE_ASSIGN_OR_RETURN(bytes[v],
                             ConvertWeight(DequantizeLinearWeight(*q, !nk), f32, program_.dtype));
    }
    const size_t expect = graph_->values[v].constant.numel() * (f32 ? 4 : 2);
    if (bytes[v].size() != expect) {
      return DataLossError("cuda plan: weight '{}' has {} bytes, expected {}",
                           graph_->values[v].name, bytes[v].size(), expect);
    }
    total += AlignUp(expect);
  }
  weights_bytes_ = total;
  SURGE_RETURN_IF_ERROR(Reserve(total, "the weights"));
  SURGE_ASSIGN_OR_RETURN(weights_, DeviceAlloc(total, "weights"));
  size_t off = 0;
  for (const auto& [v, data] : bytes) {
    char* dst = static_cast<char*>(weights_.get()) + off;
    SURGE_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, data.data(), data.size(), cudaMemcpyHostToDevice));
    weight_ptr_[v] = dst;
    off += AlignUp(data.size());
  }
  PlanArena();
  SURGE_RETURN_IF_ERROR(LoadOtherLayouts(b, bytes));
  return Status::Ok();
}

Status CudaEngine::LoadOtherLayouts(const Blob& b,
                                    const std::map<int, std::vector<uint8_t>>& bytes) {
  // Each weight's [K,N] or [N,K] shape from the Linear reading it.
  std::map<int, std::pair<int64_t, int64_t>> kn;
  for (const LoweredOp& op : program_.ops) {
    if (op.kind == OpKind::kLinear && b.weights_both.count(op.inputs[1]) &&
        bytes.count(op.inputs[1]) && !program_.weights.at(op.inputs[1])) {
      kn[op.inputs[1]] = {op.k, op.cols};
    }
  }
  size_t total = 0;
  for (const auto& [v, shape] : kn) total += AlignUp(bytes.at(v).size());
  if (total == 0) return Status::Ok();
  // The second layouts only make calls faster: where the budget cannot hold them and one
  // execution context besides, the engine runs with one layout, as plans before them did.
  if (Status room = Reserve(total + ContextBytes(), "the weights' second layouts"); !room.ok()) {
    SURGE_LOG_WARN("cuda: {} weights in one layout only: {}", kn.size(), room.message());
    return Status::Ok();
  }
  Release(ContextBytes());
  other_layout_bytes_ = total;
  SURGE_ASSIGN_OR_RETURN(other_layout_, DeviceAlloc(total, "weights in their second layout"));
  size_t off = 0;
  for (const auto& [v, shape] : kn) {
    const std::vector<uint8_t>& data = bytes.at(v);
    const auto [k, n] = shape;
    const bool nk = b.weights_nk.count(v) > 0;  // stored [N,K]: the copy is [K,N]
    std::vector<uint8_t> t(data.size());  // 2-byte elements: Linear weights in the device type
    Transpose(reinterpret_cast<const uint16_t*>(data.data()), nk ? n : k, nk ? k : n,
              reinterpret_cast<uint16_t*>(t.data()));
    char* dst = static_cast<char*>(other_layout_.get()) + off;
    SURGE_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, t.data(), t.size(), cudaMemcpyHostToDevice));
    other_layout_ptr_[v] = dst;
    off += AlignUp(t.size());
  }
  return Status::Ok();
}

Result<std::unique_ptr<BackendContext>> CudaEngine::CreateContext() {
  SURGE_RETURN_IF_ERROR(CudaDeviceAvailable());
  auto ctx = std::make_unique<CudaContext>(shared_from_this());
  SURGE_RETURN_IF_ERROR(ctx->Init());
  return std::unique_ptr<BackendContext>(std::move(ctx));
}

std::string CudaEngine::Describe() const {
  std::string s = fmt::format(
      "cuda backend ({}), padding-free {}, GELU {}, profile max {}x{}\nweights {:.1f} MiB{}{}, "
      "activation "
      "arena {:.1f} MiB per context, output staging {:.1f} MiB, GEMM workspace {} MiB\n",
      program_.dtype == DataType::kF16 ? "fp16" : "bf16", program_.padding_free ? "on" : "off",
      program_.exact_gelu ? "exact (erf)" : "tanh form fused on token rows", max_.batch, max_.seq,
      (weights_bytes_ + quant_.device_bytes()) / 1048576.0,
      quant_.empty() ? std::string()
                     : fmt::format(" ({:.1f} MiB of them INT8/FP8 with their scales)",
                                   quant_.device_bytes() / 1048576.0),
      other_layout_ptr_.empty()
          ? std::string()
          : fmt::format(" + {:.1f} MiB of {} weights in their second layout",
                        other_layout_bytes_ / 1048576.0, other_layout_ptr_.size()),
      arena_bytes_ / 1048576.0, outputs_bytes_ / 1048576.0, kGemmWorkspaceBytes >> 20);
  std::map<const void*, std::string> tactics_listed;  // a shape's tunings -> op listing them
  for (const LoweredOp& op : program_.ops) {
    const ir::Node& n = graph_->nodes[op.node];
    std::string kernel;
    switch (op.kind) {
      case OpKind::kEmbedLayerNorm:
        kernel = "embed_layer_norm (packs tokens)";
        break;
      case OpKind::kLinear: {
        if (const QuantLinearOp* q = quant_.Find(&op - program_.ops.data())) {
          kernel = quant_.Describe(*q);
          break;
        }
        bool extra = false;
        const GemmDesc d = LinearGemm(program_, op, 1, &extra);
        // Each GEMM shape's tunings are listed once, at its first op.
        auto tunings = [&](const GemmDesc& desc) {
          std::string tuned;
          bool floors = false;
          if (const auto* rows = tactics_.Rows(desc, &floors)) {
            auto [first, fresh] = tactics_listed.emplace(rows, n.name);
            if (!fresh) {
              tuned = fmt::format(" as {}", first->second);
            } else {
              for (const auto& [r, algo] : *rows) {
                tuned += floors ? fmt::format(" rows~2^{}: {:.1f} us;", RowBucket(r), algo.time_us)
                                : fmt::format(" {}: {:.1f} us;", r, algo.time_us);
              }
              if (!floors)
                tuned = " (the smallest tuned row count at or above the call's, us)" + tuned;
            }
          }
          return tuned.empty() ? std::string(" heuristic") : tuned;
        };
        const char* layout = op.weight_nk ? "[N,K]" : "[K,N]";
        kernel =
            fmt::format("cublasLt gemm k={} n={} W{} epilogue={}{}{} tactics:{}", op.k, op.cols,
                        layout, static_cast<int>(d.epilogue), d.residual ? " + residual (C)" : "",
                        extra ? " + bias_act" : "", tunings(d));
        if (OtherLayoutWeight(op.inputs[1])) {
          kernel += fmt::format(
              "; W also {} (each call runs the layout tuned faster at its row count), tactics:{}",
              op.weight_nk ? "[K,N]" : "[N,K]", tunings(OtherLayout(d)));
        }
        const std::string fallback = quant_.FallbackReason(&op - program_.ops.data());
        if (!fallback.empty()) kernel += " (fp16 instead of the quantised GEMM: " + fallback + ")";
        break;
      }
      case OpKind::kLayerNorm: {
        kernel = op.fused_residual ? "layer_norm (skip added by the GEMM before it)" : "layer_norm";
        const size_t index = &op - program_.ops.data();
        const QuantLinearOp* before = index > 0 ? quant_.Find(index - 1) : nullptr;
        if (before != nullptr && before->ln_op == index && !before->ln_fused.empty()) {
          std::string buckets;
          for (const auto& [bucket, us] : before->ln_fused) {
            buckets += fmt::format(" rows~2^{}: {:.1f} us;", bucket, us);
          }
          kernel += "; in the epilogue of the GEMM before it where timed faster:" + buckets;
        }
        break;
      }
      case OpKind::kSkipLayerNorm:
        kernel = "skip_layer_norm";
        break;
      case OpKind::kGelu:
        kernel = "bias_act (gelu)";
        break;
      case OpKind::kAttention:
        kernel = fmt::format("fused attention (heads {}, dim {}, varlen{})", op.num_heads,
                             op.head_dim, op.first_token_only ? ", first query only" : "");
        break;
      case OpKind::kGatherFirst:
        kernel = "gather rows ([CLS])";
        break;
      case OpKind::kL2Normalize:
        kernel = op.eps_max ? "l2_normalize (x / max(|x|, eps))" : "l2_normalize";
        break;
      case OpKind::kSqueeze:
        kernel = "copy (last axis dropped)";
        break;
    }
    bool keeps_fp16 = true;
    if (const QuantLinearOp* next = quant_.CopyFor(&op - program_.ops.data(), &keeps_fp16)) {
      kernel +=
          fmt::format(" + {} copy for '{}'{}", next->type == QuantType::kInt8 ? "int8" : "e4m3",
                      next->node, keeps_fp16 ? "" : " (no fp16 output)");
    }
    if (op.first_token_only && op.kind != OpKind::kAttention) kernel += " (first token rows only)";
    s += fmt::format("  {} ({}): {}\n", n.name, n.op_type, kernel);
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Context

CudaContext::~CudaContext() {
  for (auto& [k, g] : graphs_) cudaGraphExecDestroy(g);
  for (cudaEvent_t e : event_pool_) cudaEventDestroy(e);
  gemm_plans_.clear();
  if (lt_) cublasLtDestroy(lt_);
  if (stream_) cudaStreamDestroy(stream_);
  engine_->Release(reserved_);
}

size_t CudaEngine::ContextBytes() const {
  const IndexLayout idx(max_.batch * max_.seq + 1, max_.batch);
  return arena_bytes_ + kGemmWorkspaceBytes + idx.bytes + outputs_bytes_ +
         quant_.ScratchBytes(max_.batch * max_.seq + 1, max_.batch).total();
}

Status CudaContext::Init() {
  const Extent& mx = engine_->max();
  const IndexLayout idx(mx.batch * mx.seq + 1, mx.batch);
  const size_t need = engine_->ContextBytes();
  SURGE_RETURN_IF_ERROR(engine_->Reserve(need, "an execution context"));
  reserved_ = need;
  SURGE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&lt_));
  SURGE_ASSIGN_OR_RETURN(arena_, DeviceAlloc(engine_->arena_bytes(), "the activation arena"));
  SURGE_ASSIGN_OR_RETURN(gemm_ws_, DeviceAlloc(kGemmWorkspaceBytes, "the GEMM workspace"));
  SURGE_ASSIGN_OR_RETURN(index_dev_, DeviceAlloc(idx.bytes, "index arrays"));
  SURGE_ASSIGN_OR_RETURN(outputs_dev_, DeviceAlloc(engine_->outputs_bytes(), "output staging"));
  SURGE_RETURN_IF_ERROR(
      quant_runner_.Init(engine_->quant().ScratchBytes(mx.batch * mx.seq + 1, mx.batch)));
  void* host = nullptr;
  SURGE_CUDA_RETURN_IF_ERROR(cudaMallocHost(&host, idx.bytes));
  index_host_.reset(host);
  const ir::Graph& g = engine_->graph();
  size_t pinned = 0;
  for (int v : g.outputs) {
    const ActivationInfo& a = engine_->program().activations.at(v);
    const size_t bytes = RowsCap(a, mx) * a.cols * 4;
    pinned_offset_.push_back(bytes <= kPinnedOutputBytes ? pinned : std::string::npos);
    if (bytes <= kPinnedOutputBytes) pinned += AlignUp(bytes);
  }
  if (pinned > 0) {
    void* out_host = nullptr;
    SURGE_CUDA_RETURN_IF_ERROR(cudaMallocHost(&out_host, pinned));
    outputs_host_.reset(out_host);
  }
  const char* env = std::getenv("SURGE_CUDA_GRAPHS");
  use_graphs_ = !(env && std::string_view(env) == "0");
  const char* times = std::getenv("SURGE_CUDA_OP_TIMES");
  op_times_ = times && std::string_view(times) == "1";
  return Status::Ok();
}

void CudaContext::Mark(const char* label, bool capturing) {
  if (!op_times_ || capturing) return;
  if (marks_.size() == event_pool_.size()) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) return;
    event_pool_.push_back(e);
  }
  cudaEvent_t e = event_pool_[marks_.size()];
  cudaEventRecord(e, stream_);
  marks_.push_back({label, e});
}

void CudaContext::LogOpTimes(HostClock::time_point start, HostClock::time_point launch,
                             HostClock::time_point launched, HostClock::time_point done) {
  if (marks_.size() < 2) {
    marks_.clear();
    return;
  }
  auto ms = [](HostClock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  std::map<std::string, float> total;
  float all = 0;
  for (size_t i = 0; i + 1 < marks_.size(); ++i) {
    float ms = 0;
    cudaEventElapsedTime(&ms, marks_[i].second, marks_[i + 1].second);
    total[marks_[i].first] += ms;
    all += ms;
  }
  std::string line = fmt::format("cuda op times: total {:.3f} ms", all);
  for (const auto& [k, v] : total) line += fmt::format(", {} {:.3f}", k, v);
  line += fmt::format("; host: prepare {:.3f} ms, launch {:.3f}, wait and copy out {:.3f}",
                      ms(launch - start), ms(launched - launch), ms(done - launched));
  SURGE_LOG_INFO("{}", line);
  marks_.clear();
}

void* CudaContext::Act(int v) const {
  return static_cast<char*>(arena_.get()) + engine_->act_offset().at(v);
}

Result<const CudaContext::LinearPlan*> CudaContext::Plan(size_t op_index, int weight,
                                                         GemmDesc desc) {
  auto key = std::make_pair(op_index, desc.m);
  auto it = gemm_plans_.find(key);
  if (it != gemm_plans_.end()) return &it->second;
  LinearPlan lp;
  lp.weight = engine_->Weight(weight);
  if (const void* other = engine_->OtherLayoutWeight(weight);
      other && engine_->tactics().OtherLayoutFaster(desc)) {
    desc = OtherLayout(desc);
    lp.weight = other;
  }
  const GemmAlgo* tuned = engine_->tactics().Find(desc);
  SURGE_ASSIGN_OR_RETURN(
      lp.plan, GemmPlan::Create(lt_, desc, tuned ? *tuned : GemmAlgo{}, kGemmWorkspaceBytes));
  return &(gemm_plans_[key] = std::move(lp));
}

Status CudaContext::RunOps(const RunShape& sh, bool capturing) {
  const Program& prog = engine_->program();
  const DataType dt = prog.dtype;
  const Extent& mx = engine_->max();
  const IndexLayout idx(sh.batch * sh.seq + 1, sh.batch);
  auto dev_idx = [&](size_t off) {
    return reinterpret_cast<const int32_t*>(static_cast<char*>(index_dev_.get()) + off);
  };
  auto rows_of = [&](int v) {
    return prog.activations.at(v).domain == RowDomain::kTokens ? sh.token_rows : sh.batch;
  };
  // The index arrays travel inside the graph too: a replay reads the pinned block as the host
  // left it for this request.
  SURGE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(index_dev_.get(), index_host_.get(), idx.bytes,
                                             cudaMemcpyHostToDevice, stream_));
  size_t fused_layer_norm = 0;  // a LayerNorm op the quantised GEMM before it ran (0: none)
  for (size_t i = 0; i < prog.ops.size(); ++i) {
    const LoweredOp& op = prog.ops[i];
    auto in = [&](size_t k) { return k < op.inputs.size() ? op.inputs[k] : -1; };
    const int out = op.outputs[0];
    const int64_t rows = rows_of(out);
    switch (op.kind) {
      case OpKind::kEmbedLayerNorm: {
        Mark("embed_layer_norm", capturing);
        EmbedLayerNormArgs a;
        a.dtype = dt;
        a.rows = rows;
        a.hidden = op.cols;
        a.input_ids = dev_idx(idx.ids);
        a.type_ids = prog.token_type_ids >= 0 ? dev_idx(idx.types) : nullptr;
        a.positions = dev_idx(idx.positions);
        a.row_index = sh.packed ? dev_idx(idx.row_index) : nullptr;
        a.word_emb = engine_->Weight(in(3));
        a.pos_emb = engine_->Weight(in(4));
        a.type_emb = engine_->Weight(in(5));
        a.gamma = static_cast<const float*>(engine_->Weight(in(6)));
        a.beta = static_cast<const float*>(engine_->Weight(in(7)));
        a.epsilon = op.epsilon;
        a.y = Act(out);
        if (!EmbedLayerNormCanImplement(a))
          return UnimplementedError("embed_layer_norm: hidden {} unsupported", op.cols);
        SURGE_CUDA_RETURN_IF_ERROR(EmbedLayerNormRun(a, nullptr, stream_));
        break;
      }
      case OpKind::kLinear: {
        if (const QuantLinearOp* q = engine_->quant().Find(i)) {
          if (!q->input_ready) {
            Mark("quantize", capturing);
            SURGE_RETURN_IF_ERROR(quant_runner_.Quantize(*q, rows, Act(in(0)), stream_));
          }
          // Split by shape as the FP16 GEMMs are (N = K square, N > K wide, else narrow).
          static constexpr const char* kQuantMarks[2][3] = {
              {"gemm_int8_square", "gemm_int8_wide", "gemm_int8_narrow"},
              {"gemm_fp8_square", "gemm_fp8_wide", "gemm_fp8_narrow"}};
          const int type_mark = q->type == QuantType::kFp8E4M3 ? 1 : 0;
          const int shape_mark = q->n == q->k ? 0 : (q->n > q->k ? 1 : 2);
          // The LayerNorm after it in the own GEMM's epilogue, where tuned faster.
          if (q->ln_op != 0 && q->ln_fused.count(RowBucket(rows))) {
            static constexpr const char* kLayerNormMarks[2][3] = {
                {"gemm_int8_square_ln", "gemm_int8_wide_ln", "gemm_int8_narrow_ln"},
                {"gemm_fp8_square_ln", "gemm_fp8_wide_ln", "gemm_fp8_narrow_ln"}};
            const LoweredOp& ln = prog.ops[q->ln_op];
            QGemmArgs::LayerNorm lna;
            lna.gamma = static_cast<const float*>(engine_->Weight(ln.inputs[1]));
            lna.beta = static_cast<const float*>(engine_->Weight(ln.inputs[2]));
            lna.epsilon = ln.epsilon;
            if (const QuantLinearOp* next = engine_->quant().CopyFor(q->ln_op)) {
              SURGE_ASSIGN_OR_RETURN(lna.q, quant_runner_.CopyTarget(*next, rows));
            }
            Mark(kLayerNormMarks[type_mark][shape_mark], capturing);
            bool ran = false;
            SURGE_RETURN_IF_ERROR(quant_runner_.GemmLayerNorm(
                *q, rows, engine_->Weight(in(2)), in(3) >= 0 ? Act(in(3)) : nullptr,
                Act(ln.outputs[0]), lna, gemm_ws_.get(), kGemmWorkspaceBytes, stream_, &ran));
            if (ran) {
              fused_layer_norm = q->ln_op;
              break;
            }
          }
          Mark(kQuantMarks[type_mark][shape_mark], capturing);
          SURGE_RETURN_IF_ERROR(quant_runner_.Gemm(*q, lt_, rows, engine_->Weight(in(2)),
                                                   in(3) >= 0 ? Act(in(3)) : nullptr, Act(out),
                                                   gemm_ws_.get(), kGemmWorkspaceBytes, stream_));
          break;
        }
        bool extra = false;
        const GemmDesc d = LinearGemm(prog, op, rows, &extra);
        SURGE_ASSIGN_OR_RETURN(const LinearPlan* lp, Plan(i, in(1), d));
        Mark(d.n == op.k ? "gemm_square" : (d.n > op.k ? "gemm_wide" : "gemm_narrow"), capturing);
        const void* bias = engine_->Weight(in(2));
        const void* res = in(3) >= 0 ? Act(in(3)) : nullptr;
        SURGE_RETURN_IF_ERROR(lp->plan->Run(lt_, Act(in(0)), lp->weight, bias,
                                            d.residual ? res : nullptr, Act(out), gemm_ws_.get(),
                                            kGemmWorkspaceBytes, stream_));
        if (extra) {
          Mark("bias_act", capturing);
          BiasActArgs a;
          a.dtype = dt;
          a.rows = rows;
          a.cols = op.cols;
          a.activation = op.activation;
          a.x = Act(out);
          a.residual = res;
          a.y = Act(out);
          SURGE_CUDA_RETURN_IF_ERROR(BiasActRun(a, nullptr, stream_));
        }
        break;
      }
      case OpKind::kLayerNorm:
      case OpKind::kSkipLayerNorm: {
        if (i == fused_layer_norm) break;  // written by the GEMM before it
        const bool skip = op.kind == OpKind::kSkipLayerNorm;
        Mark("layer_norm", capturing);
        LayerNormArgs a;
        a.dtype = dt;
        a.rows = rows;
        a.cols = op.cols;
        a.x = Act(in(0));
        a.skip = skip ? Act(in(1)) : nullptr;
        a.bias = skip ? engine_->Weight(in(4)) : nullptr;
        a.gamma = static_cast<const float*>(engine_->Weight(in(skip ? 2 : 1)));
        a.beta = static_cast<const float*>(engine_->Weight(in(skip ? 3 : 2)));
        a.epsilon = op.epsilon;
        a.y = Act(out);
        a.sum_out = op.outputs.size() > 1 && op.outputs[1] >= 0 ? Act(op.outputs[1]) : nullptr;
        if (const QuantLinearOp* next = engine_->quant().CopyFor(i)) {
          SURGE_ASSIGN_OR_RETURN(a.q, quant_runner_.CopyTarget(*next, rows));
        }
        if (!LayerNormCanImplement(a))
          return UnimplementedError("layer_norm: {} columns unsupported", op.cols);
        SURGE_CUDA_RETURN_IF_ERROR(LayerNormRun(a, nullptr, stream_));
        break;
      }
      case OpKind::kGelu: {
        Mark("bias_act", capturing);
        BiasActArgs a;
        a.dtype = dt;
        a.rows = rows;
        a.cols = op.cols;
        a.activation = op.activation;
        a.x = Act(in(0));
        a.y = Act(out);
        SURGE_CUDA_RETURN_IF_ERROR(BiasActRun(a, nullptr, stream_));
        break;
      }
      case OpKind::kAttention: {
        Mark("attention", capturing);
        AttentionArgs a;
        a.dtype = dt;
        a.batch = static_cast<int>(sh.batch);
        a.seq = static_cast<int>(sh.seq);
        a.num_heads = op.num_heads;
        a.head_dim = op.head_dim;
        a.scale = op.scale;
        a.cu_seqlens = sh.packed ? dev_idx(idx.cu_seqlens) : nullptr;
        a.key_mask = !sh.packed && prog.mask >= 0 ? dev_idx(idx.key_mask) : nullptr;
        a.qkv = Act(in(0));
        a.out = Act(out);
        a.first_query_only = op.first_token_only;
        bool keeps_fp16 = true;
        if (const QuantLinearOp* next = engine_->quant().CopyFor(i, &keeps_fp16)) {
          SURGE_ASSIGN_OR_RETURN(a.q, quant_runner_.CopyTarget(*next, rows));
          if (!keeps_fp16) a.out = nullptr;
        }
        if (!AttentionCanImplement(a)) return UnimplementedError("attention: shape unsupported");
        SURGE_CUDA_RETURN_IF_ERROR(AttentionRun(a, nullptr, stream_));
        break;
      }
      case OpKind::kGatherFirst: {
        Mark("gather", capturing);
        RowMoveArgs a;
        a.rows = sh.batch;
        a.row_bytes = op.cols * 2;
        a.index = dev_idx(idx.cls_index);
        a.src = Act(in(0));
        a.dst = Act(out);
        SURGE_CUDA_RETURN_IF_ERROR(GatherRowsRun(a, nullptr, stream_));
        break;
      }
      case OpKind::kL2Normalize: {
        Mark("l2_normalize", capturing);
        L2NormalizeArgs a;
        a.dtype = dt;
        a.rows = rows;
        a.cols = op.cols;
        a.x = Act(in(0));
        a.y = Act(out);
        a.epsilon = op.epsilon;
        a.eps_max = op.eps_max;
        if (!L2NormalizeCanImplement(a)) return UnimplementedError("l2_normalize: bad arguments");
        SURGE_CUDA_RETURN_IF_ERROR(L2NormalizeRun(a, nullptr, stream_));
        break;
      }
      case OpKind::kSqueeze: {
        Mark("copy", capturing);
        SURGE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(Act(out), Act(in(0)), rows * op.cols * 2,
                                                   cudaMemcpyDeviceToDevice, stream_));
        break;
      }
    }
  }
  // Graph outputs: scatter packed tokens back to [B,S] when asked, then float32 staging.
  Mark("outputs", capturing);
  const ir::Graph& g = engine_->graph();
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const int v = g.outputs[o];
    const ActivationInfo& info = prog.activations.at(v);
    char* staging = static_cast<char*>(outputs_dev_.get()) + engine_->output_offsets()[o];
    const int64_t cap = RowsCap(info, mx);
    char* scatter = staging + AlignUp(cap * info.cols * 4);
    const void* src = Act(v);
    int64_t rows = sh.batch;
    if (info.domain == RowDomain::kTokens) {
      rows = sh.batch * sh.seq;
      if (sh.packed) {
        RowMoveArgs a;
        a.rows = sh.token_rows;
        a.dst_rows = rows + 1;
        a.row_bytes = info.cols * 2;
        a.index = dev_idx(idx.scatter_index);
        a.src = src;
        a.dst = scatter;
        SURGE_CUDA_RETURN_IF_ERROR(ScatterRowsRun(a, nullptr, stream_));
        src = scatter;
      }
    }
    SURGE_CUDA_RETURN_IF_ERROR(
        ConvertToFloat32(dt, src, reinterpret_cast<float*>(staging), rows * info.cols, stream_));
    if (pinned_offset_[o] != std::string::npos) {
      SURGE_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(static_cast<char*>(outputs_host_.get()) + pinned_offset_[o], staging,
                          rows * info.cols * 4, cudaMemcpyDeviceToHost, stream_));
    }
  }
  Mark("end", capturing);
  return Status::Ok();
}

Status CudaContext::Execute(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  const HostClock::time_point start = op_times_ ? HostClock::now() : HostClock::time_point{};
  const Program& prog = engine_->program();
  const ir::Graph& g = engine_->graph();
  if (inputs.size() != g.inputs.size()) {
    return InvalidArgumentError("cuda: expected {} inputs, got {}", g.inputs.size(), inputs.size());
  }
  auto input = [&](int v) -> const Tensor* {
    return v < 0 ? nullptr : &inputs[prog.input_position.at(v)];
  };
  const Tensor& ids_t = *input(prog.input_ids);
  if (ids_t.rank() != 2) {
    return InvalidArgumentError("input '{}' must be [batch, seq], got {}", prog.ids_name,
                                ShapeToString(ids_t.shape()));
  }
  const int64_t B = ids_t.dim(0), S = ids_t.dim(1), BS = B * S;
  const Extent& mx = engine_->max();
  if (B > mx.batch || S > mx.seq || B < 1 || S < 1) {
    return OutOfRangeError("input '{}' has shape {}; this engine's profile allows [1..{}, 1..{}]",
                           prog.ids_name, ShapeToString(ids_t.shape()), mx.batch, mx.seq);
  }
  for (int role : {prog.token_type_ids, prog.position_ids, prog.mask}) {
    if (role >= 0 && input(role)->shape() != ids_t.shape()) {
      return InvalidArgumentError("input '{}' has shape {}, expected {} like '{}'",
                                  g.values[role].name, ShapeToString(input(role)->shape()),
                                  ShapeToString(ids_t.shape()), prog.ids_name);
    }
  }
  // Laid out for this request's shape (fixed per captured graph), so only its bytes travel. The
  // inputs are read straight into the pinned block (no previous call is in flight: each ends
  // with a synchronise), the ranges checked there.
  const IndexLayout idx(BS + 1, B);
  char* host = static_cast<char*>(index_host_.get());
  auto hidx = [&](size_t off) { return reinterpret_cast<int32_t*>(host + off); };
  auto all = [&](const int32_t* p) { return std::span<const int32_t>(p, static_cast<size_t>(BS)); };
  const int32_t* ids = hidx(idx.ids);
  SURGE_RETURN_IF_ERROR(ReadInts(ids_t, prog.ids_name, hidx(idx.ids)));
  SURGE_RETURN_IF_ERROR(
      CheckRange(all(ids), prog.vocab, fmt::format("input '{}': id", prog.ids_name)));
  if (prog.token_type_ids >= 0) {
    SURGE_RETURN_IF_ERROR(ReadInts(*input(prog.token_type_ids), "token_type_ids", hidx(idx.types)));
    SURGE_RETURN_IF_ERROR(CheckRange(all(hidx(idx.types)), prog.type_vocab, "token type"));
  }
  // The padded form's key mask; the packed form reads it here to build its index arrays.
  const int32_t* mask = prog.mask >= 0 ? hidx(idx.key_mask) : nullptr;
  if (mask) {
    SURGE_RETURN_IF_ERROR(ReadInts(*input(prog.mask), "attention_mask", hidx(idx.key_mask)));
  }
  int32_t* positions = hidx(idx.positions);
  if (prog.position_ids >= 0) {
    SURGE_RETURN_IF_ERROR(ReadInts(*input(prog.position_ids), "position_ids", positions));
  } else {
    const bool arange = prog.position_mode == "arange";  // once, not per token
    for (int64_t b = 0; b < B; ++b) {
      int32_t* row = positions + b * S;
      if (arange) {
        for (int64_t s = 0; s < S; ++s) row[s] = static_cast<int32_t>(s);
        continue;
      }
      int32_t running = 0;
      for (int64_t s = 0; s < S; ++s) {
        const bool real = ids[b * S + s] != prog.padding_idx;
        running += real;
        row[s] = static_cast<int32_t>(real ? running + prog.padding_idx : prog.padding_idx);
      }
    }
  }
  SURGE_RETURN_IF_ERROR(CheckRange(all(positions), prog.max_positions, "position id"));

  // Pack when allowed and when it reproduces the padded semantics: every sequence has a real
  // first token (the [CLS] gathered for pooled outputs) and so at least one real token.
  RunShape sh{B, S, BS, false};
  if (prog.padding_free && mask) {
    bool ok = true;
    for (int64_t b = 0; b < B && ok; ++b) ok = mask[b * S] != 0;
    sh.packed = ok;
  }
  int32_t* cu = hidx(idx.cu_seqlens);
  int32_t* cls = hidx(idx.cls_index);
  if (sh.packed) {
    int32_t* row_index = hidx(idx.row_index);
    int32_t* scatter = hidx(idx.scatter_index);
    const int64_t t = PackRealTokens(mask, B, S, cu, cls, row_index);
    std::memcpy(scatter, row_index, static_cast<size_t>(t) * sizeof(int32_t));
    sh.token_rows = std::min<int64_t>((t + kTokenBucket - 1) / kTokenBucket * kTokenBucket, BS);
    for (int64_t r = t; r < sh.token_rows; ++r) {
      row_index[r] = row_index[0];            // any real token: computed, never read back
      scatter[r] = static_cast<int32_t>(BS);  // the scratch row past [B,S]
    }
  } else {
    for (int64_t b = 0; b < B; ++b) cls[b] = static_cast<int32_t>(b * S);
  }

  const HostClock::time_point launch = op_times_ ? HostClock::now() : HostClock::time_point{};
  auto it = graphs_.find(sh);
  if (it != graphs_.end()) {
    if (op_times_) Mark("graph_replay", false);
    SURGE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(it->second, stream_));
    if (op_times_) Mark("end", false);
  } else {
    SURGE_RETURN_IF_ERROR(RunOps(sh, false));
    if (use_graphs_ && !uncapturable_.count(sh)) {
      // Capture after an eager run, so kernel attributes and GEMM plans already exist.
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      Status st = CudaStatus(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                             "cudaStreamBeginCapture");
      if (st.ok()) {
        Status run = RunOps(sh, true);
        Status end = CudaStatus(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
        st = !run.ok() ? run : end;
      }
      if (st.ok() && op_times_) {
        size_t nodes = 0;
        cudaGraphGetNodes(graph, nullptr, &nodes);
        SURGE_LOG_INFO("cuda: captured {}x{} ({} token rows) as a CUDA graph of {} nodes", B, S,
                       sh.token_rows, nodes);
      }
      if (st.ok()) st = CudaStatus(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
      if (graph) cudaGraphDestroy(graph);
      if (st.ok()) {
        graphs_[sh] = exec;
      } else {
        cudaGetLastError();
        uncapturable_.insert(sh);
        SURGE_LOG_WARN("cuda: running {}x{} without a CUDA graph: {}", B, S, st.ToString());
      }
    }
  }
  const HostClock::time_point launched = op_times_ ? HostClock::now() : HostClock::time_point{};
  // Copy outputs back (float32 staging → host), converting to the declared dtype.
  outputs->clear();
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const int v = g.outputs[o];
    const ActivationInfo& info = prog.activations.at(v);
    Shape shape = info.domain == RowDomain::kTokens ? Shape{B, S, info.cols} : Shape{B, info.cols};
    if (info.squeezed) shape.pop_back();
    Tensor f(DType::kFloat32, shape);
    if (pinned_offset_[o] == std::string::npos) {
      const char* staging =
          static_cast<const char*>(outputs_dev_.get()) + engine_->output_offsets()[o];
      SURGE_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(f.data(), staging, f.nbytes(), cudaMemcpyDeviceToHost, stream_));
    }
    outputs->push_back(std::move(f));
  }
  SURGE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    if (pinned_offset_[o] != std::string::npos) {
      std::memcpy((*outputs)[o].data(),
                  static_cast<const char*>(outputs_host_.get()) + pinned_offset_[o],
                  (*outputs)[o].nbytes());
    }
  }
  if (op_times_) LogOpTimes(start, launch, launched, HostClock::now());
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const DType want = g.values[g.outputs[o]].dtype;
    if (want != DType::kFloat32) (*outputs)[o] = (*outputs)[o].CastFromFloat32(want);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Backend

class CudaBackend : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }
  std::string DeviceArch() const override { return "sm_90a"; }
  Status DeviceAvailable() const override { return CudaDeviceAvailable(); }
  // FP32 is the CPU backend's; on the GPU FP16 is the full-precision build.
  Precision DefaultPrecision() const override { return Precision::kFp16; }

  Result<std::string> Lower(const ir::Graph& graph, const BuilderConfig& config) override {
    // The last layer on first token rows where only they reach the outputs;
    // SURGE_CUDA_FIRST_TOKEN_ONLY=0 keeps every op on every token (for comparison).
    const char* first_env = std::getenv("SURGE_CUDA_FIRST_TOKEN_ONLY");
    const bool first_token = !(first_env && std::string_view(first_env) == "0");
    SURGE_ASSIGN_OR_RETURN(Program p, AnalyzeGraph(graph, QuantBaseConfig(config), first_token));
    // INT8/FP8 layers: checked (calibrated, shapes cuBLASLt takes), their weights quantised here
    // and stored so; the FP16 conversion only of weights something else reads.
    SURGE_ASSIGN_OR_RETURN(QuantLinears quant, QuantLinears::Analyze(graph, p, config, false));
    const char* exact = std::getenv("SURGE_CUDA_EXACT_GELU");
    p.exact_gelu = exact && std::string_view(exact) == "1";
    Blob blob;
    blob.dtype = p.dtype;
    blob.padding_free = config.padding_free;
    blob.exact_gelu = p.exact_gelu;
    blob.first_token_only = p.first_token_only;
    SURGE_ASSIGN_OR_RETURN(Extent opt, ProfileShape(p, config, false));
    SURGE_ASSIGN_OR_RETURN(Extent max, ProfileShape(p, config, true));
    Status gpu = CudaDeviceAvailable();
    if (gpu.ok()) {
      SURGE_RETURN_IF_ERROR(Tune(config, opt, max, &p, &blob));
    } else {
      SURGE_LOG_WARN(
          "cuda: no GPU to tune GEMMs on ({}); the plan uses cuBLASLt's heuristic "
          "choice at run time",
          gpu.message());
    }
    blob.quant_weights = QuantisedWeightsOf(graph, p, quant);
    const std::set<int> read = WeightsOutsideQuantisedGemms(p, quant);
    for (const auto& [v, f32] : p.weights) {
      if (!read.count(v)) continue;
      const Tensor& c = graph.values[v].constant;
      SURGE_ASSIGN_OR_RETURN(
          blob.weights[v],
          ConvertWeight(blob.weights_nk.count(v) ? TransposeWeight(c) : c, f32, p.dtype));
    }
    return SerializeBlob(blob);
  }

  // Chooses each Linear weight's layout ([K,N] or [N,K]) by timing both at the opt shape, then
  // tunes every GEMM at the row-count buckets of the opt shape, one sequence, and the max shape.
  Status Tune(const BuilderConfig& config, const Extent& opt, const Extent& max, Program* p,
              Blob* blob) {
    cublasLtHandle_t lt = nullptr;
    cudaStream_t stream = nullptr;
    SURGE_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&lt));
    Status st =
        CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    // A full search's tunings are kept apart from the heuristic's in the cache.
    const TacticSearch search =
        config.full_tactic_search ? TacticSearch::kFull : TacticSearch::kHeuristic;
    TimingCache cache(config.timing_cache_path,
                      DeviceKey() + (config.full_tactic_search ? " search=full" : ""));
    auto tune = [&](const GemmDesc& d) -> Result<GemmAlgo> {
      GemmAlgo algo;
      if (cache.Lookup(d, &algo)) return algo;
      SURGE_ASSIGN_OR_RETURN(algo, TuneGemm(lt, d, kGemmWorkspaceBytes, stream, search));
      cache.Insert(d, algo);
      return algo;
    };
    std::map<int, bool> nk;  // weight value id -> stored [N,K]
    for (LoweredOp& op : p->ops) {
      if (!st.ok()) break;
      if (op.kind != OpKind::kLinear) continue;
      const int w = op.inputs[1];
      if (nk.count(w)) {
        op.weight_nk = nk[w];
        continue;
      }
      const bool batch = p->activations.at(op.outputs[0]).domain == RowDomain::kBatch;
      const int64_t rows = batch ? opt.batch : opt.batch * opt.seq;
      bool extra = false;
      op.weight_nk = false;
      const GemmDesc kn = LinearGemm(*p, op, rows, &extra);
      auto kn_algo = tune(kn);
      if (!kn_algo.ok()) {
        st = kn_algo.status();
        break;
      }
      op.weight_nk = true;
      const GemmDesc nk_desc = LinearGemm(*p, op, rows, &extra);
      auto nk_algo = tune(nk_desc);  // a layout cuBLASLt cannot run is simply not chosen
      op.weight_nk = nk_algo.ok() && nk_algo->time_us < kn_algo->time_us;
      nk[w] = op.weight_nk;
      blob->tactics[TacticKey(op.weight_nk ? nk_desc : kn)] = op.weight_nk ? *nk_algo : *kn_algo;
    }
    // The opt shape, one sequence and the max shape exactly, then the row counts of
    // GemmTuningRows, so that ragged batches (whose packed row counts fall anywhere) run an
    // algorithm measured at a row count close above theirs.
    std::vector<std::pair<int64_t, int64_t>> shapes = {
        {opt.batch * opt.seq, opt.batch}, {opt.seq, 1}, {max.batch * max.seq, max.batch}};
    for (int64_t rows : GemmTuningRows(max.batch * max.seq)) {
      shapes.push_back({rows, std::min(rows, max.batch)});
    }
    for (auto [tokens, batch] : shapes) {
      for (const GemmDesc& d : LinearGemms(*p, tokens, batch)) {
        if (!st.ok()) break;
        const std::string key = TacticKey(d);
        if (blob->tactics.count(key)) continue;
        auto algo = tune(d);
        if (!algo.ok()) {
          st = algo.status();
          break;
        }
        blob->tactics[key] = *algo;
      }
    }
    for (const auto& [w, transposed] : nk) {
      if (transposed) blob->weights_nk.insert(w);
    }
    // The other layout of every Linear weight, tuned at the same row counts. One layout is not
    // the faster at every row count (BERT-base's QKV and FFN1 on an H100: [N,K] 2 % faster at
    // 128 rows, [K,N] 4-12 % at 16384), so where the other is faster by kBothLayoutsGain at one
    // of them the engine holds both (the second transposed at load) and each call runs the
    // faster; the other weights keep one layout and their other tunings are dropped.
    // SURGE_CUDA_BOTH_LAYOUTS=0 keeps one layout for every weight, =all both for every weight.
    const char* both_env = std::getenv("SURGE_CUDA_BOTH_LAYOUTS");
    const std::string both_mode = both_env ? both_env : "";
    if (st.ok() && both_mode != "0") {
      std::map<std::string, GemmAlgo> with_other = blob->tactics;
      for (auto [tokens, batch] : shapes) {
        for (const GemmDesc& d : LinearGemms(*p, tokens, batch)) {
          const GemmDesc other = OtherLayout(d);
          const std::string key = TacticKey(other);
          if (with_other.count(key)) continue;
          auto algo = tune(other);  // a layout cuBLASLt cannot run leaves the weight in one
          if (algo.ok()) with_other[key] = *algo;
        }
      }
      const std::set<int> both = WeightsWorthBothLayouts(
          *p, with_other, shapes, both_mode == "all" ? -1e30 : kBothLayoutsGain);
      for (const LoweredOp& op : p->ops) {
        if (op.kind != OpKind::kLinear || !both.count(op.inputs[1])) continue;
        for (auto [tokens, batch] : shapes) {
          const std::string key = TacticKey(OtherLayout(LinearGemmAt(*p, op, tokens, batch)));
          blob->tactics[key] = with_other.at(key);
        }
      }
      blob->weights_both = both;
    }
    if (stream) cudaStreamDestroy(stream);
    cublasLtDestroy(lt);
    SURGE_RETURN_IF_ERROR(st);
    return cache.Save();
  }

  // The tactics carry every lowered weight in the form the kernels read (converted to the device
  // type, or INT8/FP8 layers' weights quantised), so the plan leaves out the graph's float32
  // copies (a BERT-base plan: 205 MB instead of 614 in FP16, 122 MB instead of 614 in FP8).
  Result<std::vector<int>> ConstantsKeptByTactics(const ir::Graph&, const BuilderConfig&,
                                                  std::span<const uint8_t> tactics) override {
    return BlobWeightIds(tactics);
  }

  Result<std::unique_ptr<BackendEngine>> Load(std::shared_ptr<const ir::Graph> graph,
                                              std::span<const uint8_t> tactics,
                                              const BuilderConfig& built_with,
                                              const EngineOptions& options) override {
    SURGE_RETURN_IF_ERROR(CudaDeviceAvailable());
    auto engine = std::make_shared<CudaEngine>();
    SURGE_RETURN_IF_ERROR(engine->Init(std::move(graph), tactics, built_with, options));
    // BackendEngine is handed out as a unique_ptr while contexts keep the engine alive through
    // shared_from_this: a thin owner forwards to the shared engine.
    class Owner : public BackendEngine {
     public:
      explicit Owner(std::shared_ptr<CudaEngine> e) : e_(std::move(e)) {}
      Result<std::unique_ptr<BackendContext>> CreateContext() override {
        return e_->CreateContext();
      }
      std::string Describe() const override { return e_->Describe(); }

     private:
      std::shared_ptr<CudaEngine> e_;
    };
    return std::unique_ptr<BackendEngine>(new Owner(std::move(engine)));
  }
};

}  // namespace

Status CudaDeviceAvailable() {
  static const Status status = [] {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      cudaGetLastError();
      return Status(StatusCode::kUnavailable,
                    fmt::format("cuda backend: no CUDA device ({}); it needs an NVIDIA GPU of "
                                "compute capability 9.0 (sm_90a, e.g. H100/H200)",
                                err != cudaSuccess ? cudaGetErrorString(err) : "none found"));
    }
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, 0);
    if (err != cudaSuccess) {
      return Status(StatusCode::kUnavailable, fmt::format("cuda backend: cannot query device 0: {}",
                                                          cudaGetErrorString(err)));
    }
    if (prop.major != 9 || prop.minor != 0) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("cuda backend: device 0 ({}) is sm_{}{}; this build has kernels "
                                "for sm_90a only",
                                prop.name, prop.major, prop.minor));
    }
    return Status::Ok();
  }();
  return status;
}

std::unique_ptr<Backend> CreateCudaBackend() { return std::make_unique<CudaBackend>(); }

}  // namespace surge::engine::cuda
