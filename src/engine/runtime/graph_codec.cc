#include "engine/runtime/graph_codec.h"

#include <cstring>
#include <limits>
#include <vector>

#include "core/aligned_buffer.h"
#include "engine/ir/op_schema.h"
#include "engine/plan/byte_io.h"

namespace surge::engine {

namespace {

using plan::ByteReader;
using plan::ByteWriter;

constexpr uint32_t kGraphCodecVersion = 1;
constexpr size_t kMaxRank = 16;
constexpr size_t kMaxDimText = 256;

// kDataInTactics: a constant stored as its header alone, its data held by the backend's tactics.
enum ValueFlags : uint8_t { kHasShape = 1, kIsConstant = 2, kHasSymData = 4, kDataInTactics = 8 };

bool IsKnownDType(int32_t v) {
  switch (static_cast<DType>(v)) {
    case DType::kFloat32:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kBool:
    case DType::kFloat16:
    case DType::kFloat64:
    case DType::kBFloat16:
    case DType::kFloat8E4M3:
      return true;
    default:
      return false;
  }
}

void PutDims(ByteWriter& w, const std::vector<ir::Dim>& dims) {
  w.U32(static_cast<uint32_t>(dims.size()));
  for (const auto& d : dims) w.Str(d.ToString());
}

void PutTensorHeader(ByteWriter& w, const Tensor& t) {
  w.U32(static_cast<uint32_t>(t.dtype()));
  w.U32(static_cast<uint32_t>(t.rank()));
  for (int64_t d : t.shape()) w.I64(d);
}

// Dim::Parse does unchecked int64 arithmetic; bound the numbers first so a corrupt plan can never
// overflow it: at most 64 terms, each with a numeric factor product below 2^56.
Status CheckDimText(std::string_view text) {
  auto bad = [&] { return DataLossError("graph section: bad dimension '{}'", text); };
  if (text.empty() || text.size() > kMaxDimText) return bad();
  int terms = 1;
  int64_t product = 1;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (c == '+' || c == '-') {
      if (++terms > 64) return bad();
      product = 1;
      ++i;
    } else if (c >= '0' && c <= '9') {
      int64_t v = 0;
      size_t j = i;
      while (j < text.size() && text[j] >= '0' && text[j] <= '9') {
        if (j - i >= 18) return bad();
        v = v * 10 + (text[j] - '0');
        ++j;
      }
      if (__builtin_mul_overflow(product, v, &product) || product >= (int64_t{1} << 56)) {
        return bad();
      }
      i = j;
    } else {
      ++i;
    }
  }
  return Status::Ok();
}

Result<std::vector<ir::Dim>> GetDims(ByteReader& r, std::string_view what) {
  SURGE_ASSIGN_OR_RETURN(uint32_t n, r.Count("dims", 4));
  std::vector<ir::Dim> dims;
  dims.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    SURGE_ASSIGN_OR_RETURN(std::string text, r.Str(kMaxDimText));
    SURGE_RETURN_IF_ERROR(CheckDimText(text));
    auto d = ir::Dim::Parse(text);
    if (!d.ok()) return DataLossError("graph section: {}: {}", what, d.status().message());
    dims.push_back(std::move(d).value());
  }
  return dims;
}

struct TensorHeader {
  DType dtype;
  Shape shape;
  uint64_t nbytes;
};

Result<TensorHeader> GetTensorHeader(ByteReader& r, std::string_view what) {
  TensorHeader h;
  SURGE_ASSIGN_OR_RETURN(uint32_t dt, r.U32());
  if (!IsKnownDType(static_cast<int32_t>(dt))) {
    return DataLossError("graph section: {} has unknown dtype {}", what, dt);
  }
  h.dtype = static_cast<DType>(dt);
  SURGE_ASSIGN_OR_RETURN(uint32_t rank, r.U32());
  if (rank > kMaxRank) return DataLossError("graph section: {} has rank {}", what, rank);
  uint64_t numel = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    SURGE_ASSIGN_OR_RETURN(int64_t d, r.I64());
    if (d < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel) ||
        numel > (uint64_t{1} << 48)) {
      return DataLossError("graph section: {} has a bad shape", what);
    }
    h.shape.push_back(d);
  }
  h.nbytes = numel * DTypeSize(h.dtype);
  return h;
}

}  // namespace

Result<EncodedGraph> EncodeGraph(const ir::Graph& g, std::span<const int> data_in_tactics) {
  std::vector<bool> elided(g.values.size(), false);
  for (int id : data_in_tactics) {
    if (id < 0 || static_cast<size_t>(id) >= g.values.size() || !g.values[id].is_constant()) {
      return InvalidArgumentError(
          "value {} is not a constant of the graph, so its data cannot be left to the tactics", id);
    }
    elided[id] = true;
  }
  ByteWriter w;
  ByteWriter weights;
  w.U32(kGraphCodecVersion);
  w.Str(g.name);
  w.I64(g.opset);
  w.U32(static_cast<uint32_t>(g.metadata.size()));
  for (const auto& [k, v] : g.metadata) {
    w.Str(k);
    w.Str(v);
  }
  w.U32(static_cast<uint32_t>(g.values.size()));
  for (size_t id = 0; id < g.values.size(); ++id) {
    const ir::Value& v = g.values[id];
    uint8_t flags = (v.shape ? kHasShape : 0) | (v.is_constant() ? kIsConstant : 0) |
                    (v.sym_data ? kHasSymData : 0) | (elided[id] ? kDataInTactics : 0);
    w.Str(v.name);
    w.U32(static_cast<uint32_t>(v.dtype));
    w.U8(flags);
    if (v.shape) PutDims(w, *v.shape);
    if (elided[id]) {
      PutTensorHeader(w, v.constant);
    } else if (v.is_constant()) {
      if (v.constant.empty()) {
        return InvalidArgumentError("constant '{}' has no data", v.name);
      }
      PutTensorHeader(w, v.constant);
      weights.PadTo(kAlignment);
      w.U64(weights.size());
      weights.Raw(v.constant.data(), v.constant.nbytes());
    }
    if (v.sym_data) PutDims(w, *v.sym_data);
  }
  w.U32(static_cast<uint32_t>(g.nodes.size()));
  for (const auto& n : g.nodes) {
    w.Str(n.op_type);
    w.Str(n.domain);
    w.Str(n.name);
    w.U32(static_cast<uint32_t>(n.inputs.size()));
    for (int id : n.inputs) w.I64(id);
    w.U32(static_cast<uint32_t>(n.outputs.size()));
    for (int id : n.outputs) w.I64(id);
    w.U32(static_cast<uint32_t>(n.attrs.size()));
    for (const auto& [key, attr] : n.attrs) {
      w.Str(key);
      w.U8(static_cast<uint8_t>(attr.index()));
      if (auto* i = std::get_if<int64_t>(&attr)) {
        w.I64(*i);
      } else if (auto* f = std::get_if<double>(&attr)) {
        w.F64(*f);
      } else if (auto* s = std::get_if<std::string>(&attr)) {
        w.Str(*s);
      } else if (auto* is = std::get_if<std::vector<int64_t>>(&attr)) {
        w.U32(static_cast<uint32_t>(is->size()));
        for (int64_t x : *is) w.I64(x);
      } else if (auto* fs = std::get_if<std::vector<double>>(&attr)) {
        w.U32(static_cast<uint32_t>(fs->size()));
        for (double x : *fs) w.F64(x);
      } else if (auto* ss = std::get_if<std::vector<std::string>>(&attr)) {
        w.U32(static_cast<uint32_t>(ss->size()));
        for (const auto& x : *ss) w.Str(x);
      } else if (auto* t = std::get_if<Tensor>(&attr)) {
        if (!t->defined() || t->empty()) {
          return InvalidArgumentError("node '{}' attribute '{}' is an empty tensor", n.name, key);
        }
        PutTensorHeader(w, *t);
        w.Raw(t->data(), t->nbytes());
      }
    }
  }
  w.U32(static_cast<uint32_t>(g.inputs.size()));
  for (int id : g.inputs) w.I64(id);
  w.U32(static_cast<uint32_t>(g.outputs.size()));
  for (int id : g.outputs) w.I64(id);
  weights.PadTo(kAlignment);
  return EncodedGraph{w.Take(), weights.Take()};
}

Result<ir::Graph> DecodeGraph(std::span<const uint8_t> graph_bytes,
                              std::span<const uint8_t> weights) {
  ByteReader r(graph_bytes, "graph section");
  ir::Graph g;
  SURGE_ASSIGN_OR_RETURN(uint32_t version, r.U32());
  if (version != kGraphCodecVersion) {
    return DataLossError("graph section has encoding version {}, expected {}", version,
                         kGraphCodecVersion);
  }
  SURGE_ASSIGN_OR_RETURN(g.name, r.Str());
  SURGE_ASSIGN_OR_RETURN(g.opset, r.I64());
  SURGE_ASSIGN_OR_RETURN(uint32_t n_meta, r.Count("metadata entries", 8));
  for (uint32_t i = 0; i < n_meta; ++i) {
    SURGE_ASSIGN_OR_RETURN(std::string k, r.Str());
    SURGE_ASSIGN_OR_RETURN(std::string v, r.Str());
    g.metadata[std::move(k)] = std::move(v);
  }

  SURGE_ASSIGN_OR_RETURN(uint32_t n_values, r.Count("values", 9));
  for (uint32_t i = 0; i < n_values; ++i) {
    SURGE_ASSIGN_OR_RETURN(std::string name, r.Str());
    SURGE_ASSIGN_OR_RETURN(uint32_t dt, r.U32());
    if (dt != 0 && !IsKnownDType(static_cast<int32_t>(dt))) {
      return DataLossError("graph section: value '{}' has unknown dtype {}", name, dt);
    }
    SURGE_ASSIGN_OR_RETURN(uint8_t flags, r.U8());
    if (flags & ~(kHasShape | kIsConstant | kHasSymData | kDataInTactics) ||
        ((flags & kDataInTactics) && !(flags & kIsConstant))) {
      return DataLossError("graph section: value '{}' has unknown flags {:#x}", name, flags);
    }
    const int id = g.AddValue(name, static_cast<DType>(dt));
    if (g.values[id].name != name) {
      return DataLossError("graph section: value name '{}' appears twice", name);
    }
    ir::Value& v = g.values[id];
    if (flags & kHasShape) {
      SURGE_ASSIGN_OR_RETURN(auto shape, GetDims(r, name));
      if (shape.size() > kMaxRank)
        return DataLossError("graph section: '{}' has rank {}", name, shape.size());
      g.values[id].shape = std::move(shape);
    }
    if (flags & kDataInTactics) {
      SURGE_ASSIGN_OR_RETURN(TensorHeader h, GetTensorHeader(r, name));
      if (h.dtype != v.dtype) {
        return DataLossError("graph section: constant '{}' data is {}, the value says {}", name,
                             DTypeName(h.dtype), DTypeName(v.dtype));
      }
      v.constant = Tensor::View(h.dtype, std::move(h.shape), static_cast<const void*>(nullptr));
    } else if (flags & kIsConstant) {
      SURGE_ASSIGN_OR_RETURN(TensorHeader h, GetTensorHeader(r, name));
      SURGE_ASSIGN_OR_RETURN(uint64_t offset, r.U64());
      if (offset % kAlignment != 0 || offset > weights.size() ||
          h.nbytes > weights.size() - offset) {
        return DataLossError(
            "graph section: constant '{}' ({} bytes at weights offset {}) lies outside the {}-byte "
            "weights section or is misaligned",
            name, h.nbytes, offset, weights.size());
      }
      if (h.dtype != v.dtype) {
        return DataLossError("graph section: constant '{}' data is {}, the value says {}", name,
                             DTypeName(h.dtype), DTypeName(v.dtype));
      }
      v.constant = Tensor::View(h.dtype, std::move(h.shape), weights.data() + offset);
    }
    if (flags & kHasSymData) {
      SURGE_ASSIGN_OR_RETURN(auto sym, GetDims(r, name));
      v.sym_data = std::move(sym);
    }
  }

  const int64_t nv = n_values;
  auto get_id = [&](bool optional, std::string_view what) -> Result<int> {
    SURGE_ASSIGN_OR_RETURN(int64_t id, r.I64());
    if (id < (optional ? -1 : 0) || id >= nv) {
      return DataLossError("graph section: {} refers to value {} of {}", what, id, nv);
    }
    return static_cast<int>(id);
  };

  SURGE_ASSIGN_OR_RETURN(uint32_t n_nodes, r.Count("nodes", 24));
  g.nodes.reserve(n_nodes);
  for (uint32_t i = 0; i < n_nodes; ++i) {
    ir::Node n;
    SURGE_ASSIGN_OR_RETURN(n.op_type, r.Str());
    SURGE_ASSIGN_OR_RETURN(n.domain, r.Str());
    SURGE_ASSIGN_OR_RETURN(n.name, r.Str());
    SURGE_ASSIGN_OR_RETURN(uint32_t nin, r.Count("node inputs", 8));
    for (uint32_t k = 0; k < nin; ++k) {
      SURGE_ASSIGN_OR_RETURN(int id, get_id(true, "node '" + n.name + "' input"));
      n.inputs.push_back(id);
    }
    SURGE_ASSIGN_OR_RETURN(uint32_t nout, r.Count("node outputs", 8));
    for (uint32_t k = 0; k < nout; ++k) {
      SURGE_ASSIGN_OR_RETURN(int id, get_id(false, "node '" + n.name + "' output"));
      n.outputs.push_back(id);
    }
    SURGE_ASSIGN_OR_RETURN(uint32_t nattr, r.Count("attributes", 5));
    for (uint32_t k = 0; k < nattr; ++k) {
      SURGE_ASSIGN_OR_RETURN(std::string key, r.Str());
      SURGE_ASSIGN_OR_RETURN(uint8_t kind, r.U8());
      ir::Attribute a;
      switch (kind) {
        case 0: {
          SURGE_ASSIGN_OR_RETURN(int64_t x, r.I64());
          a = x;
          break;
        }
        case 1: {
          SURGE_ASSIGN_OR_RETURN(double x, r.F64());
          a = x;
          break;
        }
        case 2: {
          SURGE_ASSIGN_OR_RETURN(std::string x, r.Str());
          a = std::move(x);
          break;
        }
        case 3: {
          SURGE_ASSIGN_OR_RETURN(uint32_t cnt, r.Count("ints", 8));
          std::vector<int64_t> xs(cnt);
          for (auto& x : xs) {
            SURGE_ASSIGN_OR_RETURN(x, r.I64());
          }
          a = std::move(xs);
          break;
        }
        case 4: {
          SURGE_ASSIGN_OR_RETURN(uint32_t cnt, r.Count("floats", 8));
          std::vector<double> xs(cnt);
          for (auto& x : xs) {
            SURGE_ASSIGN_OR_RETURN(x, r.F64());
          }
          a = std::move(xs);
          break;
        }
        case 5: {
          SURGE_ASSIGN_OR_RETURN(uint32_t cnt, r.Count("strings", 4));
          std::vector<std::string> xs(cnt);
          for (auto& x : xs) {
            SURGE_ASSIGN_OR_RETURN(x, r.Str());
          }
          a = std::move(xs);
          break;
        }
        case 6: {
          SURGE_ASSIGN_OR_RETURN(TensorHeader h, GetTensorHeader(r, "attribute " + key));
          SURGE_ASSIGN_OR_RETURN(auto bytes, r.Bytes(h.nbytes));
          Tensor t(h.dtype, std::move(h.shape));
          if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
          a = std::move(t);
          break;
        }
        default:
          return DataLossError("graph section: node '{}' attribute '{}' has unknown kind {}",
                               n.name, key, kind);
      }
      n.attrs[std::move(key)] = std::move(a);
    }
    g.AddNode(std::move(n));
  }
  SURGE_ASSIGN_OR_RETURN(uint32_t n_in, r.Count("graph inputs", 8));
  for (uint32_t i = 0; i < n_in; ++i) {
    SURGE_ASSIGN_OR_RETURN(int id, get_id(false, "graph input"));
    g.inputs.push_back(id);
  }
  SURGE_ASSIGN_OR_RETURN(uint32_t n_out, r.Count("graph outputs", 8));
  for (uint32_t i = 0; i < n_out; ++i) {
    SURGE_ASSIGN_OR_RETURN(int id, get_id(false, "graph output"));
    g.outputs.push_back(id);
  }
  if (r.remaining() != 0) {
    return DataLossError("graph section has {} unexpected trailing bytes", r.remaining());
  }
  for (int id : g.inputs) {
    if (g.values[id].is_constant() || !g.values[id].shape) {
      return DataLossError("graph section: input '{}' is a constant or has no shape",
                           g.values[id].name);
    }
  }
  Status valid = g.Validate();
  if (!valid.ok()) return DataLossError("graph section is inconsistent: {}", valid.message());
  for (const auto& n : g.nodes) {
    Status arity = ir::CheckArity(n, g.opset);
    if (!arity.ok()) return DataLossError("graph section: {}", arity.message());
  }
  return g;
}

}  // namespace surge::engine
