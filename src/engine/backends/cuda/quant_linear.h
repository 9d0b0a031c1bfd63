// Quantised Linear layers of the CUDA backend: INT8 (per-channel weight scales) and FP8 e4m3
// (per-tensor scales) GEMMs for the Linear ops an int8/fp8 build's quantisation spec marks
// (BuilderConfig::quant, filled by engine/quant from a calibration cache and the accuracy guard).
// Everything else (attention, LayerNorm, unmarked Linears) runs in FP16.
//
// Per call: the FP16 input is quantised at the layer's calibrated activation step
// (quant_kernels.h), the GEMM runs in cuBLASLt (quant_gemm.h) and its epilogue writes FP16. Weights
// are quantised on the host when the plan is built and stored so, [N,K] with their scales
// (Blob::quant_weights); plans before blob version 5 quantise their FP32 constants at load.
//
// Quantisation folds into the op before where it can (Analyze; SURGE_CUDA_QUANT_FUSION=0 turns it
// off): a LayerNorm, SkipLayerNorm or Attention directly before a quantised Linear that reads its
// output writes the quantised copy itself (QuantizedCopy; Attention then skips its FP16 output
// when nothing else reads it), and an FP8 Linear whose only reader is the FP8 Linear after it
// (FFN1 -> FFN2) writes that layer's e4m3 input from its epilogue (QuantGemmDesc::fp8_out) instead
// of FP16. The quantised inputs live in two context buffers (slots), so such a pair reads one slot
// and writes the other.
//
// Each layer's GEMM algorithms are timed when the engine loads at every power-of-two row count up
// to the profile's largest (QuantGemm::Tune, shapes shared by layers timed once); a call uses the
// fastest of its row count's bucket (floor(log2 rows)) when cuBLASLt accepts it for that count.
// On Hopper every layer also times Surge's own quantised GEMM (qgemm_kernels.h: the dequantising
// epilogue fused, FP16 or the next layer's quantised input out) in each tile configuration at the
// same counts, and runs it in the buckets where it beats cuBLASLt's GEMM plus the passes that one
// needs after it (INT8: cuBLASLt writes INT32 and a dequantise pass follows). FP8 layers do so
// with fast accumulation only (the own FP8 GEMM has no other form).
//
// How each layer's GEMM runs is chosen when the engine loads, by running it (ChooseQuantGemm):
// the most fused mode, FP8 scales as scale pointers or as alpha, at the profile's largest row
// count, at 1 row and at an odd count; failing that, with rows padded to a multiple of 16 into
// the accumulator scratch. A layer cuBLASLt runs in no such form falls back to FP16 and the
// reason is kept (QuantLinears::FallbackReason, the engine's Describe, a warning in the log).
//
// QuantLinears is built once per engine (immutable afterwards, shared by contexts);
// QuantLinearRunner holds one context's scratch and GEMM plans (one thread at a time).
#pragma once

#include <cublasLt.h>

#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.h"
#include "engine/backends/cuda/lowering.h"
#include "engine/backends/cuda/qgemm_kernels.h"
#include "engine/backends/cuda/quant_gemm.h"
#include "engine/ir/graph.h"
#include "engine/runtime/backend.h"

namespace surge::engine::cuda {

// The config AnalyzeGraph sees: int8 and fp8 builds run every unquantised op in FP16.
BuilderConfig QuantBaseConfig(const BuilderConfig& config);

struct QuantLinearOp {
  size_t op = 0;  // index into Program::ops
  std::string node;
  QuantType type = QuantType::kFp8E4M3;
  int64_t k = 0, n = 0;
  bool bias = false, residual = false;
  Activation activation = Activation::kNone;
  bool batch_rows = false;      // runs on [B, C] rows rather than token rows
  float x_scale = 0;            // activation step: amax / 127 (INT8) or amax / 448 (FP8)
  std::vector<float> w_scales;  // INT8: per output channel; FP8: one
  std::vector<uint8_t> weight;  // quantised W, [N,K] row-major (host copy)
  // Chosen by ChooseQuantGemm (QuantLinears::Prepare):
  QuantGemmMode mode = QuantGemmMode::kFusedEpilogue;
  bool scale_in_alpha = false;  // FP8: sw · sx as alpha rather than A/B scale pointers
  bool pad_rows = false;        // GEMMs run on rows rounded up to 16 (accumulating modes only)
  const void* w_dev = nullptr;  // device copy of `weight`
  const float* scales_dev = nullptr;  // QuantScaleFloats(*this) on the device
  // Fusion with the neighbouring ops (Analyze plans it; Prepare drops what cuBLASLt refuses):
  int in_slot = 0;            // the context's quantised-input buffer x is read from
  bool input_ready = false;   // the op before writes x's quantised copy (no Quantize pass)
  bool fp8_out = false;       // the GEMM writes the next op's e4m3 input, not FP16 y
  float out_inv_scale = 1.f;  // fp8_out: 1 / the next op's activation step
  int out_slot = 0;           // fp8_out: the next op's in_slot
  // Tuned algorithms by row-count bucket (floor(log2 gemm rows)) and their times (us).
  std::map<int, std::pair<cublasLtMatmulAlgo_t, float>> tuned;
  // Surge's own GEMM (qgemm_kernels.h) by row-count bucket (floor(log2 rows)): the tile
  // configuration and its time (us), for the buckets where it ran faster than cuBLASLt's GEMM
  // plus the passes that one needs after it (dequantise; quantise for int8_out). Other buckets,
  // and calls it cannot take, run cuBLASLt.
  std::map<int, std::pair<int, float>> own;
  // INT8 with GELU, read only by the INT8 Linear after it (FFN1 -> FFN2): the own GEMM writes that
  // layer's int8 input (slot out_slot, at out_inv_scale) instead of FP16 y; where cuBLASLt runs
  // the layer, y is written and quantised into the slot.
  bool int8_out = false;
  // A residual Linear whose output only the LayerNorm op right after it reads (BERT's attention
  // projection and FFN2; PlanFusion): the op index of that LayerNorm (0: none). The own GEMM runs
  // it in its epilogue (QGemmArgs::ln: the LayerNorm's output and its quantised copy for the next
  // Linear instead of the sum) in the buckets of `ln_fused` (floor(log2 rows) -> the fused
  // kernel's time, us), where it timed faster than the layer's GEMM and the LayerNorm kernel
  // apart; SURGE_CUDA_LAYER_NORM_FUSION=0 turns it off, =always takes it wherever it runs. That
  // next Linear then reads the other slot than this one, which the fused kernel still reads when it
  // writes the copy.
  size_t ln_op = 0;
  std::map<int, float> ln_fused;
};

// FP8 scales on the device: w_scale at 0, x_scale at this float offset (256 bytes on).
constexpr int kFp8XScaleAt = 64;
// fp8_out: the next layer's 1 / activation step (the e4m3 D scale) at this float offset.
constexpr int kFp8DScaleAt = 128;
// FP8: x_scale · w_scale repeated N times (the own GEMM's per-column dequantise step) from here.
constexpr int kFp8ColumnScalesAt = 192;
// What scales_dev holds: INT8 x_scale · w_scales[n] (n floats); FP8 w_scale at 0, x_scale at
// kFp8XScaleAt, out_inv_scale at kFp8DScaleAt (with fp8_out; else 0) and N column steps at
// kFp8ColumnScalesAt.
std::vector<float> QuantScaleFloats(const QuantLinearOp& op);
// Rows the GEMM of `op` runs on for `rows` input rows (rounded up to 16 with pad_rows).
int64_t QuantGemmRows(const QuantLinearOp& op, int64_t rows);
// The GEMM descriptor of `op` at `rows` input rows.
QuantGemmDesc QuantLinearGemmDesc(const QuantLinearOp& op, int64_t rows);
// FP8 GEMMs accumulate in the tensor cores' own accumulator (QuantGemmDesc::fast_accum) unless
// SURGE_CUDA_FP8_FAST_ACCUM=0: on the H200 BERT-base FP8 plan 4.25 ms instead of 4.57 at 128x128,
// cosine to FP32 unchanged (0.99654 vs 0.99653), as inference engines run FP8 forward passes.
bool Fp8FastAccumulation();

// W [K,N] row-major float32 -> quantised [N,K] bytes and scales: INT8 per output channel
// (scale = max_k |W[k,n]| / 127, 1 for an all-zero column; round to nearest even, clamp to
// +-127), FP8 e4m3 per tensor (scale = max |W| / 448).
void QuantizeLinearWeight(const Tensor& w, QuantType type, std::vector<uint8_t>* q,
                          std::vector<float>* scales);

struct DeviceFreeDeleter {
  void operator()(void* p) const;
};
using DeviceBuffer = std::unique_ptr<void, DeviceFreeDeleter>;

// The own GEMM's arguments for `op` at `rows` on the given device operands: `w` its quantised
// weight, `scales` floats laid out as QuantScaleFloats(op) (q_out and the tile left to the caller).
QGemmArgs OwnGemmArgs(const QuantLinearOp& op, int64_t rows, const void* w, const float* scales,
                      const void* xq, const void* bias, const void* residual, void* y);

// Device operands big enough for every layer ChooseQuantGemm probes and QuantGemm::Tune times:
// weights and inputs hold bytes of moderate e4m3 (or int8) values, the rest zeros.
class QuantProbeBuffers {
 public:
  Status Allocate(int64_t rows, int64_t n, int64_t k, size_t workspace_bytes);
  // Operands for `op` at `gemm_rows` (which must fit the allocation).
  QuantGemmOperands Operands(const QuantLinearOp& op, int64_t gemm_rows) const;
  // The LayerNorm epilogue's operands for `op` at `rows`, writing y to o.out and its quantised
  // copy after it (zero gamma and beta).
  QGemmArgs::LayerNorm LayerNormOperands(const QuantLinearOp& op, int64_t rows,
                                         const QuantGemmOperands& o) const;
  size_t workspace_bytes() const { return ws_bytes_; }

 private:
  DeviceBuffer mem_;
  char *w_ = nullptr, *x_ = nullptr, *out_ = nullptr, *res_ = nullptr, *bias_ = nullptr,
       *scales_ = nullptr, *ws_ = nullptr, *ln_ = nullptr;
  size_t ws_bytes_ = 0;
  int64_t rows_ = 0, n_ = 0, k_ = 0;
};

// Chooses how `op` runs (mode from `first` on, FP8 scale form, row padding) by running its GEMM
// on `probe` at every count in `rows`; sets op->mode, scale_in_alpha, pad_rows. Unimplemented,
// listing what cuBLASLt answered for each form, when none ran at all of them.
Status ChooseQuantGemm(cublasLtHandle_t handle, const QuantProbeBuffers& probe,
                       std::span<const int64_t> rows, QuantGemmMode first, QuantLinearOp* op);

class QuantLinears {
 public:
  // The quantised Linear ops of `program` under `config` (int8/fp8 builds; empty otherwise).
  // Errors: an int8/fp8 build without a quantisation spec, a layer marked int8/fp8 whose input
  // has no calibrated threshold or whose shape cuBLASLt's INT8/FP8 kernels cannot take, a layer
  // marked with a precision this backend does not run.
  // Each layer's quantised weight comes from `stored` (the plan's, Blob::quant_weights) where it
  // holds one of the layer's type and shape (another shape is DataLoss); otherwise, with
  // `quantise_weights`, it is quantised from the graph's float32 constant (plans before blob
  // version 5; DataLoss when the plan kept no float32 data either). `quantise_weights` false:
  // the checks alone (the build quantises the weights itself, QuantisedWeightsOf).
  static Result<QuantLinears> Analyze(const ir::Graph& graph, const Program& program,
                                      const BuilderConfig& config, bool quantise_weights = true,
                                      const QuantWeights* stored = nullptr);

  // Needs a GPU: chooses how each op's GEMM runs (ChooseQuantGemm), drops the ops cuBLASLt runs
  // in no form (they run FP16; FallbackReason says why), copies weights and scales to the device.
  Status Prepare(cublasLtHandle_t handle, size_t workspace_bytes, int64_t max_token_rows,
                 int64_t max_batch_rows);

  bool empty() const { return ops_.empty(); }
  const QuantLinearOp* Find(size_t op_index) const;
  // The quantised Linear whose input the op at `producer_op` (a LayerNorm, SkipLayerNorm or
  // Attention) writes a quantised copy of; null when none. `keeps_fp16`: the producer's FP16
  // output has other readers (or is a graph output) and must still be written.
  const QuantLinearOp* CopyFor(size_t producer_op, bool* keeps_fp16 = nullptr) const;
  // Why a layer marked int8/fp8 runs FP16 after all ("" when it does not).
  std::string FallbackReason(size_t op_index) const;
  const std::map<size_t, std::string>& fallbacks() const { return fallbacks_; }
  const std::map<size_t, QuantLinearOp>& ops() const { return ops_; }
  size_t device_bytes() const { return device_bytes_; }
  // Scratch a context needs: quantised inputs and, for INT32-mode ops, accumulators.
  struct Scratch {
    size_t xq = 0, acc = 0;  // xq: one slot
    int slots = 1;
    size_t total() const { return xq * static_cast<size_t>(slots) + acc; }
  };
  Scratch ScratchBytes(int64_t max_token_rows, int64_t max_batch_rows) const;
  // The scratch one op needs at `rows` input rows.
  static Scratch ScratchFor(const QuantLinearOp& op, int64_t rows);
  std::string Describe(const QuantLinearOp& op) const;

 private:
  std::map<size_t, QuantLinearOp> ops_;
  void PlanFusion(const ir::Graph& graph, const Program& program);
  Status TuneAll(cublasLtHandle_t handle, const QuantProbeBuffers& probe, int64_t max_token_rows,
                 int64_t max_batch_rows);

  std::map<size_t, std::string> fallbacks_;  // op index -> why it runs FP16
  // Producer op index -> (consumer op index, producer keeps its FP16 output).
  std::map<size_t, std::pair<size_t, bool>> copies_;
  DeviceBuffer device_;
  size_t device_bytes_ = 0;
};

// The weights a plan stores quantised for the layers of `q`, quantised from the graph's float32
// constants (a weight two layers read in one type, once).
QuantWeights QuantisedWeightsOf(const ir::Graph& graph, const Program& program,
                                const QuantLinears& q);
// The constants of `program.weights` read in the device type or float32: by any op but as the
// weight of a Linear that `q` runs quantised (its bias still is).
std::set<int> WeightsOutsideQuantisedGemms(const Program& program, const QuantLinears& q);
// W [N,K] quantised bytes back to floats (x scale), as [N,K] (`transpose` false) or [K,N].
Tensor DequantizeLinearWeight(const QuantWeight& q, bool transpose);

class QuantLinearRunner {
 public:
  // Allocates `sizes` of scratch (QuantLinears::ScratchBytes at the profile max).
  Status Init(const QuantLinears::Scratch& sizes);
  // y [rows, N] FP16 = act(x [rows, K] FP16 · W + bias) + residual: Quantize, then Gemm.
  Status Run(const QuantLinearOp& op, cublasLtHandle_t handle, int64_t rows, const void* x,
             const void* bias, const void* residual, void* y, void* workspace,
             size_t workspace_bytes, cudaStream_t stream);
  // x at the layer's activation step into the context's scratch (slot op.in_slot).
  Status Quantize(const QuantLinearOp& op, int64_t rows, const void* x, cudaStream_t stream);
  // Where the op before `consumer` writes its quantised input at `rows` rows (InternalError when
  // the scratch cannot hold them).
  Result<QuantizedCopy> CopyTarget(const QuantLinearOp& consumer, int64_t rows) const;
  // The context's quantised-input buffer `slot` (0 or 1).
  void* Slot(int slot) const;
  // The GEMM of `op` with the LayerNorm op.ln_op in its epilogue, at `rows`, when its bucket is
  // in op.ln_fused and the own GEMM takes these operands; `*ran` false (nothing enqueued)
  // otherwise, and the caller runs the GEMM and the LayerNorm apart. `ln`: the LayerNorm's
  // gamma, beta, epsilon and quantised copy; `y` its output.
  Status GemmLayerNorm(const QuantLinearOp& op, int64_t rows, const void* bias,
                       const void* residual, void* y, const QGemmArgs::LayerNorm& ln, void* ws,
                       size_t ws_bytes, cudaStream_t stream, bool* ran);
  // The accumulating modes' INT32 / FP32 output (null when the scratch has none): apart from
  // both slots, since a layer reading slot 1 may run in such a mode.
  void* Accumulators() const;
  // The GEMM and its epilogue on the quantised input in slot op.in_slot; with op.fp8_out the
  // output is the next op's quantised input (slot op.out_slot) and `y` is not written.
  Status Gemm(const QuantLinearOp& op, cublasLtHandle_t handle, int64_t rows, const void* bias,
              const void* residual, void* y, void* workspace, size_t workspace_bytes,
              cudaStream_t stream);

 private:
  Status RunPlan(const QuantLinearOp& op, const QuantGemm& g, bool fp8_out, cublasLtHandle_t handle,
                 int64_t rows, const void* xq, const void* bias, const void* residual, void* y,
                 void* workspace, size_t workspace_bytes, cudaStream_t stream);

  // (op, rows, fp8_out as planned) -> plan; a refused fp8_out plan falls back to FP16 + Quantize.
  std::map<std::tuple<size_t, int64_t, bool>, std::unique_ptr<QuantGemm>> plans_;
  std::set<std::pair<size_t, int64_t>> fp8_refused_;  // (op, rows) cuBLASLt ran no e4m3 D for
  DeviceBuffer scratch_;
  size_t xq_bytes_ = 0, acc_bytes_ = 0;
  int slots_ = 1;
};

}  // namespace surge::engine::cuda
