// ONNX → Surge IR. Reads the model with the ONNX protobuf classes, converts initializers (inline
// or external data), turns Constant nodes into constants, inlines model-local functions, and
// checks every op against the schema registry so unsupported models fail at import with a message
// naming op, node and opset.
#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h (ONNX_ML)

#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>

#include "core/logging.h"
#include "core/mmap_file.h"
#include "engine/import/importer.h"
#include "engine/ir/op_schema.h"

namespace surge::engine::import {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 20;
// Function inlining depth guard (recursive functions are malformed).
constexpr int kMaxFunctionDepth = 32;
// Largest tensor element count accepted (guards against absurd dims in corrupt files).
constexpr int64_t kMaxElements = int64_t{1} << 40;

bool IsDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// Symbol names must survive Dim::ToString/Parse: keep [A-Za-z0-9_.:], never start with a digit.
std::string SanitizeSymbol(const std::string& name) {
  std::string out;
  for (char c : name) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':';
    out += ok ? c : '_';
  }
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "d_" + out;
  return out;
}

Result<int64_t> ParseNonNegative(const std::string& text, std::string_view what,
                                 std::string_view tensor) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 0) {
    return DataLossError("tensor '{}': external data {} '{}' is not a non-negative integer", tensor,
                         what, text);
  }
  return v;
}

// Where a (possibly inlined) function body finds its values and attributes.
struct Scope {
  std::unordered_map<std::string, int> values;  // ONNX name → value id
  const onnx::NodeProto* caller = nullptr;      // for ref_attr_name
  std::string prefix;                           // for names of inlined values
};

class OnnxImporter {
 public:
  explicit OnnxImporter(fs::path model_dir) : model_dir_(std::move(model_dir)) {}

  Result<ir::Graph> Run(const onnx::ModelProto& model);

 private:
  Result<Tensor> ConvertTensor(const onnx::TensorProto& t);
  Result<Tensor> ReadExternal(const onnx::TensorProto& t, DType dtype, Shape shape);
  Result<ir::Attribute> ConvertAttribute(const onnx::AttributeProto& a, const std::string& node,
                                         const std::string& op);
  Status EmitNode(const onnx::NodeProto& n, Scope& scope, int depth);
  Status EmitConstant(const onnx::NodeProto& n, const std::string& node_name, Scope& scope);
  Status InlineFunction(const onnx::FunctionProto& f, const onnx::NodeProto& n,
                        const std::string& node_name, Scope& scope, int depth);
  Status DefineOutput(Scope& scope, const std::string& onnx_name, int id,
                      const std::string& node_name);

  fs::path model_dir_;
  std::map<fs::path, MappedFile> external_files_;
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> functions_;
  ir::Graph g_;
  int node_counter_ = 0;
};

Result<Tensor> OnnxImporter::ConvertTensor(const onnx::TensorProto& t) {
  const std::string& name = t.name();
  auto dtype_or = DTypeFromOnnx(t.data_type());
  if (!dtype_or.ok()) {
    return UnimplementedError("tensor '{}': {}", name, dtype_or.status().message());
  }
  DType dtype = *dtype_or;
  Shape shape;
  int64_t numel = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && numel > kMaxElements / d)) {
      return DataLossError("tensor '{}' has invalid dims (dim {})", name, d);
    }
    numel *= d;
    shape.push_back(d);
  }
  if (t.has_segment()) return UnimplementedError("tensor '{}' is segmented", name);
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return ReadExternal(t, dtype, shape);

  // Sizes are checked before anything is allocated: a corrupt file may claim huge dims.
  const size_t nbytes = static_cast<size_t>(numel) * DTypeSize(dtype);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != nbytes) {
      return DataLossError("tensor '{}' of shape {} and dtype {} needs {} bytes, raw_data has {}",
                           name, ShapeToString(shape), DTypeName(dtype), nbytes,
                           t.raw_data().size());
    }
    Tensor out(dtype, shape);
    if (nbytes) std::memcpy(out.data(), t.raw_data().data(), nbytes);
    return out;
  }
  int64_t have = 0;
  std::string_view field;
  switch (dtype) {
    case DType::kFloat32:
      have = t.float_data_size(), field = "float_data";
      break;
    case DType::kFloat64:
      have = t.double_data_size(), field = "double_data";
      break;
    case DType::kInt64:
      have = t.int64_data_size(), field = "int64_data";
      break;
    default:
      have = t.int32_data_size(), field = "int32_data";
      break;
  }
  if (have != numel) {
    return DataLossError("tensor '{}' of shape {} needs {} values, {} has {}", name,
                         ShapeToString(shape), numel, field, have);
  }
  Tensor out(dtype, shape);
  switch (dtype) {
    case DType::kFloat32:
      for (int64_t i = 0; i < numel; ++i) out.data_as<float>()[i] = t.float_data(i);
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < numel; ++i) out.data_as<double>()[i] = t.double_data(i);
      break;
    case DType::kInt64:
      for (int64_t i = 0; i < numel; ++i) out.data_as<int64_t>()[i] = t.int64_data(i);
      break;
    case DType::kInt32:
      for (int64_t i = 0; i < numel; ++i) out.data_as<int32_t>()[i] = t.int32_data(i);
      break;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
    case DType::kFloat8E4M3:
      for (int64_t i = 0; i < numel; ++i) {
        out.data_as<uint8_t>()[i] = static_cast<uint8_t>(t.int32_data(i));
      }
      break;
    case DType::kFloat16:
    case DType::kBFloat16:
      // Stored as their 16-bit patterns in int32_data.
      for (int64_t i = 0; i < numel; ++i) {
        out.data_as<uint16_t>()[i] = static_cast<uint16_t>(t.int32_data(i));
      }
      break;
    default:
      return UnimplementedError("tensor '{}' has unsupported dtype {}", name, DTypeName(dtype));
  }
  return out;
}

Result<Tensor> OnnxImporter::ReadExternal(const onnx::TensorProto& t, DType dtype, Shape shape) {
  const std::string& name = t.name();
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      SURGE_ASSIGN_OR_RETURN(offset, ParseNonNegative(kv.value(), "offset", name));
    } else if (kv.key() == "length") {
      SURGE_ASSIGN_OR_RETURN(length, ParseNonNegative(kv.value(), "length", name));
    }
  }
  if (location.empty()) return DataLossError("tensor '{}': external data has no location", name);
  if (model_dir_.empty()) {
    return InvalidArgumentError("tensor '{}' uses external data, but the model has no folder",
                                name);
  }
  fs::path rel(location);
  if (rel.is_absolute()) {
    return InvalidArgumentError(
        "tensor '{}': external data location '{}' must be relative to "
        "the model folder",
        name, location);
  }
  std::error_code ec;
  fs::path base = fs::weakly_canonical(model_dir_, ec);
  fs::path full = fs::weakly_canonical(base / rel, ec);
  fs::path inside = full.lexically_relative(base);
  if (ec || inside.empty() || *inside.begin() == "..") {
    return InvalidArgumentError(
        "tensor '{}': external data location '{}' escapes the model "
        "folder",
        name, location);
  }
  auto it = external_files_.find(full);
  if (it == external_files_.end()) {
    auto file = MappedFile::Open(full.string());
    if (!file.ok()) {
      return NotFoundError("tensor '{}': cannot open external data file '{}': {}", name, location,
                           file.status().message());
    }
    it = external_files_.emplace(full, std::move(file).value()).first;
  }
  const MappedFile& f = it->second;
  const int64_t nbytes = NumElements(shape) * static_cast<int64_t>(DTypeSize(dtype));
  if (length < 0) length = nbytes;
  if (length != nbytes) {
    return DataLossError(
        "tensor '{}' of shape {} and dtype {} needs {} bytes, external data "
        "length is {}",
        name, ShapeToString(shape), DTypeName(dtype), nbytes, length);
  }
  const int64_t size = static_cast<int64_t>(f.size());
  if (offset > size || length > size - offset) {
    return DataLossError("tensor '{}': external data [{}, {}+{}) lies outside '{}' ({} bytes)",
                         name, offset, offset, length, location, size);
  }
  Tensor out(dtype, shape);
  if (nbytes) std::memcpy(out.data(), f.data() + offset, nbytes);
  return out;
}

Result<ir::Attribute> OnnxImporter::ConvertAttribute(const onnx::AttributeProto& a,
                                                     const std::string& node,
                                                     const std::string& op) {
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::FLOAT:
      return ir::Attribute(static_cast<double>(a.f()));
    case A::INT:
      return ir::Attribute(static_cast<int64_t>(a.i()));
    case A::STRING:
      return ir::Attribute(a.s());
    case A::TENSOR: {
      SURGE_ASSIGN_OR_RETURN(Tensor t, ConvertTensor(a.t()));
      return ir::Attribute(std::move(t));
    }
    case A::FLOATS:
      return ir::Attribute(std::vector<double>(a.floats().begin(), a.floats().end()));
    case A::INTS:
      return ir::Attribute(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case A::STRINGS:
      return ir::Attribute(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case A::GRAPH:
    case A::GRAPHS:
      return UnimplementedError(
          "node '{}' ({}) has subgraph attribute '{}': control flow "
          "(If/Loop/Scan) is not supported",
          node, op, a.name());
    default:
      return UnimplementedError("node '{}' ({}): attribute '{}' has unsupported type {}", node, op,
                                a.name(), static_cast<int>(a.type()));
  }
}

Status OnnxImporter::DefineOutput(Scope& scope, const std::string& onnx_name, int id,
                                  const std::string& node_name) {
  if (!scope.values.emplace(onnx_name, id).second) {
    return InvalidArgumentError("value '{}' is produced twice (again by node '{}')", onnx_name,
                                node_name);
  }
  return Status::Ok();
}

Status OnnxImporter::EmitConstant(const onnx::NodeProto& n, const std::string& node_name,
                                  Scope& scope) {
  if (n.output_size() != 1 || n.attribute_size() != 1) {
    return InvalidArgumentError("Constant node '{}' needs one output and one value attribute",
                                node_name);
  }
  const auto& a = n.attribute(0);
  Tensor t;
  const std::string& attr = a.has_ref_attr_name() ? a.ref_attr_name() : a.name();
  if (a.has_ref_attr_name()) {
    return UnimplementedError("Constant node '{}' takes its value from function attribute '{}'",
                              node_name, attr);
  }
  if (a.name() == "value") {
    SURGE_ASSIGN_OR_RETURN(t, ConvertTensor(a.t()));
  } else if (a.name() == "value_float") {
    t = Tensor(DType::kFloat32, {});
    *t.data_as<float>() = a.f();
  } else if (a.name() == "value_floats") {
    t = Tensor(DType::kFloat32, {a.floats_size()});
    for (int i = 0; i < a.floats_size(); ++i) t.data_as<float>()[i] = a.floats(i);
  } else if (a.name() == "value_int") {
    t = Tensor(DType::kInt64, {});
    *t.data_as<int64_t>() = a.i();
  } else if (a.name() == "value_ints") {
    t = Tensor(DType::kInt64, {a.ints_size()});
    for (int i = 0; i < a.ints_size(); ++i) t.data_as<int64_t>()[i] = a.ints(i);
  } else {
    return UnimplementedError(
        "Constant node '{}': attribute '{}' is not supported (value, "
        "value_float(s), value_int(s))",
        node_name, a.name());
  }
  std::string name = scope.prefix + n.output(0);
  if (g_.FindValue(name) >= 0) name = g_.UniqueName(name);
  int id = g_.AddConstant(name, std::move(t));
  return DefineOutput(scope, n.output(0), id, node_name);
}

Status OnnxImporter::InlineFunction(const onnx::FunctionProto& f, const onnx::NodeProto& n,
                                    const std::string& node_name, Scope& scope, int depth) {
  if (depth >= kMaxFunctionDepth) {
    return InvalidArgumentError("function '{}' nests deeper than {} (recursive?)", f.name(),
                                kMaxFunctionDepth);
  }
  Scope inner;
  inner.caller = &n;
  inner.prefix = node_name + "/";
  for (int i = 0; i < f.input_size(); ++i) {
    if (i < n.input_size() && !n.input(i).empty()) {
      auto it = scope.values.find(n.input(i));
      if (it == scope.values.end()) {
        return InvalidArgumentError("node '{}' ({}) reads '{}', which nothing produces", node_name,
                                    n.op_type(), n.input(i));
      }
      inner.values[f.input(i)] = it->second;
    }
  }
  // Resolve ref_attr_name against the caller (after the caller's own scope resolved them).
  onnx::NodeProto caller_copy;
  const onnx::NodeProto* resolved_caller = &n;
  if (scope.caller != nullptr) {
    caller_copy = n;
    caller_copy.clear_attribute();
    for (const auto& a : n.attribute()) {
      if (!a.has_ref_attr_name()) {
        *caller_copy.add_attribute() = a;
        continue;
      }
      for (const auto& pa : scope.caller->attribute()) {
        if (pa.name() == a.ref_attr_name()) {
          auto* na = caller_copy.add_attribute();
          *na = pa;
          na->set_name(a.name());
        }
      }
    }
    resolved_caller = &caller_copy;
  }
  inner.caller = resolved_caller;
  for (const auto& body : f.node()) {
    SURGE_RETURN_IF_ERROR(EmitNode(body, inner, depth + 1));
  }
  for (int i = 0; i < n.output_size(); ++i) {
    if (n.output(i).empty()) continue;
    if (i >= f.output_size()) {
      return InvalidArgumentError("node '{}' has more outputs than function '{}'", node_name,
                                  f.name());
    }
    auto it = inner.values.find(f.output(i));
    if (it == inner.values.end()) {
      return InvalidArgumentError("function '{}' never produces its output '{}'", f.name(),
                                  f.output(i));
    }
    // An Identity keeps the caller's output name visible in the graph.
    ir::Node id_node;
    id_node.op_type = "Identity";
    id_node.name = node_name + "/" + f.output(i);
    id_node.inputs = {it->second};
    int out = g_.AddValue(scope.prefix + n.output(i));
    id_node.outputs = {out};
    g_.AddNode(std::move(id_node));
    SURGE_RETURN_IF_ERROR(DefineOutput(scope, n.output(i), out, node_name));
  }
  return Status::Ok();
}

Status OnnxImporter::EmitNode(const onnx::NodeProto& n, Scope& scope, int depth) {
  ++node_counter_;
  std::string node_name =
      scope.prefix +
      (n.name().empty() ? fmt::format("{}_{}", n.op_type(), node_counter_) : n.name());
  auto fn = functions_.find({n.domain(), n.op_type()});
  if (fn != functions_.end()) return InlineFunction(*fn->second, n, node_name, scope, depth);
  if (!IsDefaultDomain(n.domain())) {
    return UnimplementedError(
        "node '{}' ({}) uses operator domain '{}', which is not supported "
        "(only the default ONNX domain)",
        node_name, n.op_type(), n.domain());
  }
  if (n.op_type() == "If" || n.op_type() == "Loop" || n.op_type() == "Scan") {
    return UnimplementedError("node '{}' ({}): control flow with subgraphs is not supported",
                              node_name, n.op_type());
  }
  if (n.op_type() == "Constant") return EmitConstant(n, node_name, scope);

  ir::Node node;
  node.op_type = n.op_type();
  node.name = node_name;
  for (const auto& a : n.attribute()) {
    if (a.has_ref_attr_name()) {
      const onnx::AttributeProto* src = nullptr;
      if (scope.caller != nullptr) {
        for (const auto& ca : scope.caller->attribute()) {
          if (ca.name() == a.ref_attr_name()) src = &ca;
        }
      }
      if (src == nullptr) continue;  // not given by the caller: the op's default applies
      SURGE_ASSIGN_OR_RETURN(ir::Attribute v, ConvertAttribute(*src, node_name, n.op_type()));
      node.attrs[a.name()] = std::move(v);
      continue;
    }
    SURGE_ASSIGN_OR_RETURN(ir::Attribute v, ConvertAttribute(a, node_name, n.op_type()));
    node.attrs[a.name()] = std::move(v);
  }
  for (const auto& in : n.input()) {
    if (in.empty()) {
      node.inputs.push_back(-1);
      continue;
    }
    auto it = scope.values.find(in);
    if (it == scope.values.end()) {
      return InvalidArgumentError(
          "node '{}' ({}) reads '{}', which no node, graph input or "
          "initializer produces",
          node_name, n.op_type(), in);
    }
    node.inputs.push_back(it->second);
  }
  while (!node.inputs.empty() && node.inputs.back() < 0) node.inputs.pop_back();
  int n_out = n.output_size();
  while (n_out > 0 && n.output(n_out - 1).empty()) --n_out;
  for (int i = 0; i < n_out; ++i) {
    const std::string& out_name = n.output(i);
    int id = g_.AddValue(out_name.empty() ? node_name + "/unused" : scope.prefix + out_name);
    if (!out_name.empty()) SURGE_RETURN_IF_ERROR(DefineOutput(scope, out_name, id, node_name));
    node.outputs.push_back(id);
  }
  SURGE_RETURN_IF_ERROR(ir::CheckArity(node, g_.opset));
  g_.AddNode(std::move(node));
  return Status::Ok();
}

Result<ir::Graph> OnnxImporter::Run(const onnx::ModelProto& model) {
  int64_t opset = -1;
  for (const auto& o : model.opset_import()) {
    if (IsDefaultDomain(o.domain())) opset = o.version();
  }
  if (opset < 0) return InvalidArgumentError("model declares no opset for the default domain");
  if (opset < kMinOpset || opset > kMaxOpset) {
    return UnimplementedError(
        "ONNX opset {} is not supported (supported: {}..{}); re-export "
        "with opset_version in that range",
        opset, kMinOpset, kMaxOpset);
  }
  if (!model.has_graph()) return InvalidArgumentError("model has no graph");
  for (const auto& f : model.functions()) functions_[{f.domain(), f.name()}] = &f;

  const onnx::GraphProto& graph = model.graph();
  g_.name = graph.name();
  g_.opset = opset;
  if (model.has_producer_name()) g_.metadata["producer_name"] = model.producer_name();
  if (model.has_producer_version()) g_.metadata["producer_version"] = model.producer_version();
  g_.metadata["ir_version"] = std::to_string(model.ir_version());
  for (const auto& kv : model.metadata_props()) g_.metadata[kv.key()] = kv.value();

  Scope top;
  for (const auto& init : graph.initializer()) {
    if (init.name().empty()) return InvalidArgumentError("an initializer has no name");
    SURGE_ASSIGN_OR_RETURN(Tensor t, ConvertTensor(init));
    if (top.values.count(init.name())) {
      return InvalidArgumentError("initializer '{}' is defined twice", init.name());
    }
    top.values[init.name()] = g_.AddConstant(init.name(), std::move(t));
  }
  if (graph.sparse_initializer_size() > 0) {
    return UnimplementedError("sparse initializers are not supported ('{}')",
                              graph.sparse_initializer(0).values().name());
  }
  for (const auto& in : graph.input()) {
    if (top.values.count(in.name())) {
      // An initializer listed as an input is a constant; a second input of that name is an error.
      int id = top.values[in.name()];
      if (g_.values[id].is_constant()) continue;
      return InvalidArgumentError("graph input '{}' is declared twice", in.name());
    }
    if (!in.type().has_tensor_type()) {
      return UnimplementedError("graph input '{}' is not a tensor", in.name());
    }
    const auto& tt = in.type().tensor_type();
    auto dtype = DTypeFromOnnx(tt.elem_type());
    if (!dtype.ok()) {
      return UnimplementedError("graph input '{}': {}", in.name(), dtype.status().message());
    }
    if (!tt.has_shape()) return InvalidArgumentError("graph input '{}' has no shape", in.name());
    ir::SymShape shape;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value()) {
        if (d.dim_value() < 0) {
          return InvalidArgumentError("graph input '{}' has negative dim {}", in.name(),
                                      d.dim_value());
        }
        shape.emplace_back(d.dim_value());
      } else if (d.has_dim_param() && !d.dim_param().empty()) {
        shape.push_back(ir::Dim::Symbol(SanitizeSymbol(d.dim_param())));
      } else {
        shape.push_back(ir::Dim::Symbol(SanitizeSymbol(fmt::format("{}_dim{}", in.name(), i))));
      }
    }
    top.values[in.name()] = g_.AddInput(in.name(), *dtype, std::move(shape));
  }
  for (const auto& n : graph.node()) SURGE_RETURN_IF_ERROR(EmitNode(n, top, 0));
  for (const auto& out : graph.output()) {
    auto it = top.values.find(out.name());
    if (it == top.values.end()) {
      return InvalidArgumentError("graph output '{}' is never produced", out.name());
    }
    g_.outputs.push_back(it->second);
  }
  if (g_.outputs.empty()) return InvalidArgumentError("model has no outputs");
  SURGE_RETURN_IF_ERROR(g_.TopoSort());
  SURGE_RETURN_IF_ERROR(g_.Validate());
  return std::move(g_);
}

}  // namespace

namespace {

// `what` names the model in messages; `model_dir` empty forbids external data.
Result<ir::Graph> ParseAndImport(std::span<const uint8_t> bytes, const std::string& what,
                                 const fs::path& model_dir) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return InvalidArgumentError(
        "ONNX model '{}' is {} bytes; protobuf files are limited to 2 GiB (store weights as "
        "external data)",
        what, bytes.size());
  }
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return DataLossError(
        "'{}' is not a valid ONNX model: protobuf parsing failed (truncated or corrupt file)",
        what);
  }
  OnnxImporter importer(model_dir);
  auto g = importer.Run(model);
  if (!g.ok()) return g.status().WithContext(fmt::format("importing '{}'", what));
  SURGE_LOG_DEBUG("imported '{}': {} nodes, {} values, opset {}", what, g->nodes.size(),
                  g->values.size(), g->opset);
  return g;
}

}  // namespace

Result<ir::Graph> ImportOnnx(const std::string& path) {
  auto file = MappedFile::Open(path);
  if (!file.ok()) {
    return NotFoundError("cannot open ONNX model '{}': {}", path, file.status().message());
  }
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  return ParseAndImport(file->bytes(), path, dir);
}

Result<ir::Graph> ImportOnnxFromBytes(std::span<const uint8_t> bytes,
                                      const std::string& model_dir) {
  return ParseAndImport(bytes, "<memory>", model_dir);
}

}  // namespace surge::engine::import
