#include "serve/model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "serve/infer.h"

namespace surge::serve {
namespace {

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first.empty()) first = fmt::format("line {}, column {}: {}", line + 1, column + 1, message);
  }
  void AddWarning(int line, int column, const std::string& message) override {
    warnings.push_back(fmt::format("line {}, column {}: {}", line + 1, column + 1, message));
  }
  std::string first;
  std::vector<std::string> warnings;
};

}  // namespace

Result<inference::ModelConfig> ParseModelConfig(std::string_view text, std::string_view origin,
                                                std::vector<std::string>* warnings) {
  inference::ModelConfig config;
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(true);
  parser.AllowUnknownExtension(true);
  if (!parser.ParseFromString(std::string(text), &config)) {
    return InvalidArgumentError("{}: not a valid config.pbtxt: {}", origin,
                                errors.first.empty() ? "parse error" : errors.first);
  }
  if (warnings) {
    for (auto& w : errors.warnings) warnings->push_back(fmt::format("{}: {}", origin, w));
  }
  return config;
}

std::string_view ConfigTypeToDatatype(inference::DataType t) {
  switch (t) {
    case inference::TYPE_BOOL:
      return "BOOL";
    case inference::TYPE_UINT8:
      return "UINT8";
    case inference::TYPE_UINT16:
      return "UINT16";
    case inference::TYPE_UINT32:
      return "UINT32";
    case inference::TYPE_UINT64:
      return "UINT64";
    case inference::TYPE_INT8:
      return "INT8";
    case inference::TYPE_INT16:
      return "INT16";
    case inference::TYPE_INT32:
      return "INT32";
    case inference::TYPE_INT64:
      return "INT64";
    case inference::TYPE_FP16:
      return "FP16";
    case inference::TYPE_FP32:
      return "FP32";
    case inference::TYPE_FP64:
      return "FP64";
    case inference::TYPE_STRING:
      return "BYTES";
    case inference::TYPE_BF16:
      return "BF16";
    default:
      return "INVALID";
  }
}

inference::DataType DatatypeToConfigType(std::string_view d) {
  if (d == "BYTES") return inference::TYPE_STRING;
  inference::DataType t;
  if (inference::DataType_Parse("TYPE_" + std::string(d), &t)) return t;
  return inference::TYPE_INVALID;
}

Result<DType> ConfigTypeToDType(inference::DataType t) {
  return DTypeFromDatatype(ConfigTypeToDatatype(t));
}

inference::DataType DTypeToConfigType(DType t) { return DatatypeToConfigType(DatatypeName(t)); }

std::string ConfigParameter(const inference::ModelConfig& config, std::string_view key) {
  auto it = config.parameters().find(std::string(key));
  return it == config.parameters().end() ? std::string() : it->second.string_value();
}

Status ValidateConfig(const inference::ModelConfig& c) {
  if (c.max_batch_size() < 0) {
    return InvalidArgumentError("model '{}': max_batch_size must be >= 0, got {}", c.name(),
                                c.max_batch_size());
  }
  if (c.has_dynamic_batching()) {
    const auto& db = c.dynamic_batching();
    for (int p : db.preferred_batch_size()) {
      if (p < 1 || (c.max_batch_size() > 0 && p > c.max_batch_size())) {
        return InvalidArgumentError(
            "model '{}': preferred_batch_size {} is outside [1, max_batch_size = {}]", c.name(), p,
            c.max_batch_size());
      }
    }
    if (db.priority_levels() > 0 &&
        (db.default_priority_level() < 1 || db.default_priority_level() > db.priority_levels())) {
      return InvalidArgumentError(
          "model '{}': default_priority_level {} must lie in [1, priority_levels = {}]", c.name(),
          db.default_priority_level(), db.priority_levels());
    }
    for (const auto& [level, policy] : db.priority_queue_policy()) {
      if (level < 1 || level > db.priority_levels()) {
        return InvalidArgumentError(
            "model '{}': priority_queue_policy for level {} but priority_levels is {}", c.name(),
            level, db.priority_levels());
      }
    }
  }
  for (const auto& g : c.instance_group()) {
    if (g.count() < 0 || g.count() > 64) {
      return InvalidArgumentError("model '{}': instance_group count {} is outside [1, 64]",
                                  c.name(), g.count());
    }
  }
  for (const auto& in : c.input()) {
    if (in.name().empty())
      return InvalidArgumentError("model '{}': an input has no name", c.name());
  }
  return Status::Ok();
}

Status AutoCompleteConfig(const engine::Engine& engine, int default_max_batch_size,
                          inference::ModelConfig* c) {
  // Batchable when every engine input and output has a dynamic first dim.
  auto dynamic_first = [](const engine::TensorInfo& t) {
    return !t.shape.empty() && !t.shape[0].IsStatic();
  };
  bool batchable = !engine.inputs().empty();
  for (const auto& t : engine.inputs()) batchable = batchable && dynamic_first(t);
  for (const auto& t : engine.outputs()) batchable = batchable && dynamic_first(t);
  int64_t profile_batch_max = 0;
  for (const auto& ip : engine.profile().inputs) {
    if (!ip.max.empty()) {
      profile_batch_max =
          profile_batch_max == 0 ? ip.max[0] : std::min(profile_batch_max, ip.max[0]);
    }
  }
  bool had_max_batch = c->max_batch_size() > 0;
  if (!had_max_batch && c->input_size() == 0 && batchable) {
    int64_t mb = default_max_batch_size;
    if (profile_batch_max > 0) mb = std::min<int64_t>(mb, profile_batch_max);
    c->set_max_batch_size(static_cast<int32_t>(std::max<int64_t>(mb, 1)));
  }
  if (c->max_batch_size() > 0 && !batchable) {
    return InvalidArgumentError(
        "model '{}': max_batch_size {} but the model's tensors have a "
        "static first dimension; set max_batch_size: 0",
        c->name(), c->max_batch_size());
  }
  if (c->max_batch_size() > 0 && profile_batch_max > 0 && c->max_batch_size() > profile_batch_max) {
    return InvalidArgumentError(
        "model '{}': max_batch_size {} exceeds the plan's profile (batch "
        "up to {}); rebuild with a larger profile or lower it",
        c->name(), c->max_batch_size(), profile_batch_max);
  }
  const bool batched = c->max_batch_size() > 0;
  auto dims_of = [&](const engine::TensorInfo& t) {
    std::vector<int64_t> dims;
    for (size_t d = batched ? 1 : 0; d < t.shape.size(); ++d) {
      dims.push_back(t.shape[d].IsStatic() ? t.shape[d].StaticValue() : -1);
    }
    return dims;
  };
  auto check_or_fill = [&](auto* list, const std::vector<engine::TensorInfo>& infos,
                           const char* what) -> Status {
    if (list->empty()) {
      for (const auto& t : infos) {
        auto* e = list->Add();
        e->set_name(t.name);
        e->set_data_type(DTypeToConfigType(t.dtype));
        for (int64_t d : dims_of(t)) e->add_dims(d);
      }
      return Status::Ok();
    }
    for (auto& e : *list) {
      auto it = std::find_if(infos.begin(), infos.end(),
                             [&](const engine::TensorInfo& t) { return t.name == e.name(); });
      if (it == infos.end()) {
        std::string names;
        for (const auto& t : infos) names += (names.empty() ? "" : ", ") + t.name;
        return InvalidArgumentError("model '{}': config {} '{}' is not in the model (it has: {})",
                                    c->name(), what, e.name(), names);
      }
      if (e.data_type() == inference::TYPE_INVALID) e.set_data_type(DTypeToConfigType(it->dtype));
      if (e.dims_size() == 0) {
        for (int64_t d : dims_of(*it)) e.add_dims(d);
      }
    }
    return Status::Ok();
  };
  SURGE_RETURN_IF_ERROR(check_or_fill(c->mutable_input(), engine.inputs(), "input"));
  SURGE_RETURN_IF_ERROR(check_or_fill(c->mutable_output(), engine.outputs(), "output"));
  if (c->max_batch_size() > 1 && !c->has_dynamic_batching()) c->mutable_dynamic_batching();
  if (c->instance_group_size() == 0) {
    auto* g = c->add_instance_group();
    g->set_count(1);
    g->set_kind(engine.backend_name() == "cpu" ? inference::ModelInstanceGroup::KIND_CPU
                                               : inference::ModelInstanceGroup::KIND_GPU);
  }
  for (auto& g : *c->mutable_instance_group()) {
    if (g.count() == 0) g.set_count(1);
    if (g.name().empty()) g.set_name(c->name());
  }
  if (c->backend().empty() && c->platform().empty()) c->set_backend("surge");
  return ValidateConfig(*c);
}

static QueuePolicy ToPolicy(const inference::ModelQueuePolicy& p) {
  QueuePolicy q;
  q.delay_on_timeout = p.timeout_action() == inference::ModelQueuePolicy::DELAY;
  q.default_timeout_us = p.default_timeout_microseconds();
  q.allow_timeout_override = p.allow_timeout_override();
  q.max_queue_size = p.max_queue_size();
  return q;
}

BatcherOptions BatcherOptionsFromConfig(const inference::ModelConfig& c) {
  BatcherOptions o;
  o.max_batch_size = c.max_batch_size();
  o.instance_count = 0;
  for (const auto& g : c.instance_group()) o.instance_count += std::max(1, g.count());
  o.instance_count = std::max(1, o.instance_count);
  if (c.has_dynamic_batching()) {
    const auto& db = c.dynamic_batching();
    o.preferred_batch_sizes.assign(db.preferred_batch_size().begin(),
                                   db.preferred_batch_size().end());
    o.max_queue_delay_us = db.max_queue_delay_microseconds();
    o.priority_levels = db.priority_levels();
    o.default_priority_level = db.default_priority_level();
    o.default_policy = ToPolicy(db.default_queue_policy());
    for (const auto& [level, p] : db.priority_queue_policy())
      o.priority_policy[level] = ToPolicy(p);
  } else if (o.max_batch_size > 0) {
    // No dynamic batcher: each request runs alone (Triton's default scheduler).
    o.max_batch_size = std::max(1, o.max_batch_size);
    o.preferred_batch_sizes.clear();
  }
  std::string pad = ConfigParameter(c, "max_padding_fraction");
  if (!pad.empty()) o.max_padding_fraction = std::clamp(std::atof(pad.c_str()), 0.0, 1.0);
  return o;
}

std::string ConfigToJson(const inference::ModelConfig& config) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  opts.always_print_enums_as_ints = false;
  (void)google::protobuf::util::MessageToJsonString(config, &out, opts);
  // Proto3 JSON writes 64-bit integers as strings; Triton writes them as numbers (its clients,
  // perf_analyzer included, read dims and delays as integers), so convert them back.
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded()) return out;
  static const std::set<std::string, std::less<>> kInt64Fields = {
      "dims", "shape", "versions", "max_queue_delay_microseconds", "default_timeout_microseconds"};
  std::function<void(nlohmann::json&, bool)> fix = [&](nlohmann::json& v, bool int64_field) {
    if (v.is_object()) {
      for (auto& [k, e] : v.items()) fix(e, kInt64Fields.count(k) > 0);
    } else if (v.is_array()) {
      for (auto& e : v) fix(e, int64_field);
    } else if (v.is_string() && int64_field) {
      v = std::stoll(v.get<std::string>());
    }
  };
  fix(j, false);
  return j.dump();
}

Result<inference::ModelConfig> ConfigFromJson(std::string_view json) {
  inference::ModelConfig config;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;
  auto st = google::protobuf::util::JsonStringToMessage(std::string(json), &config, opts);
  if (!st.ok()) {
    return InvalidArgumentError("model config JSON does not parse: {}", st.ToString());
  }
  return config;
}

}  // namespace surge::serve
