// Lowering of an optimised graph to the CUDA backend's program: which kernel runs each node, the
// row domain of every activation (token rows [B*S or packed T, C] or batch rows [B, C]), the
// weights converted to the device precision, and the plan blob that stores them with the GEMM
// tactics. Shared by Lower (build time) and Load (run time). Host-only code; no GPU needed.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "engine/backends/cuda/gemm.h"
#include "engine/backends/cuda/kernel_common.h"
#include "engine/ir/graph.h"
#include "engine/runtime/backend.h"

namespace surge::engine::cuda {

enum class OpKind {
  kEmbedLayerNorm,
  kLinear,
  kLayerNorm,
  kSkipLayerNorm,
  kGelu,
  kAttention,
  kGatherFirst,
  kL2Normalize,
  kSqueeze  // drops the last axis of a one-column activation (a device copy)
};
// Token rows follow the tokens (B*S padded, T packed); batch rows are one per sequence.
enum class RowDomain { kTokens, kBatch };

struct LoweredOp {
  OpKind kind;
  int node = -1;             // index into graph.nodes
  std::vector<int> inputs;   // value ids (-1: absent), node order
  std::vector<int> outputs;  // value ids (-1: unused)
  int cols = 0;              // output columns
  int k = 0;                 // Linear: input columns
  Activation activation = Activation::kNone;
  float epsilon = 1e-5f;
  bool eps_max = false;  // L2Normalize: x / max(||x||, epsilon) instead of x / sqrt(||x||^2 + eps)
  int num_heads = 0, head_dim = 0;
  float scale = 0.f;
  bool weight_nk = false;  // Linear: W stored [N,K] (see GemmDesc::weight_nk)
  // Linear: inputs[3] is a residual taken over from the SkipLayerNorm that follows (added through
  // the GEMM's C matrix, beta = 1); LayerNorm: that SkipLayerNorm, now reading one input.
  bool fused_residual = false;
  // Only each sequence's first token reaches the outputs through this op (see
  // KeepFirstTokenOnly): Attention computes the first query only and writes [B,H]; Linear,
  // LayerNorm and Gelu run on those rows ([B,C], gathered from token rows) as token-row ops.
  bool first_token_only = false;
};

struct ActivationInfo {
  RowDomain domain = RowDomain::kTokens;
  int cols = 0;
  // One column without its axis: a graph output of shape [B,S] (tokens) or [B] (batch).
  bool squeezed = false;
};

struct Program {
  DataType dtype = DataType::kF16;
  bool padding_free = false;  // packing allowed (config on and the graph has a mask input)
  // Exact erf GELU after token-row Linears (a separate pass) instead of cuBLASLt's fused
  // tanh-form GELU epilogue; see LinearGemm.
  bool exact_gelu = false;
  // Graph inputs by role (value ids, -1 when absent) and their graph-input positions.
  int input_ids = -1, token_type_ids = -1, position_ids = -1, mask = -1;
  std::map<int, int> input_position;  // value id -> position in graph.inputs
  std::string ids_name;               // the input the profile is looked up by
  std::string position_mode = "arange";
  int64_t padding_idx = 1;
  int64_t vocab = 0, max_positions = 0, type_vocab = 0;
  std::vector<LoweredOp> ops;
  std::map<int, ActivationInfo> activations;  // every non-constant, non-input value
  // Constants the kernels read: value id -> true when kept in float32 (LayerNorm gamma/beta),
  // false when converted to `dtype`.
  std::map<int, bool> weights;
  // Ops run on the first token rows only (LoweredOp::first_token_only); the row gathers this
  // adds write activations with ids from `graph.values.size()` up.
  bool first_token_only = false;
};

// Checks that every node has a CUDA kernel and derives the program. Errors name the node and op
// and list what is supported. A SkipLayerNorm whose X (or skip) is the only use of a Linear
// without activation becomes a LayerNorm, the other operand moving into that Linear as its
// residual (one read fewer per token row; see LoweredOp::fused_residual).
//
// With `first_token_only`: where the outputs read the last encoder layer only through a Gather of
// token 0 (a [CLS] pooler or classifier head), the Linear, LayerNorm and Gelu ops between the
// last attention and that Gather run on each sequence's first token row instead of every token
// (BERT-base: the last layer's projection, FFN and LayerNorms, a twelfth of the GEMM work), the
// attention computes the first query only, and a value those ops read from other token rows (a
// residual) is gathered first. Outputs that read every token (a per-token head, the last hidden
// state) keep the ops on every row. The result is the same function of the inputs: the rows
// left out reach no output.
Result<Program> AnalyzeGraph(const ir::Graph& graph, const BuilderConfig& config,
                             bool first_token_only = false);

// The device precision for a BuilderConfig precision (fp16 / bf16; fp32 builds use fp16 kernels
// with float32 statistics is not offered: it is an error naming the valid choices).
Result<DataType> DeviceType(Precision precision);

// Tactic key of a GEMM: its shape without the row count, plus the row count it was tuned at
// ("<shape> rows=R"). Plans of blob version 3 and before keyed by the row count's power-of-two
// floor ("<shape> mb=B").
std::string TacticKey(const GemmDesc& desc);
// The row-count bucket floor(log2 m) (0 for m <= 1), as the quantised layers' load-time tunings
// are keyed.
int RowBucket(int64_t m);

// Row counts Lower tunes every GEMM at, up to `max_rows` (always included): powers of two from 32
// and, from 1024 rows up, where a GEMM's tiles fill the card in waves, more per octave (2^(b+j/n),
// rounded up to a multiple of 32): n = 8 below 8192 rows, where one to a few waves make the step
// to the next tuned count matter most (a call does about 9 % more work at most than its own row
// count needs), n = 4 above. The profile's opt shape and one sequence are tuned exactly besides.
std::vector<int64_t> GemmTuningRows(int64_t max_rows);

// A plan's tuned GEMM algorithms by shape and row count. A GEMM of m rows runs the algorithm tuned
// at the smallest tuned row count >= m (the largest beyond them all): a tiling's time only grows
// with the rows, so the choice costs at most the best time at that count. (Tuned at the row count
// below, a tiling that fits the card's waves there can need a whole extra wave a few rows later:
// 2656 rows ran 2048's algorithms as slowly as 4096 rows.) Plans keyed by power-of-two floors
// keep their floor meaning.
class TacticTable {
 public:
  TacticTable() = default;
  // Keys as TacticKey makes them, or the "mb=" keys of older plans; other keys are an error.
  static Result<TacticTable> FromBlob(const std::map<std::string, GemmAlgo>& tactics);
  // `tuned_rows`, when given, receives the row count (or power-of-two floor) of the tuning found.
  const GemmAlgo* Find(const GemmDesc& desc, int64_t* tuned_rows = nullptr) const;
  // The tunings of `desc`'s shape by row count (null when it has none), and whether they are
  // power-of-two floors (row count 2^B stands for B).
  const std::map<int64_t, GemmAlgo>* Rows(const GemmDesc& desc, bool* floors) const;
  // Whether `desc` with its weight in the other layout ([K,N] for [N,K] and back) has a tuning
  // at the row count Find uses for `desc`, measured faster than `desc`'s own there. False when
  // either has none or they were tuned at different row counts.
  bool OtherLayoutFaster(const GemmDesc& desc) const;

 private:
  struct Shape {
    bool floors = false;
    std::map<int64_t, GemmAlgo> by_rows;
  };
  std::map<std::string, Shape> shapes_;
};

// A Linear weight of an INT8/FP8 layer as the plan stores it: quantised bytes [N,K] row-major
// and their scales, INT8 one per output channel, FP8 e4m3 one per tensor (QuantizeLinearWeight).
struct QuantWeight {
  QuantType type = QuantType::kInt8;
  int64_t n = 0, k = 0;
  std::vector<float> scales;
  std::vector<uint8_t> bytes;
};
// Quantised weights by (value id, type): a weight two layers quantise alike is stored once.
using QuantWeights = std::map<std::pair<int, QuantType>, QuantWeight>;

struct Blob {
  DataType dtype = DataType::kF16;
  bool padding_free = true;
  std::map<int, std::vector<uint8_t>> weights;  // value id -> bytes in device layout
  std::map<std::string, GemmAlgo> tactics;      // TacticKey -> algorithm
  std::set<int> weights_nk;                     // Linear weights stored transposed, [N,K]
  // Version 6 on: Linear weights the engine also holds in the other layout (transposed at load,
  // not stored twice); each GEMM on them runs the layout tuned faster at the call's row count.
  std::set<int> weights_both;
  // Version 6 on: the program runs the last layer on first token rows (AnalyzeGraph's
  // `first_token_only`); Load analyses the graph as Lower did.
  bool first_token_only = false;
  bool exact_gelu = true;  // Program::exact_gelu the plan was built with
  // Version 5 on: the INT8/FP8 layers' weights, quantised at build. Such a weight has no entry in
  // `weights` unless a layer running FP16 reads it too; plans before version 5 held every weight
  // there and in the graph as float32, and quantised at load.
  QuantWeights quant_weights;
};

// W [K,N] -> [N,K] (float32).
Tensor TransposeWeight(const Tensor& w);

// `desc` with its weight in the other layout.
GemmDesc OtherLayout(GemmDesc desc);
// The Linear weights worth holding in both layouts: those for which, at one of `shapes` (token
// rows, batch rows), a Linear reading the weight runs at least `min_gain` (a fraction) faster
// in the other layout than in the one stored, both as tuned in `tactics` (TacticKey). A weight
// whose other layout lacks a tuning at any of the shapes is not one.
std::set<int> WeightsWorthBothLayouts(const Program& program,
                                      const std::map<std::string, GemmAlgo>& tactics,
                                      const std::vector<std::pair<int64_t, int64_t>>& shapes,
                                      double min_gain);

std::string SerializeBlob(const Blob& blob);
// DataLoss naming what is wrong on truncated or corrupt bytes.
Result<Blob> ParseBlob(std::span<const uint8_t> bytes);
// The value ids of the weights a blob holds, converted or quantised (their bytes skipped, not
// copied).
Result<std::vector<int>> BlobWeightIds(std::span<const uint8_t> bytes);

// Converts a float32/float16/bfloat16/float64 constant to the bytes the kernels read (float32 or
// `dtype`).
Result<std::vector<uint8_t>> ConvertWeight(const Tensor& t, bool keep_float32, DataType dtype);

// The Linear GEMM shapes of `program` at `rows` token rows (batch-domain GEMMs at `batch` rows).
std::vector<GemmDesc> LinearGemms(const Program& program, int64_t token_rows, int64_t batch_rows);
// One Linear op's GEMM there (LinearGemm at the op's row domain's count).
GemmDesc LinearGemmAt(const Program& program, const LoweredOp& op, int64_t token_rows,
                      int64_t batch_rows);
// The GEMM run for one Linear op at `rows` rows, and whether a separate bias/activation/residual
// pass follows it. Bias, residual (C, beta = 1) and tanh-form GELU are cuBLASLt epilogues; erf
// GELU on token rows uses the tanh-form epilogue unless program.exact_gelu (the two differ by at
// most 4.7e-4 absolute, at x = -2.7: less than FP16's rounding of outputs of magnitude >= 1, see
// bench/gpu_vs_pytorch/NOTES.md); on batch rows (heads) it stays exact, as tanh and relu do
// (a separate pass over few rows).
GemmDesc LinearGemm(const Program& program, const LoweredOp& op, int64_t rows,
                    bool* needs_epilogue_kernel);

}  // namespace surge::engine::cuda
