// Embeddings: LayerNorm(word_emb[input_ids] + type_emb[token_type_ids] + pos_emb[position_ids])
// → surge::EmbedLayerNorm, with position ids recognised as
//   "arange":  a Slice from 0 of a constant 0..P-1 buffer (BERT/ELECTRA/DistilBERT), Range(0, S,
//   1),
//              or a constant arange;
//   "roberta": (CumSum(ids != pad, axis 1) * (ids != pad)) + pad, through any Casts.
// Token types given as a constant (RoBERTa's buffered zeros) fold their embedding row into the word
// table: HF adds word + type before position, so the sums are bit-identical.
#include <algorithm>
#include <string>
#include <vector>

#include "core/logging.h"
#include "engine/passes/fusions.h"
#include "engine/passes/pattern.h"

namespace surge::engine::passes {
namespace {

bool IsGraphInput(const ir::Graph& g, int v) {
  return std::find(g.inputs.begin(), g.inputs.end(), v) != g.inputs.end();
}

// Follows index-preserving ops (Cast, Unsqueeze, Expand, Squeeze, Identity).
int SkipIndexOps(const Matcher& m, int v) {
  while (true) {
    int p = m.ProducerIndex(v);
    if (p < 0) return v;
    const ir::Node& n = m.graph().nodes[p];
    if (!n.domain.empty()) return v;
    if (n.op_type == "Cast" || n.op_type == "Unsqueeze" || n.op_type == "Expand" ||
        n.op_type == "Squeeze" || n.op_type == "Identity") {
      v = n.input(0);
      continue;
    }
    return v;
  }
}

bool IsArangeConst(const Tensor& t) {
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32) return false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.GetInt(i) != i) return false;
  }
  return t.numel() > 0;
}

// Slice from 0 with step 1 along the last axis.
bool SlicesFromStart(const Matcher& m, const ir::Node& s, int64_t rank) {
  auto starts = m.IntsConst(s.input(1));
  if (!starts || starts->size() != 1 || (*starts)[0] != 0) return false;
  if (s.input(3) >= 0) {
    auto axes = m.IntsConst(s.input(3));
    if (!axes || axes->size() != 1 || !(((*axes)[0] == -1) || (*axes)[0] == rank - 1)) return false;
  } else if (rank != 1) {
    return false;
  }
  if (s.input(4) >= 0) {
    auto steps = m.IntsConst(s.input(4));
    if (!steps || steps->size() != 1 || (*steps)[0] != 1) return false;
  }
  return true;
}

bool IsArangePositions(const Matcher& m, int idx) {
  int v = SkipIndexOps(m, idx);
  if (m.IsConst(v)) return IsArangeConst(m.value(v).constant);
  if (const ir::Node* s = m.Producer(v, "Slice")) {
    int data = s->input(0);
    if (!m.IsConst(data) || !IsArangeConst(m.value(data).constant)) return false;
    return SlicesFromStart(m, *s, static_cast<int64_t>(m.value(data).constant.rank()));
  }
  if (const ir::Node* r = m.Producer(v, "Range")) {
    auto start = m.ScalarConst(r->input(0));
    auto delta = m.ScalarConst(r->input(2));
    return start && delta && *start == 0 && *delta == 1;
  }
  return false;
}

// Not(Equal(ids, pad)) through Casts; sets ids and pad.
bool MatchNotPad(const Matcher& m, int v, int* ids, int64_t* pad) {
  v = m.SkipCasts(v);
  const ir::Node* no = m.Producer(v, "Not");
  if (!no) return false;
  const ir::Node* eq = m.Producer(m.SkipCasts(no->input(0)), "Equal");
  if (!eq) return false;
  for (int k = 0; k < 2; ++k) {
    auto c = m.ScalarConst(eq->input(k));
    if (!c) continue;
    int i = eq->input(1 - k);
    if (*ids >= 0 && (*ids != i || *pad != static_cast<int64_t>(*c))) return false;
    *ids = i;
    *pad = static_cast<int64_t>(*c);
    return true;
  }
  return false;
}

// RoBERTa: (cumsum(ne) [+ 0]) * ne + pad. Sets ids and pad.
bool IsRobertaPositions(const Matcher& m, int idx, int* ids, int64_t* pad) {
  int v = m.SkipCasts(idx);
  const ir::Node* add = m.Producer(v, "Add");
  if (!add) return false;
  for (int k = 0; k < 2; ++k) {
    auto c = m.ScalarConst(add->input(k));
    if (!c) continue;
    const ir::Node* mul = m.Producer(m.SkipCasts(add->input(1 - k)), "Mul");
    if (!mul) return false;
    for (int j = 0; j < 2; ++j) {
      int local_ids = -1;
      int64_t local_pad = 0;
      if (!MatchNotPad(m, mul->input(j), &local_ids, &local_pad)) continue;
      int cs = m.SkipCasts(mul->input(1 - j));
      if (const ir::Node* add0 = m.Producer(cs, "Add")) {  // + past_key_values_length (0)
        auto z0 = m.ScalarConst(add0->input(1)), z1 = m.ScalarConst(add0->input(0));
        if (z0 && *z0 == 0) {
          cs = m.SkipCasts(add0->input(0));
        } else if (z1 && *z1 == 0) {
          cs = m.SkipCasts(add0->input(1));
        } else {
          return false;
        }
      }
      const ir::Node* cum = m.Producer(cs, "CumSum");
      if (!cum || cum->GetInt("exclusive", 0) != 0 || cum->GetInt("reverse", 0) != 0) return false;
      auto axis = m.ScalarConst(cum->input(1));
      if (!axis || !(*axis == 1 || *axis == -1)) return false;
      if (!MatchNotPad(m, cum->input(0), &local_ids, &local_pad)) return false;
      if (local_pad != static_cast<int64_t>(*c)) return false;
      *ids = local_ids;
      *pad = local_pad;
      return true;
    }
    return false;
  }
  return false;
}

// A constant index for every position (RoBERTa's buffered zero token types); nullopt otherwise.
std::optional<int64_t> ConstantIndex(const Matcher& m, int idx) {
  int v = SkipIndexOps(m, idx);
  // Slicing or gathering from a uniform constant gives that constant everywhere (current RoBERTa
  // gathers its zero token-type buffer at the position ids).
  for (int guard = 0; guard < 8; ++guard) {
    const ir::Node* s = m.Producer(v, "Slice");
    if (!s) s = m.Producer(v, "GatherElements");
    if (!s) s = m.Producer(v, "Gather");
    if (!s) break;
    v = SkipIndexOps(m, s->input(0));
  }
  if (const ir::Node* c = m.Producer(v, "ConstantOfShape")) {
    const Tensor* t = c->GetTensor("value");
    return t && t->numel() == 1 ? t->GetInt(0) : 0;
  }
  if (!m.IsConst(v)) return std::nullopt;
  const Tensor& t = m.value(v).constant;
  if (t.numel() == 0 || IsFloating(t.dtype())) return std::nullopt;
  for (int64_t i = 1; i < t.numel(); ++i) {
    if (t.GetInt(i) != t.GetInt(0)) return std::nullopt;
  }
  return t.GetInt(0);
}

struct Leaf {
  int gather = -1;  // node index
  int table = -1;   // [rows, H] constant
  int indices = -1;
};

}  // namespace

Result<int> FuseEmbedLayerNorm(ir::Graph& g) {
  Matcher m(g);
  int fused = 0;
  const int num_nodes = static_cast<int>(g.nodes.size());
  for (int i = 0; i < num_nodes; ++i) {
    if (m.IsClaimed(i)) continue;
    const ir::Node ln = g.nodes[i];
    if (ln.domain != ir::kSurgeDomain || ln.op_type != "LayerNorm") continue;
    // Flatten the sum feeding the norm.
    std::vector<int> nodes{i}, stack{ln.input(0)};
    std::vector<Leaf> leaves;
    bool ok = true;
    bool root = true;
    while (!stack.empty() && ok) {
      int v = stack.back();
      stack.pop_back();
      if (!root && (m.Uses(v) != 1 || m.IsGraphOutput(v))) {
        ok = false;
        break;
      }
      if (root && (m.Uses(v) != 1 || m.IsGraphOutput(v))) {
        ok = false;
        break;
      }
      root = false;
      if (const ir::Node* add = m.Producer(v, "Add")) {
        nodes.push_back(m.ProducerIndex(v));
        stack.push_back(add->input(1));
        stack.push_back(add->input(0));
        continue;
      }
      const ir::Node* ga = m.Producer(v, "Gather");
      if (!ga || ga->GetInt("axis", 0) != 0 || !m.IsConst(ga->input(0)) ||
          m.value(ga->input(0)).constant.rank() != 2 ||
          !IsFloating(m.value(ga->input(0)).constant.dtype())) {
        ok = false;
        break;
      }
      nodes.push_back(m.ProducerIndex(v));
      leaves.push_back({m.ProducerIndex(v), ga->input(0), ga->input(1)});
    }
    if (!ok || leaves.size() < 2 || leaves.size() > 3) continue;
    const int64_t hidden = m.value(leaves[0].table).constant.dim(1);
    bool same_width = true;
    for (const Leaf& l : leaves) same_width &= m.value(l.table).constant.dim(1) == hidden;
    if (!same_width) continue;
    // Classify the leaves.
    int word = -1, pos = -1, type = -1, input_ids = -1, type_ids = -1, ids_for_pos = -1;
    int64_t pad = 0, const_type = -1;
    std::string mode;
    for (int k = 0; k < static_cast<int>(leaves.size()) && ok; ++k) {
      int idx = m.SkipCasts(leaves[k].indices);
      int rid = -1;
      int64_t rpad = 0;
      if (IsGraphInput(g, idx)) {
        bool is_type = m.value(idx).name.find("token_type") != std::string::npos;
        int& slot = is_type ? type : word;
        if (slot >= 0) ok = false;
        slot = k;
        (is_type ? type_ids : input_ids) = idx;
      } else if (pos < 0 && IsArangePositions(m, leaves[k].indices)) {
        pos = k;
        mode = "arange";
      } else if (pos < 0 && IsRobertaPositions(m, leaves[k].indices, &rid, &rpad)) {
        pos = k;
        mode = "roberta";
        ids_for_pos = rid;
        pad = rpad;
      } else if (auto c = ConstantIndex(m, leaves[k].indices); c && type < 0) {
        type = k;
        const_type = *c;
      } else {
        ok = false;
      }
    }
    if (!ok || word < 0 || pos < 0) {
      SURGE_LOG_DEBUG("EmbedLayerNorm fusion: embedding sum before '{}' not recognised", ln.name);
      continue;
    }
    if (mode == "roberta" && ids_for_pos != input_ids) continue;
    if (std::any_of(nodes.begin(), nodes.end(), [&](int n) { return m.IsClaimed(n); })) continue;
    int word_table = leaves[word].table;
    int type_table = type >= 0 && const_type < 0 ? leaves[type].table : -1;
    if (const_type >= 0) {
      const Tensor& tt = m.value(leaves[type].table).constant;
      if (const_type >= tt.dim(0)) continue;
      Tensor w = m.value(word_table).constant.ToFloat32().Clone();
      Tensor t = tt.ToFloat32();
      const float* row = t.data_as<float>() + const_type * hidden;
      float* wd = w.data_as<float>();
      for (int64_t r = 0; r < w.dim(0); ++r) {
        for (int64_t c = 0; c < hidden; ++c) wd[r * hidden + c] += row[c];
      }
      word_table = g.AddConstant(m.value(word_table).name + ".with_type", std::move(w));
    }
    std::vector<int> inputs{input_ids,
                            type_table >= 0 ? type_ids : -1,
                            -1,
                            word_table,
                            leaves[pos].table,
                            type_table,
                            ln.input(1),
                            ln.input(2)};
    auto out = m.AddNode(
        "EmbedLayerNorm", ir::kSurgeDomain, ln.name, inputs, 1,
        {{"epsilon", ln.GetFloat("epsilon", 1e-5)}, {"position_mode", mode}, {"padding_idx", pad}});
    m.Replace(ln.outputs[0], out[0]);
    m.Claim(nodes);
    ++fused;
  }
  if (fused > 0) SURGE_RETURN_IF_ERROR(FinishPass(g));
  return fused;
}

}  // namespace surge::engine::passes
