// GEMMs through cuBLASLt for the surge::Linear op: Y[M,N] = X[M,K] · W[K,N] (+ bias[N]) with a
// fused epilogue, row-major FP16/BF16 operands, float32 accumulation.
//
// cuBLASLt is column-major, so a row-major Y = X·W is computed as Yᵀ = Wᵀ·Xᵀ with no transposes:
// W (row-major [K,N]) is the column-major [N,K] matrix A, X is B, and the bias runs along D's
// rows (N). The residual form (D = X·W + bias + R, no activation) passes R as C with beta = 1.
//
// A GemmPlan owns the cuBLASLt descriptors for one (shape, epilogue) and the algorithm used. Run
// sets the bias pointer on its descriptor, so a plan belongs to one execution context (one thread
// at a time). Algorithms are chosen by timing the
// top heuristic candidates (TuneGemm) and remembered in a timing cache file.
#pragma once

#include <cublasLt.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/backends/cuda/kernel_common.h"

namespace surge::engine::cuda {

enum class GemmEpilogue { kNone, kBias, kBiasGeluTanh };

struct GemmDesc {
  DataType dtype = DataType::kF16;
  int64_t m = 0, n = 0, k = 0;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  bool residual = false;  // D = ... + R (only with kNone/kBias)
  // W stored transposed, [N,K] row-major (K-major, cuBLAS "TN" like torch.nn.Linear) instead of
  // [K,N]; Lower times both and keeps the faster.
  bool weight_nk = false;

  // Stable text key for caches: "f16 m=128 n=768 k=768 epi=1 res=0 wt=0".
  std::string Key() const;
};

// cuBLASLt's opaque algorithm, kept as bytes so it can be stored in plans and cache files.
struct GemmAlgo {
  bool valid = false;
  cublasLtMatmulAlgo_t algo{};
  float time_us = 0.f;  // measured when tuned
  // >= 0: not cuBLASLt but the FP16 GEMM of our own (qgemm_kernels.h, QGemmArgs::half) at this
  // tile, launched with programmatic dependent launch (FP16, weights [N,K] only); ToHex writes
  // it as "own<tile>".
  int own_tile = -1;

  std::string ToHex() const;
  static bool FromHex(const std::string& hex, GemmAlgo* out);
};

class GemmPlan {
 public:
  // Builds the descriptors; with `algo` invalid or not applicable to this shape, the best
  // heuristic choice is used. Errors name the shape.
  static Result<std::unique_ptr<GemmPlan>> Create(cublasLtHandle_t handle, const GemmDesc& desc,
                                                  const GemmAlgo& algo, size_t workspace_bytes);
  ~GemmPlan();

  // x [m,k], w [k,n], bias [n] or null, residual [m,n] or null, y [m,n].
  Status Run(cublasLtHandle_t handle, const void* x, const void* w, const void* bias,
             const void* residual, void* y, void* workspace, size_t workspace_bytes,
             cudaStream_t stream) const;
  // Run with another algorithm for the same descriptors (tactic timing); `algo` must have passed
  // Accepts.
  Status RunWith(const cublasLtMatmulAlgo_t& algo, cublasLtHandle_t handle, const void* x,
                 const void* w, const void* bias, const void* residual, void* y, void* workspace,
                 size_t workspace_bytes, cudaStream_t stream) const;
  // Whether cuBLASLt runs `algo` on these descriptors within `workspace_bytes`.
  bool Accepts(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo,
               size_t workspace_bytes) const;
  const GemmDesc& desc() const { return desc_; }
  const cublasLtMatmulAlgo_t& algo() const { return algo_; }
  // The own GEMM's tile Run uses, or -1 for cuBLASLt's algo().
  int own_tile() const { return own_tile_; }

 private:
  GemmPlan() = default;
  GemmDesc desc_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  int own_tile_ = -1;
};

// Whether the FP16 GEMM of our own can run `desc` at `tile` (FP16, weight [N,K], an sm_90 GPU,
// N and K multiples of 16).
bool OwnGemmRuns(const GemmDesc& desc, int tile);

// Up to `max_candidates` heuristic algorithms for `desc`, in cuBLASLt's order of preference.
Result<std::vector<GemmAlgo>> GemmHeuristics(cublasLtHandle_t handle, const GemmDesc& desc,
                                             size_t workspace_bytes, int max_candidates);

// With SURGE_CUDA_OWN_GEMM=1, TuneGemm also times the FP16 GEMM of our own (OwnGemmRuns) at
// each of its tiles beside cuBLASLt's fastest, in the same rounds, and keeps it where it is faster
// and its output matches cuBLASLt's. The aim: at few rows the quantised form of that GEMM ties
// cuBLASLt's kernels alone, and unlike them it lets the kernel after it start early (programmatic
// dependent launch), which a CUDA graph of a small batch's encoder turns into time (docs/perf.md,
// 2026-12-07). Off by default until measured in whole plans; a plan tuned with it runs it
// whatever the setting.
//
// How widely TuneGemm looks. kHeuristic: cuBLASLt's top heuristic candidates (16 and split-K
// variants where few rows meet a large weight, else 12). kFull also searches their
// neighbourhood: the configurations with one of tile, thread-block cluster shape, custom option
// or (few rows) K split changed, around the fastest four so far, twice, each screened quickly
// (ScreenCandidates), the fastest eight then timed in full beside the heuristic's own. A few
// hundred configurations, 0.5 to 3.5 s per GEMM shape on an H100 (each new configuration loads
// its kernel once). A configuration the heuristic did not propose is chosen only if its output
// matches the heuristic's first choice on the same operands.
enum class TacticSearch { kHeuristic, kFull };

// What a tuning looked at.
struct TuneReport {
  size_t candidates = 0;            // configurations considered
  size_t heuristic_candidates = 0;  // of which the heuristic's (that ran)
  size_t screened = 0;              // screened by a full search
  GemmAlgo heuristic_best;          // the fastest of the heuristic's, with its time
};

// Times the candidates of `search` on random operands of `desc`'s shape and returns the fastest.
// Each sample is a run of back-to-back launches queued behind a delay kernel and timed with CUDA
// events (median of three, the candidates sampled in rounds: TimeInterleaved), so the time is the
// device's, as in a CUDA-graph replay, not the host's launch rate. Needs a GPU.
Result<GemmAlgo> TuneGemm(cublasLtHandle_t handle, const GemmDesc& desc, size_t workspace_bytes,
                          cudaStream_t stream, TacticSearch search = TacticSearch::kHeuristic,
                          TuneReport* report = nullptr);

// Device time of one call of `run`, in microseconds: one call for an estimate, then the median of
// three samples of back-to-back calls (about 300 us each, 2 to 24 calls) queued behind a delay
// kernel and timed with CUDA events on `stream`. `run` must enqueue on `stream` only; its failure
// is returned.
Result<float> TimeBackToBack(const std::function<Status()>& run, cudaStream_t stream);

// TimeBackToBack for several candidates at once, their samples taken in rounds (every round one
// sample of each candidate in turn), so that a passing change of the device's pace (clocks, power,
// another process) lands in one sample of several candidates instead of in every sample of one and
// the medians compare like with like. A candidate whose call fails gets +infinity (its status in
// `failures` when given); errors of the timing itself are returned. `rounds` samples each (the
// median is taken).
Result<std::vector<float>> TimeInterleaved(const std::vector<std::function<Status()>>& runs,
                                           cudaStream_t stream,
                                           std::vector<Status>* failures = nullptr, int rounds = 3);

// A quick first pass over many candidates: each one's device time (us) from 1 to 4 back-to-back
// calls (about 20 us, from the first candidate's time), batches of candidates queued behind one
// delay kernel and timed with an event pair each; +infinity for a failed call. Noisier than
// TimeInterleaved: it ranks candidates for it, it does not replace it.
Result<std::vector<float>> ScreenCandidates(const std::vector<std::function<Status()>>& runs,
                                            cudaStream_t stream);

// What a tuning is valid for: the current device's architecture and name and cuBLASLt's version.
std::string DeviceKey();

// The timing cache file: one line per tuned GEMM, "<device key> <desc key> <algo hex> <us>".
// Thread-safe. A missing file is empty; malformed lines are skipped. Every tuning is also kept for
// the life of the process (shared by all caches, with or without a file), so that repeated builds
// in one process (the accuracy guard builds one plan per candidate) time each GEMM once.
class TimingCache {
 public:
  explicit TimingCache(std::string path, std::string device_key);
  bool Lookup(const GemmDesc& desc, GemmAlgo* algo) const;
  void Insert(const GemmDesc& desc, const GemmAlgo& algo);
  // Writes the file (no-op without a path).
  Status Save() const;

 private:
  std::string path_;
  std::string device_key_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::string> lines_;  // full key -> "hex us"
};

}  // namespace surge::engine::cuda
