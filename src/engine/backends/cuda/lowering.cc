#include "engine/backends/cuda/lowering.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>

#include "engine/backends/cuda/attention_kernels.h"
#include "engine/backends/cuda/host_convert.h"
#include "engine/backends/cuda/qgemm_kernels.h"
#include "engine/ir/op_schema.h"

namespace surge::engine::cuda {
namespace {

constexpr char kBlobMagic[8] = {'S', 'G', 'C', 'U', 'D', 'A', '0', '1'};
constexpr uint32_t kBlobVersion = 7;

std::string Label(const ir::Node& n) {
  return fmt::format("node '{}' ({}{}{})", n.name, n.domain,
                     n.domain.empty() ? "" : "::", n.op_type);
}

Status Unsupported(const ir::Node& n, std::string_view why) {
  return UnimplementedError(
      "cuda backend: {} is not supported: {}. The cuda backend runs fused encoder graphs "
      "(surge EmbedLayerNorm, Linear, LayerNorm, SkipLayerNorm, Gelu, Attention, and Gather of "
      "token 0 along axis 1); build with --backend cpu for other graphs",
      Label(n), why);
}

Result<Activation> ParseActivation(const ir::Node& n, const std::string& s) {
  if (s == "none") return Activation::kNone;
  if (s == "gelu") return Activation::kGelu;
  if (s == "gelu_tanh") return Activation::kGeluTanh;
  if (s == "tanh") return Activation::kTanh;
  if (s == "relu") return Activation::kRelu;
  return InvalidArgumentError("{}: unknown activation '{}'", Label(n), s);
}

int64_t StaticLastDim(const ir::Value& v) {
  if (!v.shape || v.shape->empty() || !v.shape->back().IsStatic()) return -1;
  return v.shape->back().StaticValue();
}

// Writers/readers for the blob: little-endian host order, every read bounds-checked.
void PutU32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string* s, uint64_t v) { s->append(reinterpret_cast<const char*>(&v), 8); }

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  Status Read(void* dst, size_t n, std::string_view what) {
    if (n > b_.size() - pos_) {
      return DataLossError(
          "cuda plan blob truncated reading {} at offset {} ({} bytes left, {} "
          "needed)",
          what, pos_, b_.size() - pos_, n);
    }
    std::memcpy(dst, b_.data() + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  size_t left() const { return b_.size() - pos_; }
  Status Skip(size_t n, std::string_view what) {
    if (n > left()) {
      return DataLossError(
          "cuda plan blob truncated skipping {} at offset {} ({} bytes left, {} "
          "needed)",
          what, pos_, left(), n);
    }
    pos_ += n;
    return Status::Ok();
  }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

// Residual through the GEMM: Linear(X, W, b) -> SkipLayerNorm(that, skip, gamma, beta, bias?)
// becomes Linear(X, W, b + bias, R = skip) -> LayerNorm(that, gamma, beta) when the Linear has
// no activation and no residual, its output has no other reader, and the sum output is unused.
void FuseResiduals(const ir::Graph& g, Program* p) {
  std::map<int, int> uses;  // value -> readers (ops and graph outputs)
  std::map<int, size_t> producer;
  for (size_t i = 0; i < p->ops.size(); ++i) {
    for (int v : p->ops[i].inputs) {
      if (v >= 0) ++uses[v];
    }
    for (int v : p->ops[i].outputs) {
      if (v >= 0) producer[v] = i;
    }
  }
  for (int v : g.outputs) ++uses[v];
  for (LoweredOp& ln : p->ops) {
    if (ln.kind != OpKind::kSkipLayerNorm) continue;
    const int sum_out = ln.outputs.size() > 1 ? ln.outputs[1] : -1;
    if (sum_out >= 0 && uses[sum_out] > 0) continue;
    const int bias = ln.inputs.size() > 4 ? ln.inputs[4] : -1;
    for (int side = 0; side < 2; ++side) {
      const int x = ln.inputs[side], skip = ln.inputs[1 - side];
      auto it = producer.find(x);
      if (it == producer.end() || uses[x] != 1) continue;
      LoweredOp& lin = p->ops[it->second];
      if (lin.kind != OpKind::kLinear || lin.activation != Activation::kNone) continue;
      lin.inputs.resize(4, -1);
      if (lin.inputs[3] >= 0 || (bias >= 0 && lin.inputs[2] >= 0)) continue;
      if (bias >= 0) lin.inputs[2] = bias;
      lin.inputs[3] = skip;
      lin.fused_residual = true;
      ln.kind = OpKind::kLayerNorm;
      ln.inputs = {x, ln.inputs[2], ln.inputs[3]};
      ln.outputs.resize(1);
      ln.fused_residual = true;
      break;
    }
  }
}

// AnalyzeGraph's `first_token_only`, for each Gather of token 0.
void KeepFirstTokenOnly(const ir::Graph& g, Program* p) {
  auto row_wise = [](OpKind k) {
    return k == OpKind::kLinear || k == OpKind::kLayerNorm || k == OpKind::kSkipLayerNorm ||
           k == OpKind::kGelu;
  };
  const std::set<int> graph_outputs(g.outputs.begin(), g.outputs.end());
  int next_id = static_cast<int>(g.values.size());
  for (size_t gi = 0; gi < p->ops.size(); ++gi) {
    if (p->ops[gi].kind != OpKind::kGatherFirst) continue;
    std::map<int, std::set<size_t>> readers;
    std::map<int, size_t> producer;
    for (size_t i = 0; i < p->ops.size(); ++i) {
      for (int v : p->ops[i].inputs) {
        if (v >= 0 && p->activations.count(v)) readers[v].insert(i);
      }
      for (int v : p->ops[i].outputs) {
        if (v >= 0) producer[v] = i;
      }
    }
    auto tokens = [&](int v) {
      auto it = p->activations.find(v);
      return it != p->activations.end() && it->second.domain == RowDomain::kTokens;
    };
    // The row-wise ops the gathered value depends on through row-wise ops only...
    std::set<size_t> s;
    std::vector<int> stack = {p->ops[gi].inputs[0]};
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      auto it = producer.find(v);
      if (it == producer.end() || s.count(it->second) || !row_wise(p->ops[it->second].kind) ||
          !tokens(v)) {
        continue;
      }
      s.insert(it->second);
      for (int u : p->ops[it->second].inputs) {
        if (tokens(u)) stack.push_back(u);
      }
    }
    // ... less those whose outputs something else reads (until none is left to drop).
    auto only_in = [&](int v, const std::set<size_t>& ops) {
      if (graph_outputs.count(v)) return false;
      for (size_t r : readers[v]) {
        if (r != gi && !ops.count(r)) return false;
      }
      return true;
    };
    for (bool dropped = true; dropped;) {
      dropped = false;
      for (auto it = s.begin(); it != s.end();) {
        bool keep = true;
        for (int o : p->ops[*it].outputs) {
          if (o >= 0 && !only_in(o, s)) keep = false;
        }
        if (keep) {
          ++it;
        } else {
          it = s.erase(it);
          dropped = true;
        }
      }
    }
    const int v0 = p->ops[gi].inputs[0];
    if (s.empty() || !producer.count(v0) || !s.count(producer[v0])) continue;
    // Token-row values the ops read from outside: an attention output that only they read is
    // computed for the first query only; any other is gathered.
    std::map<int, int> gathered;                       // token value -> its first rows
    std::map<size_t, std::vector<LoweredOp>> gathers;  // by the index of their first reader
    for (size_t i : s) {
      for (int& u : p->ops[i].inputs) {
        if (!tokens(u) || s.count(producer.at(u))) continue;
        LoweredOp& from = p->ops[producer.at(u)];
        if (from.kind == OpKind::kAttention && only_in(u, s)) {
          from.first_token_only = true;
          p->activations[u].domain = RowDomain::kBatch;
          continue;
        }
        auto [it, fresh] = gathered.emplace(u, next_id);
        if (fresh) {
          LoweredOp gather = p->ops[gi];
          gather.inputs = {u};
          gather.outputs = {next_id};
          gather.cols = p->activations.at(u).cols;
          p->activations[next_id] = {RowDomain::kBatch, gather.cols, false};
          gathers[i].push_back(std::move(gather));
          ++next_id;
        }
        u = it->second;
      }
    }
    // The ops now write first rows; the last one writes the Gather's output, which goes.
    const int out = p->ops[gi].outputs[0];
    for (size_t i : s) {
      LoweredOp& op = p->ops[i];
      op.first_token_only = true;
      for (int& o : op.outputs) {
        if (o == v0) o = out;
        if (o >= 0) p->activations[o].domain = RowDomain::kBatch;
      }
      for (int& u : op.inputs) {
        if (u == v0) u = out;
      }
    }
    p->activations.erase(v0);
    p->ops.erase(p->ops.begin() + static_cast<std::ptrdiff_t>(gi));
    for (auto it = gathers.rbegin(); it != gathers.rend(); ++it) {  // last first: indices hold
      p->ops.insert(p->ops.begin() + static_cast<std::ptrdiff_t>(it->first), it->second.begin(),
                    it->second.end());
    }
    p->first_token_only = true;
    gi = 0;  // indices moved: look again from the start (a Gather left reads token rows)
  }
}

}  // namespace

Result<DataType> DeviceType(Precision p) {
  if (p == Precision::kFp16) return DataType::kF16;
  if (p == Precision::kBf16) return DataType::kBF16;
  return InvalidArgumentError(
      "cuda backend: precision {} is not supported; valid: fp16, bf16 (LayerNorm and softmax "
      "statistics are float32 in both; int8 and fp8 build on fp16)",
      PrecisionName(p));
}

int RowBucket(int64_t m) {
  int bucket = 0;
  for (; m > 1; m >>= 1) ++bucket;
  return bucket;
}

namespace {

std::string ShapeKey(const GemmDesc& d) {
  GemmDesc k = d;
  k.m = 0;
  return k.Key();
}

}  // namespace

std::string TacticKey(const GemmDesc& d) { return fmt::format("{} rows={}", ShapeKey(d), d.m); }

std::vector<int64_t> GemmTuningRows(int64_t max_rows) {
  std::set<int64_t> rows;
  for (int64_t p = 32; p < max_rows; p *= 2) {
    rows.insert(p);
    const int per_octave = p < 1024 ? 1 : p < 8192 ? 8 : 4;
    for (int j = 1; j < per_octave; ++j) {
      const double r =
          std::ceil(static_cast<double>(p) * std::exp2(static_cast<double>(j) / per_octave));
      const int64_t rounded = (static_cast<int64_t>(r) + 31) / 32 * 32;
      if (rounded < max_rows) rows.insert(rounded);
    }
  }
  if (max_rows > 0) rows.insert(max_rows);
  return {rows.begin(), rows.end()};
}

Result<TacticTable> TacticTable::FromBlob(const std::map<std::string, GemmAlgo>& tactics) {
  TacticTable t;
  for (const auto& [key, algo] : tactics) {
    const size_t space = key.rfind(' ');
    const std::string tail = space == std::string::npos ? "" : key.substr(space + 1);
    const bool floors = tail.rfind("mb=", 0) == 0;
    const std::string number = tail.substr(tail.find('=') + 1);
    int64_t v = -1;
    if (floors || tail.rfind("rows=", 0) == 0) {
      const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
      if (ec != std::errc() || end != number.data() + number.size()) v = -1;
    }
    if (v < 0 || (floors && v > 62)) {
      return DataLossError("cuda plan: tactic key '{}' names no row count", key);
    }
    auto [it, fresh] = t.shapes_.try_emplace(key.substr(0, space));
    Shape& shape = it->second;
    if (!fresh && shape.floors != floors) {
      return DataLossError("cuda plan: tactic key '{}' mixes power-of-two and exact row counts",
                           key);
    }
    shape.floors = floors;
    shape.by_rows[floors ? int64_t{1} << v : v] = algo;
  }
  return t;
}

const std::map<int64_t, GemmAlgo>* TacticTable::Rows(const GemmDesc& d, bool* floors) const {
  auto it = shapes_.find(ShapeKey(d));
  if (it == shapes_.end()) return nullptr;
  if (floors) *floors = it->second.floors;
  return &it->second.by_rows;
}

const GemmAlgo* TacticTable::Find(const GemmDesc& d, int64_t* tuned_rows) const {
  bool floors = false;
  const std::map<int64_t, GemmAlgo>* rows = Rows(d, &floors);
  if (!rows || rows->empty()) return nullptr;
  auto it = floors ? rows->find(int64_t{1} << RowBucket(d.m))  // the bucket or none (heuristic)
                   : rows->lower_bound(d.m);
  if (it == rows->end()) {
    if (floors) return nullptr;
    it = std::prev(rows->end());
  }
  if (tuned_rows) *tuned_rows = it->first;
  return &it->second;
}

bool TacticTable::OtherLayoutFaster(const GemmDesc& d) const {
  int64_t own_rows = -1, other_rows = -2;
  const GemmAlgo* own = Find(d, &own_rows);
  const GemmAlgo* other = Find(OtherLayout(d), &other_rows);
  return own && other && own_rows == other_rows && own->time_us > 0 && other->time_us > 0 &&
         other->time_us < own->time_us;
}

GemmDesc OtherLayout(GemmDesc d) {
  d.weight_nk = !d.weight_nk;
  return d;
}

Result<Program> AnalyzeGraph(const ir::Graph& g, const BuilderConfig& config,
                             bool first_token_only) {
  Program p;
  SURGE_ASSIGN_OR_RETURN(p.dtype, DeviceType(config.precision));
  for (size_t i = 0; i < g.inputs.size(); ++i) p.input_position[g.inputs[i]] = static_cast<int>(i);
  auto is_input = [&](int v) { return v >= 0 && p.input_position.count(v) > 0; };
  auto is_const = [&](int v) { return v >= 0 && g.values[v].is_constant(); };
  auto act_cols = [&](int v) -> int {
    auto it = p.activations.find(v);
    return it == p.activations.end() ? -1 : it->second.cols;
  };
  auto act_domain = [&](int v) { return p.activations.at(v).domain; };
  auto need_act = [&](const ir::Node& n, int v, std::string_view what) -> Status {
    if (v < 0 || !p.activations.count(v)) {
      return Unsupported(n, fmt::format("{} must be computed by an earlier supported node", what));
    }
    if (p.activations.at(v).squeezed) {
      return Unsupported(n,
                         fmt::format("{} is a squeezed value (only graph outputs may be)", what));
    }
    return Status::Ok();
  };
  auto need_const = [&](const ir::Node& n, int v, std::string_view what, bool f32) -> Status {
    if (!is_const(v)) return Unsupported(n, fmt::format("{} must be a constant", what));
    p.weights[v] = f32;
    return Status::Ok();
  };
  auto bind_role = [&](const ir::Node& n, int v, int* role, std::string_view what) -> Status {
    if (v < 0) return Status::Ok();
    if (!is_input(v)) return Unsupported(n, fmt::format("{} must be a graph input", what));
    if (*role >= 0 && *role != v) {
      return Unsupported(n, fmt::format("a second graph input is used as {}", what));
    }
    *role = v;
    return Status::Ok();
  };

  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const ir::Node& n = g.nodes[ni];
    LoweredOp op;
    op.node = static_cast<int>(ni);
    op.inputs = n.inputs;
    op.outputs = n.outputs;
    const bool surge_op = n.domain == ir::kSurgeDomain;
    RowDomain out_domain = RowDomain::kTokens;
    if (surge_op && n.op_type == "EmbedLayerNorm") {
      op.kind = OpKind::kEmbedLayerNorm;
      if (p.input_ids >= 0) return Unsupported(n, "only one EmbedLayerNorm per graph");
      SURGE_RETURN_IF_ERROR(bind_role(n, n.input(0), &p.input_ids, "input_ids"));
      if (p.input_ids < 0) return Unsupported(n, "input_ids is required");
      SURGE_RETURN_IF_ERROR(bind_role(n, n.input(1), &p.token_type_ids, "token_type_ids"));
      SURGE_RETURN_IF_ERROR(bind_role(n, n.input(2), &p.position_ids, "position_ids"));
      SURGE_RETURN_IF_ERROR(bind_role(n, n.input(8), &p.mask, "attention_mask"));
      SURGE_RETURN_IF_ERROR(need_const(n, n.input(3), "word_emb", false));
      SURGE_RETURN_IF_ERROR(need_const(n, n.input(4), "pos_emb", false));
      if (n.input(5) >= 0) SURGE_RETURN_IF_ERROR(need_const(n, n.input(5), "type_emb", false));
      if (n.input(1) >= 0 && n.input(5) < 0) {
        return InvalidArgumentError("{}: token_type_ids given without type_emb", Label(n));
      }
      SURGE_RETURN_IF_ERROR(need_const(n, n.input(6), "gamma", true));
      SURGE_RETURN_IF_ERROR(need_const(n, n.input(7), "beta", true));
      const Tensor& word = g.values[n.input(3)].constant;
      const Tensor& pos = g.values[n.input(4)].constant;
      if (word.rank() != 2 || pos.rank() != 2 || pos.dim(1) != word.dim(1)) {
        return InvalidArgumentError("{}: word_emb {} and pos_emb {} must be [rows, H]", Label(n),
                                    ShapeToString(word.shape()), ShapeToString(pos.shape()));
      }
      op.cols = static_cast<int>(word.dim(1));
      p.vocab = word.dim(0);
      p.max_positions = pos.dim(0);
      p.type_vocab = n.input(5) >= 0 ? g.values[n.input(5)].constant.dim(0) : 0;
      op.epsilon = static_cast<float>(n.GetFloat("epsilon", 1e-12));
      p.position_mode = n.GetString("position_mode", "arange");
      if (p.position_mode != "arange" && p.position_mode != "roberta") {
        return InvalidArgumentError("{}: position_mode must be 'arange' or 'roberta', got '{}'",
                                    Label(n), p.position_mode);
      }
      p.padding_idx = n.GetInt("padding_idx", 1);
      p.ids_name = g.values[p.input_ids].name;
    } else if (surge_op && n.op_type == "Linear") {
      op.kind = OpKind::kLinear;
      SURGE_RETURN_IF_ERROR(need_act(n, n.input(0), "X"));
      SURGE_RETURN_IF_ERROR(need_const(n, n.input(1), "W", false));
      const Tensor& w = g.values[n.input(1)].constant;
      if (w.rank() != 2 || w.dim(0) != act_cols(n.input(0))) {
        return InvalidArgumentError("{}: W {} does not fit X with {} columns", Label(n),
                                    ShapeToString(w.shape()), act_cols(n.input(0)));
      }
      op.k = static_cast<int>(w.dim(0));
      op.cols = static_cast<int>(w.dim(1));
      if (n.input(2) >= 0) SURGE_RETURN_IF_ERROR(need_const(n, n.input(2), "B", false));
      if (n.input(3) >= 0) {
        SURGE_RETURN_IF_ERROR(need_act(n, n.input(3), "R"));
        if (act_cols(n.input(3)) != op.cols || act_domain(n.input(3)) != act_domain(n.input(0))) {
          return InvalidArgumentError("{}: residual does not have the output's shape", Label(n));
        }
      }
      SURGE_ASSIGN_OR_RETURN(op.activation, ParseActivation(n, n.GetString("activation", "none")));
      out_domain = act_domain(n.input(0));
    } else if (surge_op && (n.op_type == "LayerNorm" || n.op_type == "SkipLayerNorm")) {
      const bool skip = n.op_type == "SkipLayerNorm";
      op.kind = skip ? OpKind::kSkipLayerNorm : OpKind::kLayerNorm;
      SURGE_RETURN_IF_ERROR(need_act(n, n.input(0), "X"));
      op.cols = act_cols(n.input(0));
      if (skip) {
        SURGE_RETURN_IF_ERROR(need_act(n, n.input(1), "skip"));
        if (act_cols(n.input(1)) != op.cols || act_domain(n.input(1)) != act_domain(n.input(0))) {
          return InvalidArgumentError("{}: skip must have the shape of X", Label(n));
        }
      }
      const int gi = skip ? 2 : 1;
      SURGE_RETURN_IF_ERROR(need_const(n, n.input(gi), "gamma", true));
      SURGE_RETURN_IF_ERROR(need_const(n, n.input(gi + 1), "beta", true));
      if (skip && n.input(4) >= 0) SURGE_RETURN_IF_ERROR(need_const(n, n.input(4), "bias", false));
      for (int gv : {n.input(gi), n.input(gi + 1)}) {
        if (g.values[gv].constant.numel() != op.cols) {
          return InvalidArgumentError("{}: gamma/beta must have {} elements", Label(n), op.cols);
        }
      }
      op.epsilon = static_cast<float>(n.GetFloat("epsilon", 1e-5));
      out_domain = act_domain(n.input(0));
    } else if (surge_op && n.op_type == "Gelu") {
      op.kind = OpKind::kGelu;
      SURGE_RETURN_IF_ERROR(need_act(n, n.input(0), "X"));
      op.cols = act_cols(n.input(0));
      op.activation =
          n.GetString("approximate", "none") == "tanh" ? Activation::kGeluTanh : Activation::kGelu;
      out_domain = act_domain(n.input(0));
    } else if (surge_op && n.op_type == "Attention") {
      op.kind = OpKind::kAttention;
      SURGE_RETURN_IF_ERROR(need_act(n, n.input(0), "QKV"));
      if (act_domain(n.input(0)) != RowDomain::kTokens)
        return Unsupported(n, "QKV must be [B,S,3H]");
      SURGE_RETURN_IF_ERROR(bind_role(n, n.input(1), &p.mask, "mask"));
      const int three_h = act_cols(n.input(0));
      op.num_heads = static_cast<int>(n.GetInt("num_heads", 0));
      if (three_h % 3 != 0 || op.num_heads <= 0 || (three_h / 3) % op.num_heads != 0) {
        return InvalidArgumentError("{}: num_heads {} must divide H = {}", Label(n), op.num_heads,
                                    three_h / 3);
      }
      op.cols = three_h / 3;
      op.head_dim = op.cols / op.num_heads;
      if (!AttentionHeadDimSupported(op.head_dim)) {
        return Unsupported(n, fmt::format("head dim {} (valid: 16, 32, 64, 128)", op.head_dim));
      }
      op.scale = static_cast<float>(n.GetFloat("scale", 1.0 / std::sqrt(double(op.head_dim))));
    } else if (n.domain.empty() && n.op_type == "Gather") {
      op.kind = OpKind::kGatherFirst;
      SURGE_RETURN_IF_ERROR(need_act(n, n.input(0), "data"));
      const int idx = n.input(1);
      const bool first = is_const(idx) && g.values[idx].constant.numel() == 1 &&
                         g.values[idx].constant.rank() == 0 &&
                         g.values[idx].constant.GetInt(0) == 0;
      if (n.GetInt("axis", 0) != 1 || !first || act_domain(n.input(0)) != RowDomain::kTokens) {
        return Unsupported(n, "only Gather of scalar index 0 along axis 1 of [B,S,H] ([CLS])");
      }
      op.cols = act_cols(n.input(0));
      out_domain = RowDomain::kBatch;
    } else if (surge_op && n.op_type == "L2Normalize") {
      op.kind = OpKind::kL2Normalize;
      SURGE_RETURN_IF_ERROR(need_act(n, n.input(0), "X"));
      op.cols = act_cols(n.input(0));
      op.epsilon = static_cast<float>(n.GetFloat("epsilon", 1e-12));
      SURGE_ASSIGN_OR_RETURN(op.eps_max, ir::L2NormalizeMaxMode(n));
      out_domain = act_domain(n.input(0));
    } else if (n.domain.empty() && n.op_type == "Squeeze") {
      op.kind = OpKind::kSqueeze;
      SURGE_RETURN_IF_ERROR(need_act(n, n.input(0), "data"));
      const auto axes = ir::AxesOf(g, n, 1);
      const int64_t rank = act_domain(n.input(0)) == RowDomain::kTokens ? 3 : 2;
      if (!axes || axes->size() != 1 || ((*axes)[0] != -1 && (*axes)[0] != rank - 1) ||
          act_cols(n.input(0)) != 1) {
        return Unsupported(n, "only Squeeze of the last axis of size 1, given as constant axes");
      }
      op.cols = 1;
      out_domain = act_domain(n.input(0));
    } else {
      return Unsupported(n, "no CUDA kernel for this op");
    }
    if (op.cols <= 0) return Unsupported(n, "its output columns are unknown");
    const int max_outputs = op.kind == OpKind::kSkipLayerNorm ? 2 : 1;
    if (static_cast<int>(n.outputs.size()) > max_outputs) {
      return Unsupported(n, "extra outputs are not produced");
    }
    for (int o : n.outputs) {
      if (o >= 0) p.activations[o] = {out_domain, op.cols, op.kind == OpKind::kSqueeze};
    }
    const int64_t declared = n.outputs.empty() || n.outputs[0] < 0 || op.kind == OpKind::kSqueeze
                                 ? -1
                                 : StaticLastDim(g.values[n.outputs[0]]);
    if (declared >= 0 && declared != op.cols) {
      return InvalidArgumentError("{}: output has {} columns, the kernel computes {}", Label(n),
                                  declared, op.cols);
    }
    p.ops.push_back(std::move(op));
  }
  if (p.input_ids < 0) {
    return UnimplementedError(
        "cuda backend: the graph has no surge::EmbedLayerNorm reading input_ids; the cuda backend "
        "runs fused encoder graphs (build with --backend cpu for others)");
  }
  for (int in : g.inputs) {
    if (in != p.input_ids && in != p.token_type_ids && in != p.position_ids && in != p.mask) {
      return UnimplementedError(
          "cuda backend: graph input '{}' is not read by any supported "
          "role (input_ids, token_type_ids, position_ids, attention_mask)",
          g.values[in].name);
    }
  }
  for (int out : g.outputs) {
    if (!p.activations.count(out)) {
      return UnimplementedError("cuda backend: graph output '{}' is not computed by a node",
                                g.values[out].name);
    }
    const DType dt = g.values[out].dtype;
    if (dt != DType::kFloat32 && dt != DType::kFloat16 && dt != DType::kBFloat16) {
      return UnimplementedError(
          "cuda backend: graph output '{}' has dtype {}; valid: float32, "
          "float16, bfloat16",
          g.values[out].name, DTypeName(dt));
    }
  }
  p.padding_free = config.padding_free && p.mask >= 0;
  FuseResiduals(g, &p);
  if (first_token_only) KeepFirstTokenOnly(g, &p);
  return p;
}

Result<std::vector<uint8_t>> ConvertWeight(const Tensor& t, bool keep_f32, DataType dtype) {
  if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kFloat16 &&
      t.dtype() != DType::kBFloat16 && t.dtype() != DType::kFloat64) {
    return InvalidArgumentError(
        "cuda backend: weight of dtype {} cannot be converted (valid: "
        "float32, float16, bfloat16, float64)",
        DTypeName(t.dtype()));
  }
  const Tensor f = t.dtype() == DType::kFloat32 ? t : t.ToFloat32();
  const float* src = f.data_as<float>();
  const int64_t n = f.numel();
  std::vector<uint8_t> out(static_cast<size_t>(n) * (keep_f32 ? 4 : 2));
  if (keep_f32) {
    std::memcpy(out.data(), src, out.size());
  } else if (dtype == DataType::kF16) {
    FloatsToHalf(src, reinterpret_cast<uint16_t*>(out.data()), n);
  } else {
    FloatsToBf16(src, reinterpret_cast<uint16_t*>(out.data()), n);
  }
  return out;
}

Tensor TransposeWeight(const Tensor& w) {
  const Tensor f = w.dtype() == DType::kFloat32 ? w : w.ToFloat32();
  const int64_t k = f.dim(0), n = f.dim(1);
  Tensor t(DType::kFloat32, Shape{n, k});
  Transpose(f.data_as<float>(), k, n, t.data_as<float>());
  return t;
}

namespace {

bool TokenRows(const Program& p, const LoweredOp& op) {
  auto it = p.activations.find(op.outputs.empty() ? -1 : op.outputs[0]);
  return it == p.activations.end() || it->second.domain == RowDomain::kTokens ||
         op.first_token_only;
}

}  // namespace

GemmDesc LinearGemm(const Program& p, const LoweredOp& op, int64_t rows, bool* needs_kernel) {
  GemmDesc d;
  d.dtype = p.dtype;
  d.m = rows;
  d.n = op.cols;
  d.k = op.k;
  d.weight_nk = op.weight_nk;
  const bool bias = op.inputs.size() > 2 && op.inputs[2] >= 0;
  const bool residual = op.inputs.size() > 3 && op.inputs[3] >= 0;
  *needs_kernel = false;
  if (op.activation == Activation::kNone) {
    d.epilogue = bias ? GemmEpilogue::kBias : GemmEpilogue::kNone;
    d.residual = residual;
  } else if (bias && !residual &&
             (op.activation == Activation::kGeluTanh ||
              (op.activation == Activation::kGelu && !p.exact_gelu && TokenRows(p, op)))) {
    d.epilogue = GemmEpilogue::kBiasGeluTanh;  // cuBLASLt's GELU epilogue is the tanh form
  } else {
    d.epilogue = bias ? GemmEpilogue::kBias : GemmEpilogue::kNone;
    *needs_kernel = true;
  }
  return d;
}

GemmDesc LinearGemmAt(const Program& p, const LoweredOp& op, int64_t token_rows,
                      int64_t batch_rows) {
  const bool batch = p.activations.at(op.outputs[0]).domain == RowDomain::kBatch;
  bool unused = false;
  return LinearGemm(p, op, batch ? batch_rows : token_rows, &unused);
}

std::vector<GemmDesc> LinearGemms(const Program& p, int64_t token_rows, int64_t batch_rows) {
  std::vector<GemmDesc> out;
  for (const LoweredOp& op : p.ops) {
    if (op.kind == OpKind::kLinear) out.push_back(LinearGemmAt(p, op, token_rows, batch_rows));
  }
  return out;
}

std::set<int> WeightsWorthBothLayouts(const Program& p,
                                      const std::map<std::string, GemmAlgo>& tactics,
                                      const std::vector<std::pair<int64_t, int64_t>>& shapes,
                                      double min_gain) {
  std::set<int> gains, untuned;
  auto time = [&](const GemmDesc& d) {
    auto it = tactics.find(TacticKey(d));
    return it == tactics.end() || !it->second.valid ? 0.f : it->second.time_us;
  };
  for (const LoweredOp& op : p.ops) {
    if (op.kind != OpKind::kLinear) continue;
    const int w = op.inputs[1];
    for (auto [tokens, batch] : shapes) {
      const GemmDesc d = LinearGemmAt(p, op, tokens, batch);
      const float own = time(d), other = time(OtherLayout(d));
      if (!(other > 0)) {
        untuned.insert(w);
      } else if (own > 0 && other < own * (1 - min_gain)) {
        gains.insert(w);
      }
    }
  }
  std::set<int> out;
  for (int w : gains) {
    if (!untuned.count(w)) out.insert(w);
  }
  return out;
}

std::string SerializeBlob(const Blob& b) {
  std::string s(kBlobMagic, sizeof(kBlobMagic));
  // version (4: tactics keyed by the row count they were tuned at; 5: quantised weights; 6:
  // weights held in both layouts; 7: a tactic may name the own GEMM's tile)
  PutU32(&s, kBlobVersion);
  PutU32(&s, b.dtype == DataType::kF16 ? 1 : 2);
  PutU32(&s, b.padding_free ? 1 : 0);
  PutU32(&s, b.exact_gelu ? 1 : 0);
  PutU32(&s, static_cast<uint32_t>(b.weights.size()));
  for (const auto& [id, bytes] : b.weights) {
    PutU32(&s, static_cast<uint32_t>(id));
    PutU64(&s, bytes.size());
    s.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  PutU32(&s, static_cast<uint32_t>(b.tactics.size()));
  for (const auto& [key, algo] : b.tactics) {
    PutU32(&s, static_cast<uint32_t>(key.size()));
    s += key;
    s.append(reinterpret_cast<const char*>(&algo.algo), sizeof(algo.algo));
    s.append(reinterpret_cast<const char*>(&algo.time_us), sizeof(float));
  }
  PutU32(&s, static_cast<uint32_t>(b.weights_nk.size()));
  for (int id : b.weights_nk) PutU32(&s, static_cast<uint32_t>(id));
  PutU32(&s, static_cast<uint32_t>(b.quant_weights.size()));
  for (const auto& [key, q] : b.quant_weights) {
    PutU32(&s, static_cast<uint32_t>(key.first));
    PutU32(&s, q.type == QuantType::kInt8 ? 1 : 2);
    PutU64(&s, static_cast<uint64_t>(q.n));
    PutU64(&s, static_cast<uint64_t>(q.k));
    PutU64(&s, q.scales.size());
    s.append(reinterpret_cast<const char*>(q.scales.data()), q.scales.size() * sizeof(float));
    PutU64(&s, q.bytes.size());
    s.append(reinterpret_cast<const char*>(q.bytes.data()), q.bytes.size());
  }
  PutU32(&s, static_cast<uint32_t>(b.weights_both.size()));
  for (int id : b.weights_both) PutU32(&s, static_cast<uint32_t>(id));
  PutU32(&s, b.first_token_only ? 1 : 0);
  // Version 7: the tactics that name the own GEMM's tile instead of a cuBLASLt algorithm.
  uint32_t own = 0;
  for (const auto& [key, algo] : b.tactics) own += algo.own_tile >= 0;
  PutU32(&s, own);
  for (const auto& [key, algo] : b.tactics) {
    if (algo.own_tile < 0) continue;
    PutU32(&s, static_cast<uint32_t>(key.size()));
    s += key;
    PutU32(&s, static_cast<uint32_t>(algo.own_tile));
  }
  return s;
}

namespace {

// The blob's fixed fields, up to and including the weight count.
Status ReadBlobHeader(Reader& r, Blob* b, uint32_t* weight_count, uint32_t* version_out) {
  char magic[8];
  SURGE_RETURN_IF_ERROR(r.Read(magic, 8, "magic"));
  if (std::memcmp(magic, kBlobMagic, 8) != 0) {
    return DataLossError("cuda plan blob has a bad magic (not built by the cuda backend?)");
  }
  uint32_t version = 0, dtype = 0, pf = 0;
  SURGE_RETURN_IF_ERROR(r.Read(&version, 4, "version"));
  if (version < 2 || version > kBlobVersion) {
    return DataLossError(
        "cuda plan blob version {} is not supported (this build reads 2 to {}); "
        "rebuild the plan",
        version, kBlobVersion);
  }
  *version_out = version;
  SURGE_RETURN_IF_ERROR(r.Read(&dtype, 4, "precision"));
  if (dtype != 1 && dtype != 2)
    return DataLossError("cuda plan blob precision {} is invalid", dtype);
  SURGE_RETURN_IF_ERROR(r.Read(&pf, 4, "padding_free"));
  b->dtype = dtype == 1 ? DataType::kF16 : DataType::kBF16;
  b->padding_free = pf != 0;
  if (version >= 3) {  // version 2 plans ran erf GELU exactly
    uint32_t exact = 0;
    SURGE_RETURN_IF_ERROR(r.Read(&exact, 4, "exact_gelu"));
    b->exact_gelu = exact != 0;
  }
  return r.Read(weight_count, 4, "weight count");
}

// One quantised weight's header (value id, type, shape, scales) and, with `bytes` true, its
// bytes (else skipped).
Status ReadQuantWeight(Reader& r, int* id, QuantWeight* q, bool bytes) {
  uint32_t v = 0, type = 0;
  uint64_t n = 0, k = 0, count = 0, size = 0;
  SURGE_RETURN_IF_ERROR(r.Read(&v, 4, "quantised weight id"));
  SURGE_RETURN_IF_ERROR(r.Read(&type, 4, "quantised weight type"));
  if (type != 1 && type != 2) {
    return DataLossError("cuda plan blob: quantised weight {} has type {}", v, type);
  }
  SURGE_RETURN_IF_ERROR(r.Read(&n, 8, "quantised weight N"));
  SURGE_RETURN_IF_ERROR(r.Read(&k, 8, "quantised weight K"));
  SURGE_RETURN_IF_ERROR(r.Read(&count, 8, "quantised weight scale count"));
  const uint64_t expect_scales = type == 1 ? n : 1;
  if (n == 0 || k == 0 || n > (uint64_t{1} << 31) || k > (uint64_t{1} << 31) ||
      count != expect_scales) {
    return DataLossError("cuda plan blob: quantised weight {} is {}x{} with {} scales", v, n, k,
                         count);
  }
  if (count * sizeof(float) > r.left()) {
    return DataLossError("cuda plan blob: quantised weight {} claims {} scales, {} bytes left", v,
                         count, r.left());
  }
  *id = static_cast<int>(v);
  q->type = type == 1 ? QuantType::kInt8 : QuantType::kFp8E4M3;
  q->n = static_cast<int64_t>(n);
  q->k = static_cast<int64_t>(k);
  q->scales.resize(count);
  SURGE_RETURN_IF_ERROR(r.Read(q->scales.data(), count * sizeof(float), "quantised weight scales"));
  SURGE_RETURN_IF_ERROR(r.Read(&size, 8, "quantised weight size"));
  if (size != n * k) {
    return DataLossError("cuda plan blob: quantised weight {} has {} bytes for {}x{}", v, size, n,
                         k);
  }
  if (!bytes) return r.Skip(size, "quantised weight bytes");
  if (size > r.left()) {
    return DataLossError("cuda plan blob: quantised weight {} claims {} bytes, {} left", v, size,
                         r.left());
  }
  q->bytes.resize(size);
  return r.Read(q->bytes.data(), size, "quantised weight bytes");
}

// Everything after the weights: tactics, transposed weight ids, (version 5) quantised weights
// (with `quant_bytes` false their bytes are skipped) and (version 6) the ids of weights held in
// both layouts.
Status ReadBlobTail(Reader& r, uint32_t version, Blob* b, bool quant_bytes) {
  uint32_t count = 0;
  SURGE_RETURN_IF_ERROR(r.Read(&count, 4, "tactic count"));
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t len = 0;
    SURGE_RETURN_IF_ERROR(r.Read(&len, 4, "tactic key length"));
    if (len > r.left())
      return DataLossError("cuda plan blob: tactic key of {} bytes, {} left", len, r.left());
    std::string key(len, '\0');
    SURGE_RETURN_IF_ERROR(r.Read(key.data(), len, "tactic key"));
    GemmAlgo a;
    SURGE_RETURN_IF_ERROR(r.Read(&a.algo, sizeof(a.algo), "tactic algorithm"));
    SURGE_RETURN_IF_ERROR(r.Read(&a.time_us, sizeof(float), "tactic time"));
    a.valid = true;
    b->tactics[key] = a;
  }
  SURGE_RETURN_IF_ERROR(r.Read(&count, 4, "transposed weight count"));
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t id = 0;
    SURGE_RETURN_IF_ERROR(r.Read(&id, 4, "transposed weight id"));
    b->weights_nk.insert(static_cast<int>(id));
  }
  if (version >= 5) {
    SURGE_RETURN_IF_ERROR(r.Read(&count, 4, "quantised weight count"));
    for (uint32_t i = 0; i < count; ++i) {
      int id = 0;
      QuantWeight q;
      SURGE_RETURN_IF_ERROR(ReadQuantWeight(r, &id, &q, quant_bytes));
      const auto key = std::make_pair(id, q.type);
      if (b->quant_weights.count(key)) {
        return DataLossError("cuda plan blob: quantised weight {} appears twice", id);
      }
      b->quant_weights.emplace(key, std::move(q));
    }
  }
  if (version >= 6) {
    SURGE_RETURN_IF_ERROR(r.Read(&count, 4, "count of weights in both layouts"));
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t id = 0;
      SURGE_RETURN_IF_ERROR(r.Read(&id, 4, "id of a weight in both layouts"));
      b->weights_both.insert(static_cast<int>(id));
    }
    uint32_t first = 0;
    SURGE_RETURN_IF_ERROR(r.Read(&first, 4, "first-token-only flag"));
    if (first > 1) return DataLossError("cuda plan blob: first-token-only flag {}", first);
    b->first_token_only = first != 0;
  }
  if (version >= 7) {
    SURGE_RETURN_IF_ERROR(r.Read(&count, 4, "count of own-GEMM tactics"));
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t len = 0, tile = 0;
      SURGE_RETURN_IF_ERROR(r.Read(&len, 4, "own-GEMM tactic key length"));
      if (len > r.left())
        return DataLossError("cuda plan blob: tactic key of {} bytes, {} left", len, r.left());
      std::string key(len, '\0');
      SURGE_RETURN_IF_ERROR(r.Read(key.data(), len, "own-GEMM tactic key"));
      SURGE_RETURN_IF_ERROR(r.Read(&tile, 4, "own-GEMM tile"));
      auto it = b->tactics.find(key);
      if (it == b->tactics.end() || tile >= static_cast<uint32_t>(QGemmTileCount())) {
        return DataLossError("cuda plan blob: own-GEMM tile {} for tactic '{}'", tile, key);
      }
      it->second.own_tile = static_cast<int>(tile);
    }
  }
  if (r.left() != 0) return DataLossError("cuda plan blob has {} trailing bytes", r.left());
  return Status::Ok();
}

}  // namespace

Result<std::vector<int>> BlobWeightIds(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  Blob b;
  uint32_t count = 0, version = 0;
  SURGE_RETURN_IF_ERROR(ReadBlobHeader(r, &b, &count, &version));
  std::set<int> ids;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t id = 0;
    uint64_t n = 0;
    SURGE_RETURN_IF_ERROR(r.Read(&id, 4, "weight id"));
    SURGE_RETURN_IF_ERROR(r.Read(&n, 8, "weight size"));
    SURGE_RETURN_IF_ERROR(r.Skip(n, "weight bytes"));
    ids.insert(static_cast<int>(id));
  }
  SURGE_RETURN_IF_ERROR(ReadBlobTail(r, version, &b, false));
  for (const auto& [key, q] : b.quant_weights) ids.insert(key.first);
  return std::vector<int>(ids.begin(), ids.end());
}

Result<Blob> ParseBlob(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  Blob b;
  uint32_t count = 0, version = 0;
  SURGE_RETURN_IF_ERROR(ReadBlobHeader(r, &b, &count, &version));
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t id = 0;
    uint64_t n = 0;
    SURGE_RETURN_IF_ERROR(r.Read(&id, 4, "weight id"));
    SURGE_RETURN_IF_ERROR(r.Read(&n, 8, "weight size"));
    if (n > r.left())
      return DataLossError("cuda plan blob: weight {} claims {} bytes, {} left", id, n, r.left());
    std::vector<uint8_t> w(n);
    SURGE_RETURN_IF_ERROR(r.Read(w.data(), n, "weight bytes"));
    b.weights[static_cast<int>(id)] = std::move(w);
  }
  SURGE_RETURN_IF_ERROR(ReadBlobTail(r, version, &b, true));
  return b;
}

}  // namespace surge::engine::cuda
