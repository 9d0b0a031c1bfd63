#include "engine/backends/cuda/quant_linear.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/backends/cuda/bias_act_kernels.h"
#include "engine/backends/cuda/cuda_check.h"

namespace surge::engine::cuda {
namespace {

constexpr float kInt8Max = 127.f;
constexpr float kFp8Max = 448.f;
constexpr size_t kAlign = 256;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool Quantised(Precision p) { return p == Precision::kInt8 || p == Precision::kFp8; }

}  // namespace

void QuantizeLinearWeight(const Tensor& w, QuantType type, std::vector<uint8_t>* q,
                          std::vector<float>* scales) {
  const int64_t k = w.dim(0), n = w.dim(1);
  const float* src = w.data_as<float>();
  q->resize(static_cast<size_t>(k * n));
  if (type == QuantType::kInt8) {
    scales->assign(n, 0.f);
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < n; ++j)
        (*scales)[j] = std::max((*scales)[j], std::abs(src[i * n + j]));
    }
    for (float& s : *scales) s = s > 0 ? s / kInt8Max : 1.f;
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < k; ++i) {
        const float v =
            std::clamp(std::nearbyint(src[i * n + j] / (*scales)[j]), -kInt8Max, kInt8Max);
        (*q)[j * k + i] = static_cast<uint8_t>(static_cast<int8_t>(v));
      }
    }
    return;
  }
  float amax = 0;
  for (int64_t i = 0; i < k * n; ++i) amax = std::max(amax, std::abs(src[i]));
  const float scale = amax > 0 ? amax / kFp8Max : 1.f;
  *scales = {scale};
  std::vector<float> t(static_cast<size_t>(k * n));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < k; ++i) t[j * k + i] = src[i * n + j] / scale;
  }
  FloatToE4m3Host(t.data(), q->data(), k * n);
}

void DeviceFreeDeleter::operator()(void* p) const { cudaFree(p); }

BuilderConfig QuantBaseConfig(const BuilderConfig& config) {
  BuilderConfig c = config;
  if (Quantised(c.precision)) c.precision = Precision::kFp16;
  return c;
}

Result<QuantLinears> QuantLinears::Analyze(const ir::Graph& g, const Program& p,
                                           const BuilderConfig& config) {
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
          "cuda backend: layer '{}' is marked {}; in an {} build its layers run {} or fp16", n.name,
          PrecisionName(prec), PrecisionName(config.precision), PrecisionName(config.precision));
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
    QuantizeLinearWeight(g.values[w].constant, op.type, &op.weight, &op.w_scales);
    out.ops_.emplace(i, std::move(op));
  }
  return out;
}

Status QuantLinears::Prepare(cublasLtHandle_t handle, size_t ws, int64_t max_token_rows,
                             int64_t max_batch_rows) {
  size_t total = 0;
  for (const auto& [i, op] : ops_) {
    total += AlignUp(op.weight.size());
    total += AlignUp((op.type == QuantType::kInt8 ? op.n : 2) * sizeof(float));
  }
  if (ops_.empty()) return Status::Ok();
  void* p = nullptr;
  SURGE_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, total));
  device_.reset(p);
  device_bytes_ = total;
  char* at = static_cast<char*>(p);
  for (auto& [i, op] : ops_) {
    QuantGemmDesc d{op.type,    op.batch_rows ? max_batch_rows : max_token_rows,
                    op.n,       op.k,
                    op.bias,    op.activation,
                    op.residual};
    SURGE_ASSIGN_OR_RETURN(auto gemm, QuantGemm::Create(handle, d, ws));
    op.mode = gemm->mode();
    SURGE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(at, op.weight.data(), op.weight.size(), cudaMemcpyHostToDevice));
    op.w_dev = at;
    at += AlignUp(op.weight.size());
    std::vector<float> scales;
    if (op.type == QuantType::kInt8) {
      for (float s : op.w_scales) scales.push_back(op.x_scale * s);
    } else {
      scales = {op.w_scales[0], op.x_scale};
    }
    SURGE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(at, scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice));
    op.scales_dev = reinterpret_cast<const float*>(at);
    at += AlignUp(scales.size() * sizeof(float));
  }
  return Status::Ok();
}

const QuantLinearOp* QuantLinears::Find(size_t op_index) const {
  auto it = ops_.find(op_index);
  return it == ops_.end() ? nullptr : &it->second;
}

QuantLinears::Scratch QuantLinears::ScratchBytes(int64_t max_token_rows,
                                                 int64_t max_batch_rows) const {
  Scratch s;
  for (const auto& [i, op] : ops_) {
    const int64_t rows = op.batch_rows ? max_batch_rows : max_token_rows;
    s.xq = std::max(s.xq, AlignUp(static_cast<size_t>(rows * op.k)));
    if (op.mode == QuantGemmMode::kInt32) {
      s.acc = std::max(s.acc, AlignUp(static_cast<size_t>(rows * op.n) * 4));
    }
  }
  return s;
}

std::string QuantLinears::Describe(const QuantLinearOp& op) const {
  return fmt::format("cublasLt {} gemm ({}) k={} n={} W[N,K] x_scale={:.4g} w_scale={}",
                     op.type == QuantType::kInt8 ? "int8" : "fp8 e4m3", QuantGemmModeName(op.mode),
                     op.k, op.n, op.x_scale,
                     op.type == QuantType::kInt8 ? std::string("per channel")
                                                 : fmt::format("{:.4g}", op.w_scales[0]));
}

Status QuantLinearRunner::Init(const QuantLinears::Scratch& s) {
  if (s.total() == 0) return Status::Ok();
  void* p = nullptr;
  SURGE_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, s.total()));
  scratch_.reset(p);
  xq_bytes_ = s.xq;
  acc_bytes_ = s.acc;
  return Status::Ok();
}

Status QuantLinearRunner::Run(const QuantLinearOp& op, cublasLtHandle_t handle, int64_t rows,
                              const void* x, const void* bias, const void* residual, void* y,
                              void* ws, size_t ws_bytes, cudaStream_t stream) {
  if (rows == 0) return Status::Ok();
  if (static_cast<size_t>(rows * op.k) > xq_bytes_) {
    return InternalError("quantised layer '{}': {} rows exceed the context's scratch", op.node,
                         rows);
  }
  auto key = std::make_pair(op.op, rows);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    QuantGemmDesc d{op.type, rows, op.n, op.k, op.bias, op.activation, op.residual};
    auto plan = QuantGemm::Create(handle, d, ws_bytes, op.mode);
    if (!plan.ok()) return plan.status().WithContext(fmt::format("layer '{}'", op.node));
    if ((*plan)->mode() == QuantGemmMode::kInt32 &&
        acc_bytes_ < static_cast<size_t>(rows * op.n) * 4) {
      return InternalError(
          "layer '{}': cuBLASLt needs INT32 accumulators at {} rows but the "
          "context reserved none",
          op.node, rows);
    }
    it = plans_.emplace(key, std::move(plan).value()).first;
  }
  const QuantGemm& g = *it->second;
  void* xq = scratch_.get();
  QuantizeArgs qa{op.type, rows * op.k, x, 1.f / op.x_scale, xq};
  if (!QuantizeCanImplement(qa)) {
    return InternalError("layer '{}': quantize cannot run on these buffers", op.node);
  }
  SURGE_CUDA_RETURN_IF_ERROR(QuantizeRun(qa, nullptr, stream));
  const float* w_scale = op.type == QuantType::kFp8E4M3 ? op.scales_dev : nullptr;
  const float* x_scale = op.type == QuantType::kFp8E4M3 ? op.scales_dev + 1 : nullptr;
  switch (g.mode()) {
    case QuantGemmMode::kFusedEpilogue:
      return g.Run(handle, op.w_dev, xq, op.scales_dev, w_scale, x_scale, bias, residual, y, ws,
                   ws_bytes, stream);
    case QuantGemmMode::kScaled: {
      SURGE_RETURN_IF_ERROR(g.Run(handle, op.w_dev, xq, op.scales_dev, w_scale, x_scale, nullptr,
                                  nullptr, y, ws, ws_bytes, stream));
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
    case QuantGemmMode::kInt32: {
      auto* acc = reinterpret_cast<int32_t*>(static_cast<char*>(scratch_.get()) + xq_bytes_);
      SURGE_RETURN_IF_ERROR(g.Run(handle, op.w_dev, xq, nullptr, nullptr, nullptr, nullptr, nullptr,
                                  acc, ws, ws_bytes, stream));
      DequantizeArgs da;
      da.rows = rows;
      da.cols = static_cast<int>(op.n);
      da.acc = acc;
      da.scale = op.scales_dev;
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
