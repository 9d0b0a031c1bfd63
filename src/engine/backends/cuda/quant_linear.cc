#include "engine/backends/cuda/quant_linear.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <string_view>

#include "core/logging.h"
#include "engine/backends/cuda/bias_act_kernels.h"
#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/gemm.h"
#include "engine/backends/cuda/host_convert.h"
#include "engine/backends/cuda/layer_norm_kernels.h"
#include "engine/backends/cuda/quant_kernels.h"

namespace surge::engine::cuda {
namespace {

constexpr float kInt8Max = 127.f;
constexpr float kFp8Max = 448.f;
constexpr size_t kAlign = 256;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool Quantised(Precision p) { return p == Precision::kInt8 || p == Precision::kFp8; }

int64_t RoundUp16(int64_t rows) { return (rows + 15) / 16 * 16; }

bool FusionDisabled() {
  const char* v = std::getenv("SURGE_CUDA_QUANT_FUSION");
  return v != nullptr && std::string_view(v) == "0";
}

// SURGE_CUDA_LAYER_NORM_FUSION: 0 never runs a LayerNorm in the GEMM's epilogue; always runs it
// wherever the own GEMM can, timed faster or not; unset (or anything else) where timed faster.
enum class LayerNormFusion { kTuned, kOff, kAlways };
LayerNormFusion LayerNormFusionSetting() {
  const char* v = std::getenv("SURGE_CUDA_LAYER_NORM_FUSION");
  const std::string_view s = v != nullptr ? v : "";
  return s == "0" ? LayerNormFusion::kOff
                  : (s == "always" ? LayerNormFusion::kAlways : LayerNormFusion::kTuned);
}

}  // namespace

bool Fp8FastAccumulation() {
  const char* v = std::getenv("SURGE_CUDA_FP8_FAST_ACCUM");
  return v == nullptr || std::string_view(v) != "0";
}

std::vector<float> QuantScaleFloats(const QuantLinearOp& op) {
  if (op.type == QuantType::kInt8) {
    std::vector<float> s;
    s.reserve(op.w_scales.size());
    for (float w : op.w_scales) s.push_back(op.x_scale * w);
    return s;
  }
  std::vector<float> s(kFp8ColumnScalesAt + op.n, 0.f);
  s[0] = op.w_scales.empty() ? 1.f : op.w_scales[0];
  s[kFp8XScaleAt] = op.x_scale;
  if (op.fp8_out) s[kFp8DScaleAt] = op.out_inv_scale;
  std::fill(s.begin() + kFp8ColumnScalesAt, s.end(), s[0] * op.x_scale);
  return s;
}

int64_t QuantGemmRows(const QuantLinearOp& op, int64_t rows) {
  return op.pad_rows ? RoundUp16(rows) : rows;
}

QuantGemmDesc QuantLinearGemmDesc(const QuantLinearOp& op, int64_t rows) {
  QuantGemmDesc d{op.type, QuantGemmRows(op, rows), op.n,       op.k,
                  op.bias, op.activation,           op.residual};
  d.fp8_out = op.fp8_out;
  if (op.type == QuantType::kFp8E4M3) {
    d.scale_in_alpha = op.scale_in_alpha;
    d.alpha = (op.w_scales.empty() ? 1.f : op.w_scales[0]) * op.x_scale;
    d.fast_accum = Fp8FastAccumulation();
  }
  return d;
}

Status QuantProbeBuffers::Allocate(int64_t rows, int64_t n, int64_t k, size_t ws) {
  rows_ = RoundUp16(std::max<int64_t>(rows, 1));
  n_ = n;
  k_ = k;
  ws_bytes_ = ws;
  const size_t sizes[] = {static_cast<size_t>(n * k),
                          static_cast<size_t>(rows_ * k),
                          static_cast<size_t>(rows_ * n) * 4,
                          static_cast<size_t>(rows_ * n) * 2,
                          static_cast<size_t>(n) * 2,
                          static_cast<size_t>(kFp8ColumnScalesAt + n) * 4,
                          ws,
                          static_cast<size_t>(2 * n) * 4};
  size_t total = 0;
  for (size_t b : sizes) total += AlignUp(std::max<size_t>(b, 1));
  void* p = nullptr;
  SURGE_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, total));
  mem_.reset(p);
  SURGE_CUDA_RETURN_IF_ERROR(cudaMemset(p, 0, total));
  char* at = static_cast<char*>(p);
  char** slots[] = {&w_, &x_, &out_, &res_, &bias_, &scales_, &ws_, &ln_};
  for (size_t i = 0; i < 8; ++i) {
    *slots[i] = at;
    at += AlignUp(std::max<size_t>(sizes[i], 1));
  }
  // Operands of moderate magnitude rather than zeros, which can run faster than real data: bytes
  // that are e4m3 values of magnitude 2^-3 .. 2^2 (as int8: +-32 .. +-79).
  std::vector<uint8_t> pattern(1 << 20);
  std::mt19937 rng(11);
  for (uint8_t& b : pattern) {
    const uint32_t r = rng();
    b = static_cast<uint8_t>(((r & 1) << 7) | ((4 + (r >> 1) % 6) << 3) | ((r >> 8) & 7));
  }
  for (char* base : {w_, x_}) {
    const size_t bytes = base == w_ ? sizes[0] : sizes[1];
    for (size_t off = 0; off < bytes; off += pattern.size()) {
      SURGE_CUDA_RETURN_IF_ERROR(cudaMemcpy(base + off, pattern.data(),
                                            std::min(pattern.size(), bytes - off),
                                            cudaMemcpyHostToDevice));
    }
  }
  return Status::Ok();
}

QuantGemmOperands QuantProbeBuffers::Operands(const QuantLinearOp& op, int64_t gemm_rows) const {
  SURGE_CHECK(gemm_rows <= rows_ && op.n <= n_ && op.k <= k_,
              "probe buffers of {}x{}x{} cannot hold layer '{}' at {} rows", rows_, n_, k_, op.node,
              gemm_rows);
  QuantGemmOperands o;
  o.w = w_;
  o.xq = x_;
  o.scales = reinterpret_cast<const float*>(scales_);
  o.w_scale = reinterpret_cast<const float*>(scales_);
  o.x_scale = reinterpret_cast<const float*>(scales_) + kFp8XScaleAt;
  o.d_scale = reinterpret_cast<const float*>(scales_) + kFp8DScaleAt;
  o.unused_c = res_;
  o.bias = op.bias ? bias_ : nullptr;
  o.residual = op.residual ? res_ : nullptr;
  o.out = out_;
  o.workspace = ws_;
  o.workspace_bytes = ws_bytes_;
  o.stream = nullptr;
  return o;
}

QGemmArgs::LayerNorm QuantProbeBuffers::LayerNormOperands(const QuantLinearOp& op, int64_t rows,
                                                          const QuantGemmOperands& o) const {
  QGemmArgs::LayerNorm ln;
  ln.gamma = reinterpret_cast<const float*>(ln_);
  ln.beta = reinterpret_cast<const float*>(ln_) + n_;
  ln.q = QuantizedCopy{op.type, static_cast<char*>(o.out) + rows * op.n * 2, 1.f};
  return ln;
}

Status ChooseQuantGemm(cublasLtHandle_t handle, const QuantProbeBuffers& probe,
                       std::span<const int64_t> rows, QuantGemmMode first, QuantLinearOp* op) {
  const bool fp8 = op->type == QuantType::kFp8E4M3;
  std::string notes;
  for (bool pad : {false, true}) {
    for (int m = static_cast<int>(first); m <= static_cast<int>(QuantGemmMode::kFloat32); ++m) {
      const auto mode = static_cast<QuantGemmMode>(m);
      if (pad && !QuantGemmModeAccumulates(mode)) continue;
      for (bool alpha : {false, true}) {
        if (alpha && !fp8) continue;
        op->pad_rows = pad;
        op->scale_in_alpha = alpha;
        if (!QuantGemmModeApplies(QuantLinearGemmDesc(*op, rows[0]), mode)) continue;
        bool all = true;
        for (int64_t r : rows) {
          const QuantGemmDesc d = QuantLinearGemmDesc(*op, r);
          const QuantGemmOperands o = probe.Operands(*op, d.m);
          auto g = QuantGemm::Create(handle, d, probe.workspace_bytes(), mode, &o, true);
          if (g.ok()) continue;
          if (g.status().code() != StatusCode::kUnimplemented) return g.status();
          notes += fmt::format("\n  {}{}{} at {} rows: {}", QuantGemmModeName(mode),
                               fp8 ? (alpha ? ", scales as alpha" : ", scale pointers") : "",
                               pad ? ", rows padded to 16" : "", r, g.status().message());
          all = false;
          break;
        }
        if (all) {
          op->mode = mode;
          return Status::Ok();
        }
      }
    }
  }
  op->pad_rows = false;
  op->scale_in_alpha = false;
  return UnimplementedError("cuBLASLt runs no form of the {} GEMM of layer '{}' (k={} n={}):{}",
                            fp8 ? "fp8" : "int8", op->node, op->k, op->n, notes);
}

void QuantizeLinearWeight(const Tensor& w, QuantType type, std::vector<uint8_t>* q,
                          std::vector<float>* scales) {
  const int64_t k = w.dim(0), n = w.dim(1);
  const float* src = w.data_as<float>();
  // Quantised in W's own [K,N] order (contiguous rows, vectorised), then transposed as bytes.
  std::vector<uint8_t> kn(static_cast<size_t>(k * n));
  if (type == QuantType::kInt8) {
    scales->assign(n, 0.f);
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < n; ++j)
        (*scales)[j] = std::max((*scales)[j], std::abs(src[i * n + j]));
    }
    for (float& s : *scales) s = s > 0 ? s / kInt8Max : 1.f;
    const float* s = scales->data();
    for (int64_t i = 0; i < k; ++i) {
      const float* row = src + i * n;
      int8_t* out = reinterpret_cast<int8_t*>(kn.data()) + i * n;
      // rint rounds to nearest even as nearbyint does (the default mode), and vectorises.
      for (int64_t j = 0; j < n; ++j)
        out[j] = static_cast<int8_t>(std::clamp(std::rint(row[j] / s[j]), -kInt8Max, kInt8Max));
    }
  } else {
    float amax = 0;
    for (int64_t i = 0; i < k * n; ++i) amax = std::max(amax, std::abs(src[i]));
    const float scale = amax > 0 ? amax / kFp8Max : 1.f;
    *scales = {scale};
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < n; ++j) row[j] = src[i * n + j] / scale;
      FloatsToE4m3(row.data(), kn.data() + i * n, n);
    }
  }
  q->resize(kn.size());
  Transpose(kn.data(), k, n, q->data());
}

void DeviceFreeDeleter::operator()(void* p) const { cudaFree(p); }

BuilderConfig QuantBaseConfig(const BuilderConfig& config) {
  BuilderConfig c = config;
  if (Quantised(c.precision)) c.precision = Precision::kFp16;
  return c;
}

Result<QuantLinears> QuantLinears::Analyze(const ir::Graph& g, const Program& p,
                                           const BuilderConfig& config, bool quantise_weights,
                                           const QuantWeights* stored) {
  QuantLinears out;
  if (!Quantised(config.precision)) return out;
  if (config.quant.empty()) {
    return FailedPreconditionError(
        "cuda backend: precision {} needs calibration (activation thresholds for the quantised "
        "layers): run `surge calibrate` and build with --calibration CACHE",
        PrecisionName(config.precision));
  }
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const LoweredOp& lop = p.ops[i];
    if (lop.kind != OpKind::kLinear) continue;
    const ir::Node& n = g.nodes[lop.node];
    const Precision prec = config.quant.LayerOr(n.name, Precision::kFp16);
    if (prec == Precision::kFp16) continue;
    if (!Quantised(prec)) {
      return InvalidArgumentError(
          "cuda backend: layer '{}' is marked {}; in an {} build a layer runs int8, fp8 or fp16",
          n.name, PrecisionName(prec), PrecisionName(config.precision));
    }
    QuantLinearOp op;
    op.op = i;
    op.node = n.name;
    op.type = prec == Precision::kInt8 ? QuantType::kInt8 : QuantType::kFp8E4M3;
    op.k = lop.k;
    op.n = lop.cols;
    op.activation = lop.activation;
    op.bias = lop.inputs.size() > 2 && lop.inputs[2] >= 0;
    op.residual = lop.inputs.size() > 3 && lop.inputs[3] >= 0;
    op.batch_rows = p.activations.at(lop.outputs[0]).domain == RowDomain::kBatch;
    if (!QuantGemmShapeSupported(op.n, op.k)) {
      return InvalidArgumentError(
          "cuda backend: layer '{}' is marked {} but its shape K={} N={} is not a multiple of 16, "
          "which cuBLASLt's INT8/FP8 GEMMs need; keep it fp16",
          n.name, PrecisionName(prec), op.k, op.n);
    }
    const std::string& x = g.values[lop.inputs[0]].name;
    const float amax = config.quant.AmaxOf(x);
    if (!(amax > 0) || !std::isfinite(amax)) {
      return FailedPreconditionError(
          "cuda backend: layer '{}' is {} but its input '{}' has no calibrated threshold "
          "(recalibrate this model)",
          n.name, PrecisionName(prec), x);
    }
    op.x_scale = amax / (op.type == QuantType::kInt8 ? kInt8Max : kFp8Max);
    const int w = lop.inputs[1];
    if (w < 0 || !g.values[w].is_constant() || g.values[w].constant.dtype() != DType::kFloat32) {
      return InvalidArgumentError(
          "cuda backend: layer '{}' has no float32 constant weight to "
          "quantise",
          n.name);
    }
    const QuantWeight* q = nullptr;
    if (stored != nullptr) {
      auto it = stored->find({w, op.type});
      if (it != stored->end()) q = &it->second;
    }
    if (q != nullptr) {
      if (q->n != op.n || q->k != op.k ||
          q->scales.size() != (op.type == QuantType::kInt8 ? static_cast<size_t>(op.n) : 1) ||
          q->bytes.size() != static_cast<size_t>(op.n * op.k)) {
        return DataLossError(
            "cuda plan: the quantised weight of layer '{}' is {}x{} with {} scales; the layer "
            "needs {}x{}",
            n.name, q->n, q->k, q->scales.size(), op.n, op.k);
      }
      op.weight = q->bytes;
      op.w_scales = q->scales;
    } else if (quantise_weights) {
      if (g.values[w].constant.empty()) {
        return DataLossError(
            "cuda plan: layer '{}' is {} but the plan holds neither its quantised weight nor "
            "the float32 one; rebuild the plan",
            n.name, PrecisionName(prec));
      }
      QuantizeLinearWeight(g.values[w].constant, op.type, &op.weight, &op.w_scales);
    }
    out.ops_.emplace(i, std::move(op));
  }
  if (!FusionDisabled()) out.PlanFusion(g, p);
  return out;
}

QuantWeights QuantisedWeightsOf(const ir::Graph& g, const Program& p, const QuantLinears& q) {
  QuantWeights out;
  for (const auto& [i, op] : q.ops()) {
    const int w = p.ops[i].inputs[1];
    auto [it, fresh] = out.try_emplace({w, op.type});
    if (!fresh) continue;
    it->second.type = op.type;
    it->second.n = op.n;
    it->second.k = op.k;
    QuantizeLinearWeight(g.values[w].constant, op.type, &it->second.bytes, &it->second.scales);
  }
  return out;
}

std::set<int> WeightsOutsideQuantisedGemms(const Program& p, const QuantLinears& q) {
  std::set<int> read;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const LoweredOp& op = p.ops[i];
    const bool quantised = op.kind == OpKind::kLinear && q.Find(i) != nullptr;
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      const int v = op.inputs[j];
      if (v < 0 || !p.weights.count(v) || (quantised && j == 1)) continue;
      read.insert(v);
    }
  }
  return read;
}

Tensor DequantizeLinearWeight(const QuantWeight& q, bool transpose) {
  Tensor t(DType::kFloat32, transpose ? Shape{q.k, q.n} : Shape{q.n, q.k});
  float* out = t.data_as<float>();
  for (int64_t r = 0; r < q.n; ++r) {
    const float step = q.type == QuantType::kInt8 ? q.scales[r] : q.scales[0];
    for (int64_t c = 0; c < q.k; ++c) {
      const uint8_t b = q.bytes[r * q.k + c];
      const float v = (q.type == QuantType::kInt8 ? static_cast<float>(static_cast<int8_t>(b))
                                                  : E4m3ToFloatHost(b)) *
                      step;
      out[transpose ? c * q.n + r : r * q.k + c] = v;
    }
  }
  return t;
}

void QuantLinears::PlanFusion(const ir::Graph& g, const Program& p) {
  std::map<int, int> readers;
  for (const LoweredOp& o : p.ops) {
    for (int v : o.inputs) {
      if (v >= 0) ++readers[v];
    }
  }
  for (int v : g.outputs) ++readers[v];
  // A residual Linear read only by the LayerNorm right after it: the LayerNorm can run in the own
  // GEMM's epilogue (N / 128 CTAs a cluster: N a multiple of 128 up to 1024). The quantised Linear
  // reading the LayerNorm's copy then reads the other slot than this one (set before that
  // Linear's own planning, which gives its output slot from its input slot).
  auto plan_layer_norm = [&](size_t i, QuantLinearOp& op) {
    if (LayerNormFusionSetting() == LayerNormFusion::kOff || i + 1 >= p.ops.size() ||
        !op.residual || op.activation != Activation::kNone || op.n % 128 != 0 || op.n > 1024) {
      return;
    }
    const LoweredOp& ln = p.ops[i + 1];
    const int y = p.ops[i].outputs[0];
    if (ln.kind != OpKind::kLayerNorm || ln.inputs.empty() || ln.inputs[0] != y ||
        readers[y] != 1 || ln.cols != op.n || (ln.outputs.size() > 1 && ln.outputs[1] >= 0)) {
      return;
    }
    op.ln_op = i + 1;
    auto next = ops_.find(i + 2);
    if (next != ops_.end() && p.ops[i + 2].inputs[0] == ln.outputs[0]) {
      next->second.in_slot = 1 - op.in_slot;
    }
  };
  // Where the input of op i comes from.
  auto plan_input = [&](size_t i, QuantLinearOp& op) {
    if (i == 0) return;
    const LoweredOp& prev = p.ops[i - 1];
    const int x = p.ops[i].inputs[0];
    if (prev.outputs.empty() || prev.outputs[0] != x) return;
    const bool only_reader = readers[x] == 1;
    switch (prev.kind) {
      case OpKind::kLayerNorm:
      case OpKind::kSkipLayerNorm:
        // Its output is also the residual of a later layer: FP16 stays.
        copies_[i - 1] = {i, true};
        op.input_ready = true;
        break;
      case OpKind::kAttention:
        copies_[i - 1] = {i, !only_reader};
        op.input_ready = true;
        break;
      case OpKind::kLinear: {
        auto pit = ops_.find(i - 1);
        if (pit == ops_.end() || !only_reader) break;
        QuantLinearOp& producer = pit->second;
        if (producer.type != op.type || producer.residual || producer.batch_rows != op.batch_rows) {
          break;
        }
        // INT8: only the own GEMM writes int8, and only after a GELU (qgemm_kernels.h).
        if (op.type == QuantType::kInt8 && producer.activation != Activation::kGelu) break;
        (op.type == QuantType::kInt8 ? producer.int8_out : producer.fp8_out) = true;
        producer.out_inv_scale = 1.f / op.x_scale;
        producer.out_slot = 1 - producer.in_slot;
        op.in_slot = producer.out_slot;
        op.input_ready = true;
        break;
      }
      default:
        break;
    }
  };
  for (auto& [i, op] : ops_) {  // program order: a producer is settled before its reader
    plan_input(i, op);
    plan_layer_norm(i, op);
  }
}

const QuantLinearOp* QuantLinears::CopyFor(size_t producer_op, bool* keeps_fp16) const {
  auto it = copies_.find(producer_op);
  if (it == copies_.end()) return nullptr;
  if (keeps_fp16) *keeps_fp16 = it->second.second;
  return Find(it->second.first);
}

Status QuantLinears::Prepare(cublasLtHandle_t handle, size_t ws, int64_t max_token_rows,
                             int64_t max_batch_rows) {
  if (ops_.empty()) return Status::Ok();
  int64_t rows = 1, n = 16, k = 16;
  for (const auto& [i, op] : ops_) {
    rows = std::max(rows, op.batch_rows ? max_batch_rows : max_token_rows);
    n = std::max(n, op.n);
    k = std::max(k, op.k);
  }
  QuantProbeBuffers probe;
  SURGE_RETURN_IF_ERROR(
      probe.Allocate(rows, n, k, ws).WithContext("buffers to try the quantised GEMMs on"));
  // The largest count, one row and an odd count: the shapes cuBLASLt is most particular about.
  auto counts_of = [&](const QuantLinearOp& op) {
    const int64_t max_rows = op.batch_rows ? max_batch_rows : max_token_rows;
    std::vector<int64_t> counts = {max_rows};
    for (int64_t r : {int64_t{1}, std::min<int64_t>(max_rows, 37)}) {
      if (std::find(counts.begin(), counts.end(), r) == counts.end()) counts.push_back(r);
    }
    return counts;
  };
  // First every layer as a plain quantised Linear (FP16 out)...
  std::map<size_t, bool> wants_fp8_out, wants_int8_out;
  for (auto it = ops_.begin(); it != ops_.end();) {
    QuantLinearOp& op = it->second;
    wants_fp8_out[it->first] = op.fp8_out;
    wants_int8_out[it->first] = op.int8_out;
    op.fp8_out = false;
    op.int8_out = false;
    const std::vector<int64_t> counts = counts_of(op);
    Status st = ChooseQuantGemm(handle, probe, counts, QuantGemmMode::kFusedEpilogue, &op);
    if (st.code() == StatusCode::kUnimplemented) {
      SURGE_LOG_WARN("cuda backend: layer '{}' runs fp16 instead of {}: {}", op.node,
                     op.type == QuantType::kInt8 ? "int8" : "fp8", st.message());
      fallbacks_[it->first] = st.message();
      it = ops_.erase(it);
      continue;
    }
    SURGE_RETURN_IF_ERROR(st);
    ++it;
  }
  // ...then the planned fusions whose reader still runs quantised, each kept only where cuBLASLt
  // runs it (an e4m3 D with the layer's epilogue).
  for (auto it = copies_.begin(); it != copies_.end();) {
    it = ops_.count(it->second.first) ? std::next(it) : copies_.erase(it);
  }
  for (auto& [i, op] : ops_) {
    // A Linear's input comes quantised from a kept copy or from an FP8 Linear kept writing it
    // (settled on the previous step).
    if (op.input_ready && !copies_.count(i - 1)) {
      auto prev = ops_.find(i - 1);
      op.input_ready = prev != ops_.end() && (prev->second.fp8_out || prev->second.int8_out);
    }
    if (!op.input_ready) op.in_slot = 0;
    auto next = ops_.find(i + 1);
    if (wants_int8_out[i] && next != ops_.end()) {
      // Kept where the own GEMM takes the int8 output at every count (where cuBLASLt runs the
      // layer at a call, a quantise pass follows it).
      bool runs = true;
      for (int64_t r : counts_of(op)) {
        const QuantGemmOperands o = probe.Operands(op, RoundUp16(r));
        QGemmArgs a = OwnGemmArgs(op, r, o.w, o.scales, o.xq, o.bias, nullptr, o.out);
        a.q_out = true;
        runs = runs && QGemmCanImplement(a);
      }
      if (runs) {
        op.int8_out = true;
        op.out_slot = 1 - op.in_slot;
        next->second.in_slot = op.out_slot;
      } else {
        SURGE_LOG_INFO(
            "cuda backend: layer '{}' writes fp16 and the next layer quantises it: no "
            "int8 GEMM of this device writes its int8 output",
            op.node);
        next->second.input_ready = false;
      }
      continue;
    }
    if (!wants_fp8_out[i] || next == ops_.end()) continue;
    QuantLinearOp fused = op;
    fused.fp8_out = true;
    fused.out_slot = 1 - op.in_slot;
    const std::vector<int64_t> counts = counts_of(fused);
    Status st = ChooseQuantGemm(handle, probe, counts, QuantGemmMode::kFusedEpilogue, &fused);
    if (st.ok()) {
      op = std::move(fused);
      next->second.in_slot = op.out_slot;
      continue;
    }
    if (st.code() != StatusCode::kUnimplemented) return st;
    SURGE_LOG_INFO("cuda backend: layer '{}' writes fp16 and the next layer quantises it: {}",
                   op.node, st.message());
    next->second.input_ready = false;
  }
  SURGE_RETURN_IF_ERROR(TuneAll(handle, probe, max_token_rows, max_batch_rows));
  size_t total = 0;
  for (const auto& [i, op] : ops_) {
    total += AlignUp(op.weight.size());
    total += AlignUp(QuantScaleFloats(op).size() * sizeof(float));
  }
  if (ops_.empty()) return Status::Ok();
  void* p = nullptr;
  SURGE_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, total));
  device_.reset(p);
  device_bytes_ = total;
  char* at = static_cast<char*>(p);
  for (auto& [i, op] : ops_) {
    SURGE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(at, op.weight.data(), op.weight.size(), cudaMemcpyHostToDevice));
    op.w_dev = at;
    at += AlignUp(op.weight.size());
    const std::vector<float> scales = QuantScaleFloats(op);
    SURGE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(at, scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice));
    op.scales_dev = reinterpret_cast<const float*>(at);
    at += AlignUp(scales.size() * sizeof(float));
  }
  return Status::Ok();
}

namespace {

// The fastest tile of the own GEMM for `op` at `rows` and its time (us), or tile -1 when none
// beats cuBLASLt's path: its GEMM plus the passes it needs after it. `cublas_gemm` enqueues
// cuBLASLt's GEMM on the same probe operands: it is timed again together with the tiles (samples
// in rounds), so that both sides are measured at the same device pace; when it is empty (no
// cuBLASLt plan could be made again), its tuned time `cublas_us` stands in.
Result<std::pair<int, float>> TimeOwnGemm(const QuantProbeBuffers& probe, int64_t rows,
                                          const std::function<Status()>& cublas_gemm,
                                          float cublas_us, cudaStream_t stream,
                                          const QuantLinearOp* op) {
  const int64_t gemm_rows = QuantGemmRows(*op, rows);
  const QuantGemmOperands o = probe.Operands(*op, gemm_rows);
  // What cuBLASLt's path costs beyond its GEMM: the dequantise pass of the accumulating modes
  // (the accumulator at o.out, FP16 out over the residual buffer) and, for int8_out, the quantise
  // pass of FP16 y into the next layer's input.
  // Device time of one launch (`launch` returns its cudaError_t).
  auto time_launch = [stream](auto launch) -> Result<float> {
    return TimeBackToBack(
        [&]() -> Status {
          SURGE_CUDA_RETURN_IF_ERROR(launch());
          return Status::Ok();
        },
        stream);
  };
  float rest_us = 0;
  if (QuantGemmModeAccumulates(op->mode)) {
    DequantizeArgs da;
    da.rows = rows;
    da.cols = static_cast<int>(op->n);
    da.acc = o.out;
    da.float_acc = op->mode == QuantGemmMode::kFloat32;
    da.scale = da.float_acc ? nullptr : o.scales;
    da.bias = o.bias;
    da.activation = op->activation;
    da.residual = nullptr;
    da.y = const_cast<void*>(o.residual != nullptr ? o.residual : o.unused_c);
    if (op->residual) da.residual = da.y;
    if (DequantizeCanImplement(da)) {
      auto us = time_launch([&] { return DequantizeRun(da, nullptr, stream); });
      if (us.ok()) rest_us += *us;
    }
  }
  if (op->int8_out) {
    QuantizeArgs qa{QuantType::kInt8, rows * op->n, o.unused_c, 1.f, o.out};
    if (QuantizeCanImplement(qa)) {
      auto us = time_launch([&] { return QuantizeRun(qa, nullptr, stream); });
      if (us.ok()) rest_us += *us;
    }
  }
  QGemmArgs a = OwnGemmArgs(*op, rows, o.w, o.scales, o.xq, o.bias, o.residual, o.out);
  a.q_out = op->int8_out || op->fp8_out;
  a.out_inv_scale = 1.f / 64;
  std::vector<std::function<Status()>> runs;
  std::vector<int> tiles;  // per run: the own GEMM's tile, -1 for cuBLASLt's GEMM
  if (cublas_gemm) {
    runs.push_back(cublas_gemm);
    tiles.push_back(-1);
  }
  for (int tile = 0; tile < QGemmTileCount(); ++tile) {
    a.tile = tile;
    if (!QGemmCanImplement(a) || QGemmWorkspaceSize(a) > probe.workspace_bytes()) continue;
    runs.push_back([a, &o, stream]() -> Status {
      SURGE_CUDA_RETURN_IF_ERROR(QGemmRun(a, o.workspace, stream));
      return Status::Ok();
    });
    tiles.push_back(tile);
  }
  std::vector<Status> failures;
  SURGE_ASSIGN_OR_RETURN(const std::vector<float> us, TimeInterleaved(runs, stream, &failures));
  std::pair<int, float> best{-1, cublas_us + rest_us};
  // cuBLASLt's GEMM is the first run when given; a call refused now leaves its tuned time.
  const size_t first_tile = cublas_gemm ? 1 : 0;
  if (first_tile == 1 && std::isfinite(us[0])) best.second = us[0] + rest_us;
  for (size_t i = first_tile; i < runs.size(); ++i) {
    if (!failures[i].ok()) {
      return failures[i].WithContext(
          fmt::format("timing the own GEMM ({}) of layer '{}' at {} rows", QGemmTileName(tiles[i]),
                      op->node, rows));
    }
    if (us[i] < best.second) best = {tiles[i], us[i]};
  }
  // Every tile's time beside cuBLASLt's (SURGE_LOG_LEVEL=debug), as OwnIfFaster does for FP16.
  std::string times;
  for (size_t i = 0; i < runs.size(); ++i) {
    times += fmt::format("{}{} {:.1f} us", i == 0 ? "" : "; ",
                         tiles[i] < 0 ? "cuBLASLt" : QGemmTileName(tiles[i]), us[i]);
  }
  SURGE_LOG_DEBUG("quantised GEMM '{}' at {} rows (n {}, k {}): {}", op->node, rows, op->n, op->k,
                  times);
  return best;
}

// The own GEMM of `op` with the LayerNorm in its epilogue at `rows`, and the LayerNorm kernel with
// its quantised copy alone on the same operands, timed in rounds: (fused us, LayerNorm us); the
// fused time is infinite where the own GEMM cannot take the layer.
Result<std::pair<float, float>> TimeLayerNormFusion(const QuantProbeBuffers& probe, int64_t rows,
                                                    cudaStream_t stream, const QuantLinearOp& op) {
  const QuantGemmOperands o = probe.Operands(op, rows);
  QGemmArgs a = OwnGemmArgs(op, rows, o.w, o.scales, o.xq, o.bias, o.residual, o.out);
  a.ln = probe.LayerNormOperands(op, rows, o);
  a.tile = QGemmLayerNormTile();
  LayerNormArgs la;
  la.rows = rows;
  la.cols = static_cast<int>(op.n);
  la.x = o.residual;
  la.gamma = a.ln.gamma;
  la.beta = a.ln.beta;
  la.y = o.out;
  la.q = a.ln.q;
  const float inf = std::numeric_limits<float>::infinity();
  if (!LayerNormCanImplement(la)) return std::make_pair(inf, 0.f);
  if (!QGemmCanImplement(a) || QGemmWorkspaceSize(a) > probe.workspace_bytes()) {
    return std::make_pair(inf, 0.f);
  }
  std::vector<std::function<Status()>> runs = {
      [&]() -> Status {
        SURGE_CUDA_RETURN_IF_ERROR(QGemmRun(a, o.workspace, stream));
        return Status::Ok();
      },
      [&]() -> Status {
        SURGE_CUDA_RETURN_IF_ERROR(LayerNormRun(la, nullptr, stream));
        return Status::Ok();
      }};
  std::vector<Status> failures;
  SURGE_ASSIGN_OR_RETURN(const std::vector<float> us, TimeInterleaved(runs, stream, &failures));
  if (!failures[1].ok()) {
    return failures[1].WithContext(
        fmt::format("timing the LayerNorm after layer '{}' at {} rows", op.node, rows));
  }
  // A fused kernel that would not launch leaves the layer as it was (GEMM, then LayerNorm).
  if (!failures[0].ok()) {
    SURGE_LOG_WARN(
        "layer '{}' at {} rows: the GEMM with its LayerNorm did not run ({}); they run apart",
        op.node, rows, failures[0].message());
    return std::make_pair(inf, us[1]);
  }
  return std::make_pair(us[0], us[1]);
}

}  // namespace

QGemmArgs OwnGemmArgs(const QuantLinearOp& op, int64_t rows, const void* w, const float* scales,
                      const void* xq, const void* bias, const void* residual, void* y) {
  QGemmArgs a;
  a.type = op.type;
  a.m = rows;
  a.n = op.n;
  a.k = op.k;
  a.x = xq;
  a.w = w;
  a.scale = op.type == QuantType::kFp8E4M3 ? scales + kFp8ColumnScalesAt : scales;
  a.bias = op.bias ? bias : nullptr;
  a.activation = op.activation;
  a.residual = op.residual ? residual : nullptr;
  a.y = y;
  a.out_inv_scale = op.out_inv_scale;
  return a;
}

namespace {

// The quantised GEMMs' tunings of this process (cuBLASLt algorithm and time by "<device key>
// <desc key>"; the own GEMM's tile and time by the same key and its output form), shared by every
// load: an engine loaded again (the accuracy guard loads one per candidate, a server one per
// model version) times each shape once.
struct QuantTunings {
  std::mutex mu;
  std::map<std::string, std::pair<cublasLtMatmulAlgo_t, float>> cublas;
  std::map<std::string, std::pair<int, float>> own;
  // The own GEMM with the LayerNorm in its epilogue: its time (us) where faster than the GEMM and
  // the LayerNorm kernel apart, else -1, by the same key.
  std::map<std::string, float> ln;
};

QuantTunings& ProcessQuantTunings() {
  static QuantTunings* t = new QuantTunings;  // never destroyed: used until exit
  return *t;
}

}  // namespace

Status QuantLinears::TuneAll(cublasLtHandle_t handle, const QuantProbeBuffers& probe,
                             int64_t max_token_rows, int64_t max_batch_rows) {
  cudaStream_t stream = nullptr;
  SURGE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Tunings are looked up and added in the process's tables under their lock, held for the whole
  // tuning: concurrent loads tune one after the other (timings taken side by side would disturb
  // each other anyway).
  QuantTunings& process = ProcessQuantTunings();
  std::lock_guard<std::mutex> lock(process.mu);
  const std::string device = DeviceKey() + "\t";
  auto& done = process.cublas;   // cuBLASLt algorithm and time, by device and desc key
  auto& own_done = process.own;  // own GEMM: tile and time, by the same key and output form
  auto& ln_done = process.ln;    // own GEMM with the LayerNorm: time where faster, by the same key
  Status st = Status::Ok();
  for (auto& [i, op] : ops_) {
    const int64_t max_rows = op.batch_rows ? max_batch_rows : max_token_rows;
    std::vector<int64_t> counts;
    for (int64_t r = 1; r < max_rows; r *= 2) counts.push_back(r);
    counts.push_back(max_rows);
    for (int64_t rows : counts) {
      const QuantGemmDesc d = QuantLinearGemmDesc(op, rows);
      const int bucket = RowBucket(d.m);
      if (op.tuned.count(bucket) && rows != max_rows) continue;
      const std::string desc_key =
          fmt::format("{}{} mode={}", device, d.Key(), QuantGemmModeName(op.mode));
      auto hit = done.find(desc_key);
      QuantGemmOperands o = probe.Operands(op, d.m);
      o.stream = stream;
      std::unique_ptr<QuantGemm> gemm;  // cuBLASLt's plan at this shape, its tuned algorithm first
      if (hit == done.end()) {
        auto g = QuantGemm::Create(handle, d, probe.workspace_bytes(), op.mode, &o, true);
        if (!g.ok()) {
          st = g.status().WithContext(fmt::format("timing layer '{}' at {} rows", op.node, rows));
          break;
        }
        Status tuned = (*g)->Tune(handle, o);
        if (!tuned.ok()) {
          st = tuned.WithContext(fmt::format("timing layer '{}' at {} rows", op.node, rows));
          break;
        }
        hit = done.emplace(desc_key, std::make_pair((*g)->algo(), (*g)->tuned_us())).first;
        gemm = std::move(*g);
      }
      op.tuned[bucket] = hit->second;
      if (op.type == QuantType::kInt8 || Fp8FastAccumulation()) {
        const std::string key = desc_key + (op.int8_out ? " i8out" : "");
        auto own = own_done.find(key);
        if (own == own_done.end()) {
          // cuBLASLt's tuned algorithm, timed again beside the own GEMM's tiles (a tuning from
          // the process's table needs its plan made again).
          if (!gemm) {
            auto g = QuantGemm::Create(handle, d, probe.workspace_bytes(), op.mode, &o, true,
                                       &hit->second.first);
            if (g.ok()) gemm = std::move(*g);
          }
          std::function<Status()> cublas_gemm;
          if (gemm) cublas_gemm = [&] { return gemm->Run(handle, o); };
          auto timed = TimeOwnGemm(probe, rows, cublas_gemm, hit->second.second, stream, &op);
          if (!timed.ok()) {
            st = timed.status();
            break;
          }
          own = own_done.emplace(key, *timed).first;
        }
        if (own->second.first >= 0) {
          op.own[RowBucket(rows)] = own->second;
        } else {
          op.own.erase(RowBucket(rows));
        }
        if (op.ln_op != 0) {
          const bool always = LayerNormFusionSetting() == LayerNormFusion::kAlways;
          const std::string ln_key = desc_key + (always ? " ln always" : " ln");
          auto ln = ln_done.find(ln_key);
          if (ln == ln_done.end()) {
            auto timed = TimeLayerNormFusion(probe, rows, stream, op);
            if (!timed.ok()) {
              st = timed.status();
              break;
            }
            // Against the bucket's GEMM as chosen (own tile, or cuBLASLt and its passes) and the
            // LayerNorm kernel.
            const auto [fused_us, ln_us] = *timed;
            const bool faster =
                std::isfinite(fused_us) && (fused_us < own->second.second + ln_us || always);
            SURGE_LOG_DEBUG(
                "quantised GEMM '{}' at {} rows with its LayerNorm: {:.1f} us fused ({} clusters "
                "of {} CTAs at once), {:.1f} + {:.1f} us apart",
                op.node, rows, fused_us, QGemmLayerNormClusters(op.type, op.n), op.n / 128,
                own->second.second, ln_us);
            ln = ln_done.emplace(ln_key, faster ? fused_us : -1.f).first;
          }
          if (ln->second >= 0) {
            op.ln_fused[RowBucket(rows)] = ln->second;
          } else {
            op.ln_fused.erase(RowBucket(rows));
          }
        }
      }
    }
    if (!st.ok()) break;
  }
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  return st;
}

const QuantLinearOp* QuantLinears::Find(size_t op_index) const {
  auto it = ops_.find(op_index);
  return it == ops_.end() ? nullptr : &it->second;
}

std::string QuantLinears::FallbackReason(size_t op_index) const {
  auto it = fallbacks_.find(op_index);
  return it == fallbacks_.end() ? std::string() : it->second;
}

QuantLinears::Scratch QuantLinears::ScratchFor(const QuantLinearOp& op, int64_t rows) {
  const int64_t gemm_rows = QuantGemmRows(op, rows);
  Scratch s;
  const bool q_out = op.fp8_out || op.int8_out;
  s.xq = AlignUp(static_cast<size_t>(gemm_rows * (q_out ? std::max(op.k, op.n) : op.k)));
  s.slots = op.in_slot != 0 || (q_out && op.out_slot != 0) ? 2 : 1;
  if (QuantGemmModeAccumulates(op.mode)) {
    s.acc = AlignUp(static_cast<size_t>(gemm_rows * op.n) * 4);
  }
  return s;
}

QuantLinears::Scratch QuantLinears::ScratchBytes(int64_t max_token_rows,
                                                 int64_t max_batch_rows) const {
  Scratch s;
  for (const auto& [i, op] : ops_) {
    const Scratch one = ScratchFor(op, op.batch_rows ? max_batch_rows : max_token_rows);
    s.xq = std::max(s.xq, one.xq);
    s.acc = std::max(s.acc, one.acc);
    s.slots = std::max(s.slots, one.slots);
  }
  return s;
}

std::string QuantLinears::Describe(const QuantLinearOp& op) const {
  std::string tactics;
  for (const auto& [bucket, algo] : op.tuned) {
    tactics += fmt::format(" rows~2^{}: {:.1f} us;", bucket, algo.second);
  }
  std::string own;
  for (const auto& [bucket, tile] : op.own) {
    own += fmt::format(" rows~2^{}: {} {:.1f} us;", bucket, QGemmTileName(tile.first), tile.second);
  }
  if (!own.empty()) own = "; own gemm (fused epilogue) where faster:" + own;
  return fmt::format(
      "cublasLt {} gemm ({}{}{}) k={} n={} W[N,K] x_scale={:.4g} w_scale={}{}{}{}{}{}",
      op.type == QuantType::kInt8 ? "int8" : "fp8 e4m3", QuantGemmModeName(op.mode),
      op.type == QuantType::kInt8 ? ""
                                  : (op.scale_in_alpha ? ", scales as alpha" : ", scale pointers"),
      op.pad_rows ? ", rows padded to 16" : "", op.k, op.n, op.x_scale,
      op.type == QuantType::kInt8 ? std::string("per channel")
                                  : fmt::format("{:.4g}", op.w_scales[0]),
      op.input_ready ? "; input quantised by the op before" : "",
      op.fp8_out ? "; writes the next layer's e4m3 input" : "",
      op.int8_out ? "; writes the next layer's int8 input" : "",
      tactics.empty() ? "" : "; tactics:" + tactics, own);
}

Status QuantLinearRunner::Init(const QuantLinears::Scratch& s) {
  if (s.total() == 0) return Status::Ok();
  void* p = nullptr;
  SURGE_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, s.total()));
  scratch_.reset(p);
  xq_bytes_ = s.xq;
  acc_bytes_ = s.acc;
  slots_ = s.slots;
  return Status::Ok();
}

Status QuantLinearRunner::GemmLayerNorm(const QuantLinearOp& op, int64_t rows, const void* bias,
                                        const void* residual, void* y,
                                        const QGemmArgs::LayerNorm& ln, void* ws, size_t ws_bytes,
                                        cudaStream_t stream, bool* ran) {
  *ran = false;
  if (rows == 0 || op.ln_op == 0 || !op.ln_fused.count(RowBucket(rows))) return Status::Ok();
  if (op.in_slot >= slots_ || static_cast<size_t>(rows * op.k) > xq_bytes_) {
    return InternalError("quantised layer '{}': {} rows exceed the context's scratch", op.node,
                         rows);
  }
  QGemmArgs a = OwnGemmArgs(op, rows, op.w_dev, op.scales_dev, Slot(op.in_slot), bias, residual, y);
  a.ln = ln;
  a.tile = QGemmLayerNormTile();
  if (!QGemmCanImplement(a) || QGemmWorkspaceSize(a) > ws_bytes) return Status::Ok();
  SURGE_CUDA_RETURN_IF_ERROR(QGemmRun(a, ws, stream));
  *ran = true;
  return Status::Ok();
}

// The scratch: the quantised-input slots, then the accumulators (where one more slot would be).
void* QuantLinearRunner::Accumulators() const { return acc_bytes_ == 0 ? nullptr : Slot(slots_); }

void* QuantLinearRunner::Slot(int slot) const {
  return static_cast<char*>(scratch_.get()) + static_cast<size_t>(slot) * xq_bytes_;
}

Result<QuantizedCopy> QuantLinearRunner::CopyTarget(const QuantLinearOp& op, int64_t rows) const {
  if (op.in_slot >= slots_ || static_cast<size_t>(QuantGemmRows(op, rows) * op.k) > xq_bytes_) {
    return InternalError("quantised layer '{}': {} rows exceed the context's scratch", op.node,
                         rows);
  }
  return QuantizedCopy{op.type, Slot(op.in_slot), 1.f / op.x_scale};
}

Status QuantLinearRunner::Run(const QuantLinearOp& op, cublasLtHandle_t handle, int64_t rows,
                              const void* x, const void* bias, const void* residual, void* y,
                              void* ws, size_t ws_bytes, cudaStream_t stream) {
  SURGE_RETURN_IF_ERROR(Quantize(op, rows, x, stream));
  return Gemm(op, handle, rows, bias, residual, y, ws, ws_bytes, stream);
}

Status QuantLinearRunner::Quantize(const QuantLinearOp& op, int64_t rows, const void* x,
                                   cudaStream_t stream) {
  if (rows == 0) return Status::Ok();
  SURGE_ASSIGN_OR_RETURN(const QuantizedCopy target, CopyTarget(op, rows));
  QuantizeArgs qa{op.type, rows * op.k, x, target.inv_scale, target.y};
  if (!QuantizeCanImplement(qa)) {
    return InternalError("layer '{}': quantize cannot run on these buffers", op.node);
  }
  SURGE_CUDA_RETURN_IF_ERROR(QuantizeRun(qa, nullptr, stream));
  return Status::Ok();
}

Status QuantLinearRunner::Gemm(const QuantLinearOp& op, cublasLtHandle_t handle, int64_t rows,
                               const void* bias, const void* residual, void* y, void* ws,
                               size_t ws_bytes, cudaStream_t stream) {
  if (rows == 0) return Status::Ok();
  const int64_t gemm_rows = QuantGemmRows(op, rows);
  const bool q_out = op.fp8_out || op.int8_out;
  if (op.in_slot >= slots_ || (q_out && op.out_slot >= slots_) ||
      static_cast<size_t>(gemm_rows * (q_out ? std::max(op.k, op.n) : op.k)) > xq_bytes_) {
    return InternalError("quantised layer '{}': {} rows exceed the context's scratch", op.node,
                         rows);
  }
  const void* xq = Slot(op.in_slot);
  if (auto own = op.own.find(RowBucket(rows)); own != op.own.end()) {
    QGemmArgs a = OwnGemmArgs(op, rows, op.w_dev, op.scales_dev, xq, bias, residual, y);
    a.tile = own->second.first;
    if (q_out) {
      a.q_out = true;
      a.y = Slot(op.out_slot);
    }
    if (QGemmCanImplement(a) && QGemmWorkspaceSize(a) <= ws_bytes) {
      SURGE_CUDA_RETURN_IF_ERROR(QGemmRun(a, ws, stream));
      return Status::Ok();
    }
  }
  // The e4m3 output as planned; should cuBLASLt refuse it at this row count, FP16 y and a quantise
  // pass into the next layer's slot.
  bool fp8_out = op.fp8_out && !fp8_refused_.count({op.op, rows});
  // The mode chosen at load; should cuBLASLt refuse every algorithm of a plan at this row count,
  // the next mode the context's scratch allows (nothing was enqueued by the refused calls).
  for (QuantGemmMode first = op.mode;;) {
    const auto key = std::make_tuple(op.op, rows, fp8_out);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      QuantGemmDesc d = QuantLinearGemmDesc(op, rows);
      d.fp8_out = fp8_out;
      const auto tuned = op.tuned.find(RowBucket(d.m));
      auto plan = QuantGemm::Create(handle, d, ws_bytes, first, nullptr, false,
                                    tuned != op.tuned.end() ? &tuned->second.first : nullptr);
      if (!plan.ok() && fp8_out && plan.status().code() == StatusCode::kUnimplemented) {
        fp8_refused_.insert({op.op, rows});
        fp8_out = false;
        continue;
      }
      if (!plan.ok()) return plan.status().WithContext(fmt::format("layer '{}'", op.node));
      const QuantGemmMode mode = (*plan)->mode();
      if (op.pad_rows && !QuantGemmModeAccumulates(mode)) {
        return InternalError("layer '{}': rows padded to 16 need an accumulating mode, got {}",
                             op.node, QuantGemmModeName(mode));
      }
      if (QuantGemmModeAccumulates(mode) &&
          acc_bytes_ < static_cast<size_t>(gemm_rows * op.n) * 4) {
        return InternalError(
            "layer '{}': cuBLASLt needs accumulators ({}) at {} rows but the context reserved "
            "none",
            op.node, QuantGemmModeName(mode), rows);
      }
      it = plans_.emplace(key, std::move(plan).value()).first;
    }
    Status st = RunPlan(op, *it->second, fp8_out, handle, rows, xq, bias, residual, y, ws, ws_bytes,
                        stream);
    if (st.code() != StatusCode::kUnimplemented) {
      SURGE_RETURN_IF_ERROR(st);
      break;
    }
    const QuantGemmMode refused = it->second->mode();
    plans_.erase(it);
    if (fp8_out) {
      fp8_refused_.insert({op.op, rows});
      fp8_out = false;
      first = op.mode;
      continue;
    }
    if (refused == QuantGemmMode::kFloat32) {
      return st.WithContext(fmt::format("layer '{}' at {} rows", op.node, rows));
    }
    first = static_cast<QuantGemmMode>(static_cast<int>(refused) + 1);
  }
  if ((op.fp8_out && !fp8_out) || op.int8_out) {
    // FP16 y was written instead: quantise it for the next layer.
    QuantizeArgs qa{op.type, rows * op.n, y, op.out_inv_scale, Slot(op.out_slot)};
    if (!QuantizeCanImplement(qa)) {
      return InternalError("layer '{}': quantize cannot run on these buffers", op.node);
    }
    SURGE_CUDA_RETURN_IF_ERROR(QuantizeRun(qa, nullptr, stream));
  }
  return Status::Ok();
}

Status QuantLinearRunner::RunPlan(const QuantLinearOp& op, const QuantGemm& g, bool fp8_out,
                                  cublasLtHandle_t handle, int64_t rows, const void* xq,
                                  const void* bias, const void* residual, void* y, void* ws,
                                  size_t ws_bytes, cudaStream_t stream) {
  QuantGemmOperands o;
  o.w = op.w_dev;
  o.xq = xq;
  o.scales = op.scales_dev;
  if (op.type == QuantType::kFp8E4M3) {
    o.w_scale = op.scales_dev;
    o.x_scale = op.scales_dev + kFp8XScaleAt;
  }
  if (fp8_out) {
    o.d_scale = op.scales_dev + kFp8DScaleAt;
    o.unused_c = y;
    y = Slot(op.out_slot);
  }
  o.workspace = ws;
  o.workspace_bytes = ws_bytes;
  o.stream = stream;
  switch (g.mode()) {
    case QuantGemmMode::kFusedEpilogue:
      o.bias = bias;
      o.residual = residual;
      o.out = y;
      return g.Run(handle, o);
    case QuantGemmMode::kScaled: {
      o.out = y;
      SURGE_RETURN_IF_ERROR(g.Run(handle, o));
      if (!op.bias && op.activation == Activation::kNone && !op.residual) return Status::Ok();
      BiasActArgs a;
      a.dtype = DataType::kF16;
      a.rows = rows;
      a.cols = static_cast<int>(op.n);
      a.activation = op.activation;
      a.x = y;
      a.bias = op.bias ? bias : nullptr;
      a.residual = op.residual ? residual : nullptr;
      a.y = y;
      SURGE_CUDA_RETURN_IF_ERROR(BiasActRun(a, nullptr, stream));
      return Status::Ok();
    }
    case QuantGemmMode::kInt32:
    case QuantGemmMode::kFloat32: {
      void* acc = Accumulators();
      o.out = acc;
      SURGE_RETURN_IF_ERROR(g.Run(handle, o));
      DequantizeArgs da;
      da.rows = rows;  // the first `rows` rows of a padded GEMM's output
      da.cols = static_cast<int>(op.n);
      da.acc = acc;
      da.float_acc = g.mode() == QuantGemmMode::kFloat32;
      // INT32: the per-channel steps; FP32: the GEMM already applied the scales.
      da.scale = da.float_acc ? nullptr : op.scales_dev;
      da.bias = op.bias ? bias : nullptr;
      da.activation = op.activation;
      da.residual = op.residual ? residual : nullptr;
      da.y = y;
      if (!DequantizeCanImplement(da)) {
        return InternalError("layer '{}': dequantize cannot run on these buffers", op.node);
      }
      SURGE_CUDA_RETURN_IF_ERROR(DequantizeRun(da, nullptr, stream));
      return Status::Ok();
    }
  }
  return InternalError("layer '{}': unknown GEMM mode", op.node);
}

}  // namespace surge::engine::cuda
