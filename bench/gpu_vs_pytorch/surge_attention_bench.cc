// The engine's attention kernel against cuDNN's fused attention (SDPA, the graph API of the cuDNN
// frontend) on the same padding-free input: BERT-class self-attention over a packed [T, 3H] QKV
// tensor (sequence b owns rows cu_seqlens[b] .. cu_seqlens[b+1]-1; Q, K and V interleaved per row),
// no mask beyond each sequence's length. cuDNN reads the same tensor through strides and ragged
// offsets (element offsets of each sequence), with a padding mask from the sequence lengths.
//
//   surge_attention_bench [--cases 128x128,32x128,8x128,1x128,128x64] [--heads 12] [--dim 64]
//                         [--varlen] [--reps 20]
// A case is BATCHxSEQ: BATCH sequences of SEQ tokens (--varlen: lengths drawn from SEQ/2 .. SEQ).
// Prints one JSON object: per case, µs per call of each side (median of 7 samples of `reps` calls,
// replayed from a CUDA graph and launched eagerly; -1 where that failed), and how close cuDNN's
// output is to the engine's (max |Δ|, cosine).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_cuda.h"
#include "engine/backends/cuda/attention_kernels.h"

namespace surge::engine::cuda {
namespace {

namespace fe = cudnn_frontend;
using nlohmann::json;

struct Case {
  std::string name;
  int batch = 0, seq = 0;
};

bool ParseCases(const std::string& s, std::vector<Case>* out) {
  out->clear();
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    Case c;
    char x = 0, extra = 0;
    if (std::sscanf(item.c_str(), "%d%c%d%c", &c.batch, &x, &c.seq, &extra) != 3 || x != 'x' ||
        c.batch <= 0 || c.seq <= 0) {
      return false;
    }
    c.name = item;
    out->push_back(c);
  }
  return !out->empty();
}

// The median over 7 samples of µs per call, each sample one `enqueue` (which issues `reps` calls)
// between two events; -1 when `enqueue` fails.
double MedianUs(const std::function<bool()>& enqueue, int reps, cudaStream_t stream) {
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<double> us;
  bool ok = true;
  for (int s = 0; s < 7 && ok; ++s) {
    CHECK_CUDA(cudaEventRecord(e0, stream));
    ok = enqueue();
    CHECK_CUDA(cudaEventRecord(e1, stream));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    us.push_back(1000.0 * ms / reps);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  if (!ok) return -1;
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// µs per call of `fn` launched eagerly; -1 when a call fails.
double TimeEager(const std::function<bool()>& fn, int reps, cudaStream_t stream) {
  if (!fn()) return -1;
  return MedianUs(
      [&] {
        for (int i = 0; i < reps; ++i) {
          if (!fn()) return false;
        }
        return true;
      },
      reps, stream);
}

// µs per call of `fn`, `reps` calls captured in a CUDA graph and replayed; -1 when the calls
// cannot be captured.
double TimeGraph(const std::function<bool()>& fn, int reps, cudaStream_t stream) {
  if (!fn()) return -1;
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  bool ok = true;
  for (int i = 0; i < reps && ok; ++i) ok = fn();
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!ok || end != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    return -1;
  }
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));  // warm
  const double us =
      MedianUs([&] { return cudaGraphLaunch(exec, stream) == cudaSuccess; }, reps, stream);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return us;
}

// cuDNN's SDPA over the packed QKV tensor: one graph per (batch, longest sequence).
class CudnnAttention {
 public:
  enum Uid : int64_t { kQ = 1, kK, kV, kO, kSeqQ, kSeqKv, kRaggedQkv, kRaggedO };

  // Empty string on success, else what failed.
  std::string Build(cudnnHandle_t handle, int batch, int seq, int heads, int dim, float scale) {
    graph_ = std::make_shared<fe::graph::Graph>();
    graph_->set_io_data_type(fe::DataType_t::HALF)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    const int64_t b = batch, h = heads, s = seq, d = dim, row = 3 * h * d;
    auto index = [&](const char* name, int64_t uid, int64_t n) {
      return graph_->tensor(fe::graph::Tensor_attributes()
                                .set_name(name)
                                .set_uid(uid)
                                .set_dim({n, 1, 1, 1})
                                .set_stride({1, 1, 1, 1})
                                .set_data_type(fe::DataType_t::INT32));
    };
    auto ragged_qkv = index("ragged_qkv", kRaggedQkv, b + 1);
    auto ragged_o = index("ragged_o", kRaggedO, b + 1);
    auto seq_q = index("seq_q", kSeqQ, b);
    auto seq_kv = index("seq_kv", kSeqKv, b);
    auto input = [&](const char* name, int64_t uid) {
      return graph_->tensor(fe::graph::Tensor_attributes()
                                .set_name(name)
                                .set_uid(uid)
                                .set_dim({b, h, s, d})
                                .set_stride({s * row, d, row, 1})
                                .set_ragged_offset(ragged_qkv));
    };
    auto q = input("Q", kQ), k = input("K", kK), v = input("V", kV);
    auto options = fe::graph::SDPA_attributes()
                       .set_name("sdpa")
                       .set_generate_stats(false)
                       .set_attn_scale(scale)
                       .set_padding_mask(true)
                       .set_seq_len_q(seq_q)
                       .set_seq_len_kv(seq_kv);
    auto [o, stats] = graph_->sdpa(q, k, v, options);
    (void)stats;
    o->set_output(true)
        .set_uid(kO)
        .set_dim({b, h, s, d})
        .set_stride({s * h * d, d, h * d, 1})
        .set_ragged_offset(ragged_o);
    for (const auto& step : std::vector<std::function<fe::error_t()>>{
             [&] { return graph_->validate(); },
             [&] { return graph_->build_operation_graph(handle); },
             [&] { return graph_->create_execution_plans({fe::HeurMode_t::A}); },
             [&] { return graph_->check_support(handle); },
             [&] { return graph_->build_plans(handle); },
         }) {
      fe::error_t e = step();
      if (e.is_bad()) return e.get_message();
    }
    int64_t ws = 0;
    if (graph_->get_workspace_size(ws).is_bad()) return "workspace size";
    workspace_bytes_ = static_cast<size_t>(ws);
    return "";
  }
  size_t workspace_bytes() const { return workspace_bytes_; }

  bool Run(cudnnHandle_t handle, std::unordered_map<int64_t, void*>& pack, void* workspace) {
    return graph_->execute(handle, pack, workspace).is_good();
  }

 private:
  std::shared_ptr<fe::graph::Graph> graph_;
  size_t workspace_bytes_ = 0;
};

int Main(int argc, char** argv) {
  std::string cases_arg = "128x128,32x128,8x128,1x128,128x64";
  int heads = 12, dim = 64, reps = 20;
  bool varlen = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = true;
    if (arg == "--varlen") {
      varlen = true;
    } else if (v == nullptr) {
      ok = false;
    } else if (arg == "--cases") {
      cases_arg = v, ++i;
    } else if (arg == "--heads") {
      heads = std::atoi(v), ++i;
    } else if (arg == "--dim") {
      dim = std::atoi(v), ++i;
    } else if (arg == "--reps") {
      reps = std::atoi(v), ++i;
    } else {
      ok = false;
    }
    if (!ok || heads <= 0 || reps <= 0 || !AttentionHeadDimSupported(dim)) {
      std::fprintf(stderr,
                   "usage: surge_attention_bench [--cases 128x128,...] [--heads H] [--dim 16|32|64|"
                   "128] [--varlen] [--reps R]\n");
      return 2;
    }
  }
  std::vector<Case> cases;
  if (!ParseCases(cases_arg, &cases)) {
    std::fprintf(stderr, "--cases: BATCHxSEQ[,BATCHxSEQ...], not '%s'\n", cases_arg.c_str());
    return 2;
  }
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cudnnHandle_t handle = nullptr;
  if (cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnnCreate failed\n");
    return 1;
  }
  cudnnSetStream(handle, stream);
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  json doc = {{"device", prop.name}, {"cudnn_version", static_cast<int64_t>(cudnnGetVersion())},
              {"heads", heads},      {"dim", dim},
              {"varlen", varlen},    {"results", json::array()}};
  std::mt19937 rng(11);
  const int hidden = heads * dim;
  const float scale = 1.f / std::sqrt(static_cast<float>(dim));
  for (const Case& c : cases) {
    std::vector<int32_t> cu(c.batch + 1, 0), lens(c.batch);
    std::uniform_int_distribution<int> len_dist(std::max(1, c.seq / 2), c.seq);
    for (int b = 0; b < c.batch; ++b) {
      lens[b] = varlen ? len_dist(rng) : c.seq;
      cu[b + 1] = cu[b] + lens[b];
    }
    const int rows = cu[c.batch];
    const int longest = *std::max_element(lens.begin(), lens.end());
    std::vector<__half> h_qkv(static_cast<size_t>(rows) * 3 * hidden);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& x : h_qkv) x = __float2half(nd(rng));
    std::vector<int32_t> ragged_qkv(c.batch + 1), ragged_o(c.batch + 1);
    for (int b = 0; b <= c.batch; ++b) {
      ragged_qkv[b] = cu[b] * 3 * hidden;
      ragged_o[b] = cu[b] * hidden;
    }
    __half *qkv, *out_ours, *out_cudnn;
    int32_t *d_cu, *d_lens, *d_rqkv, *d_ro;
    const size_t out_bytes = static_cast<size_t>(rows) * hidden * sizeof(__half);
    CHECK_CUDA(cudaMalloc(&qkv, h_qkv.size() * sizeof(__half)));
    CHECK_CUDA(cudaMalloc(&out_ours, out_bytes));
    CHECK_CUDA(cudaMalloc(&out_cudnn, out_bytes));
    CHECK_CUDA(cudaMalloc(&d_cu, cu.size() * 4));
    CHECK_CUDA(cudaMalloc(&d_lens, lens.size() * 4));
    CHECK_CUDA(cudaMalloc(&d_rqkv, ragged_qkv.size() * 4));
    CHECK_CUDA(cudaMalloc(&d_ro, ragged_o.size() * 4));
    CHECK_CUDA(cudaMemcpy(qkv, h_qkv.data(), h_qkv.size() * sizeof(__half), cudaMemcpyDefault));
    CHECK_CUDA(cudaMemcpy(d_cu, cu.data(), cu.size() * 4, cudaMemcpyDefault));
    CHECK_CUDA(cudaMemcpy(d_lens, lens.data(), lens.size() * 4, cudaMemcpyDefault));
    CHECK_CUDA(cudaMemcpy(d_rqkv, ragged_qkv.data(), ragged_qkv.size() * 4, cudaMemcpyDefault));
    CHECK_CUDA(cudaMemcpy(d_ro, ragged_o.data(), ragged_o.size() * 4, cudaMemcpyDefault));
    CHECK_CUDA(cudaMemset(out_ours, 0, out_bytes));
    CHECK_CUDA(cudaMemset(out_cudnn, 0, out_bytes));

    AttentionArgs a;
    a.dtype = DataType::kF16;
    a.batch = c.batch;
    a.seq = longest;
    a.num_heads = heads;
    a.head_dim = dim;
    a.scale = scale;
    a.cu_seqlens = d_cu;
    a.qkv = qkv;
    a.out = out_ours;
    json r = {{"case", c.name}, {"rows", rows}};
    if (!AttentionCanImplement(a)) {
      r["error"] = "the engine's kernel cannot run this case";
      doc["results"].push_back(r);
      continue;
    }
    auto ours = [&] { return AttentionRun(a, nullptr, stream) == cudaSuccess; };
    r["surge_us"] = TimeGraph(ours, reps, stream);
    r["surge_eager_us"] = TimeEager(ours, reps, stream);

    CudnnAttention cudnn;
    const std::string why = cudnn.Build(handle, c.batch, longest, heads, dim, scale);
    if (!why.empty()) {
      r["cudnn_error"] = why;
    } else {
      void* ws = nullptr;
      if (cudnn.workspace_bytes() > 0) CHECK_CUDA(cudaMalloc(&ws, cudnn.workspace_bytes()));
      std::unordered_map<int64_t, void*> pack = {
          {CudnnAttention::kQ, qkv},
          {CudnnAttention::kK, qkv + hidden},
          {CudnnAttention::kV, qkv + 2 * hidden},
          {CudnnAttention::kO, out_cudnn},
          {CudnnAttention::kSeqQ, d_lens},
          {CudnnAttention::kSeqKv, d_lens},
          {CudnnAttention::kRaggedQkv, d_rqkv},
          {CudnnAttention::kRaggedO, d_ro},
      };
      auto run = [&] { return cudnn.Run(handle, pack, ws); };
      r["cudnn_us"] = TimeGraph(run, reps, stream);  // -1: cuDNN's calls could not be captured
      r["cudnn_eager_us"] = TimeEager(run, reps, stream);
      CHECK_CUDA(cudaStreamSynchronize(stream));
      std::vector<__half> o1(static_cast<size_t>(rows) * hidden), o2(o1.size());
      CHECK_CUDA(cudaMemcpy(o1.data(), out_ours, out_bytes, cudaMemcpyDefault));
      CHECK_CUDA(cudaMemcpy(o2.data(), out_cudnn, out_bytes, cudaMemcpyDefault));
      double dot = 0, n1 = 0, n2 = 0, max_diff = 0;
      for (size_t i = 0; i < o1.size(); ++i) {
        const double x = __half2float(o1[i]), y = __half2float(o2[i]);
        dot += x * y, n1 += x * x, n2 += y * y;
        max_diff = std::max(max_diff, std::fabs(x - y));
      }
      r["max_abs_diff"] = max_diff;
      r["cosine"] = dot / std::sqrt(std::max(n1 * n2, 1e-30));
      r["cudnn_workspace_bytes"] = cudnn.workspace_bytes();
      if (ws != nullptr) cudaFree(ws);
    }
    std::fprintf(stderr, "%s\n", r.dump().c_str());
    doc["results"].push_back(r);
    for (void* p :
         std::initializer_list<void*>{qkv, out_ours, out_cudnn, d_cu, d_lens, d_rqkv, d_ro}) {
      cudaFree(p);
    }
  }
  std::printf("%s\n", doc.dump(1).c_str());
  cudnnDestroy(handle);
  return 0;
}

}  // namespace
}  // namespace surge::engine::cuda

int main(int argc, char** argv) { return surge::engine::cuda::Main(argc, argv); }
