#include "serve/api.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/logging.h"
#include "serve/model_config.h"

namespace surge::serve {
namespace {

using json = nlohmann::json;

constexpr int64_t kMaxElements = int64_t{1} << 31;

HttpResponse Json(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

HttpResponse Error(const Status& s) {
  HttpResponse r;
  r.status = HttpStatusFor(s.code());
  r.body = json{{"error", s.message()}}.dump();
  return r;
}

HttpResponse Empty(int status) {
  HttpResponse r;
  r.status = status;
  r.content_type.clear();
  return r;
}

std::vector<std::string> SplitPath(std::string_view target) {
  size_t q = target.find('?');
  if (q != std::string_view::npos) target = target.substr(0, q);
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= target.size()) {
    size_t next = target.find('/', pos);
    if (next == std::string_view::npos) next = target.size();
    if (next > pos) parts.emplace_back(target.substr(pos, next - pos));
    pos = next + 1;
  }
  return parts;
}

Result<Shape> ParseShapeJson(const json& j, std::string_view name) {
  if (!j.is_array()) return InvalidArgumentError("input '{}': 'shape' must be an array", name);
  Shape shape;
  int64_t n = 1;
  for (const auto& d : j) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return InvalidArgumentError("input '{}': shape dims must be non-negative integers", name);
    }
    int64_t v = d.get<int64_t>();
    if (v > 0 && n > kMaxElements / v) {
      return InvalidArgumentError("input '{}': shape {} holds too many elements", name, j.dump());
    }
    n *= v;
    shape.push_back(v);
  }
  return shape;
}

void Flatten(const json& j, std::vector<const json*>* out) {
  if (j.is_array()) {
    for (const auto& e : j) Flatten(e, out);
  } else {
    out->push_back(&j);
  }
}

template <typename T>
Status FillNumbers(const std::vector<const json*>& leaves, Tensor* t, std::string_view name) {
  T* p = t->data_as<T>();
  for (size_t i = 0; i < leaves.size(); ++i) {
    const json& v = *leaves[i];
    if (v.is_boolean()) {
      p[i] = static_cast<T>(v.get<bool>());
    } else if (v.is_number()) {
      p[i] = static_cast<T>(v.get<double>());
      if (v.is_number_integer()) p[i] = static_cast<T>(v.get<int64_t>());
    } else {
      return InvalidArgumentError("input '{}': element {} is not a number", name, i);
    }
  }
  return Status::Ok();
}

Status FillFromJson(const json& data, InferTensor* t) {
  std::vector<const json*> leaves;
  Flatten(data, &leaves);
  if (static_cast<int64_t>(leaves.size()) != t->numel()) {
    return InvalidArgumentError(
        "input '{}': unexpected number of elements: shape {} needs {}, "
        "'data' has {}",
        t->name, ShapeToString(t->shape), t->numel(), leaves.size());
  }
  if (t->is_bytes()) {
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!leaves[i]->is_string()) {
        return InvalidArgumentError("input '{}': BYTES element {} is not a string", t->name, i);
      }
      t->strings.push_back(leaves[i]->get<std::string>());
    }
    return Status::Ok();
  }
  SURGE_ASSIGN_OR_RETURN(DType dt, DTypeFromDatatype(t->datatype));
  t->tensor = Tensor(dt, t->shape);
  switch (dt) {
    case DType::kBool:
    case DType::kUInt8:
      return FillNumbers<uint8_t>(leaves, &t->tensor, t->name);
    case DType::kInt8:
      return FillNumbers<int8_t>(leaves, &t->tensor, t->name);
    case DType::kInt32:
      return FillNumbers<int32_t>(leaves, &t->tensor, t->name);
    case DType::kInt64:
      return FillNumbers<int64_t>(leaves, &t->tensor, t->name);
    case DType::kFloat32:
      return FillNumbers<float>(leaves, &t->tensor, t->name);
    case DType::kFloat64:
      return FillNumbers<double>(leaves, &t->tensor, t->name);
    case DType::kFloat16:
    case DType::kBFloat16: {
      std::vector<float> f(leaves.size());
      Tensor tmp = Tensor::View(DType::kFloat32, t->shape, f.data());
      SURGE_RETURN_IF_ERROR(FillNumbers<float>(leaves, &tmp, t->name));
      t->tensor = tmp.CastFromFloat32(dt);
      return Status::Ok();
    }
    default:
      return InvalidArgumentError("input '{}': unsupported datatype", t->name);
  }
}

json TensorToJson(const InferTensor& t) {
  json arr = json::array();
  if (t.is_bytes()) {
    for (const auto& s : t.strings) arr.push_back(s);
    return arr;
  }
  const Tensor& x = t.tensor;
  int64_t n = x.numel();
  switch (x.dtype()) {
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) arr.push_back(x.data_as<uint8_t>()[i] != 0);
      break;
    case DType::kUInt8:
      for (int64_t i = 0; i < n; ++i) arr.push_back(x.data_as<uint8_t>()[i]);
      break;
    case DType::kInt8:
      for (int64_t i = 0; i < n; ++i) arr.push_back(x.data_as<int8_t>()[i]);
      break;
    case DType::kInt32:
      for (int64_t i = 0; i < n; ++i) arr.push_back(x.data_as<int32_t>()[i]);
      break;
    case DType::kInt64:
      for (int64_t i = 0; i < n; ++i) arr.push_back(x.data_as<int64_t>()[i]);
      break;
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) arr.push_back(x.data_as<float>()[i]);
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) arr.push_back(x.data_as<double>()[i]);
      break;
    default: {
      Tensor f = x.ToFloat32();
      for (int64_t i = 0; i < n; ++i) arr.push_back(f.data_as<float>()[i]);
    }
  }
  return arr;
}

json Duration(uint64_t count, uint64_t ns) { return json{{"count", count}, {"ns", ns}}; }
json Duration(const DurationTotals& d) { return Duration(d.count, d.ns); }

json StatsJson(ModelVersion& v) {
  const StatsSnapshot s = v.stats().Snapshot();
  json batches = json::array();
  for (const auto& [bs, b] : s.batches) {
    batches.push_back({{"batch_size", bs},
                       {"compute_input", Duration(b.count, b.compute_input_ns)},
                       {"compute_infer", Duration(b.count, b.compute_infer_ns)},
                       {"compute_output", Duration(b.count, b.compute_output_ns)}});
  }
  return json{{"name", v.name()},
              {"version", v.version_string()},
              {"last_inference", s.last_inference_ms},
              {"inference_count", s.inference_count},
              {"execution_count", s.execution_count},
              {"inference_stats",
               {{"success", Duration(s.success)},
                {"fail", Duration(s.fail)},
                {"queue", Duration(s.queue)},
                {"compute_input", Duration(s.compute_input)},
                {"compute_infer", Duration(s.compute_infer)},
                {"compute_output", Duration(s.compute_output)},
                {"cache_hit", Duration(0, 0)},
                {"cache_miss", Duration(0, 0)}}},
              {"batch_stats", batches},
              {"memory_usage", json::array()}};
}

json MetadataJson(ModelRepository* repo, ModelVersion& v) {
  const auto& c = v.config();
  const bool batched = c.max_batch_size() > 0;
  auto tensors = [&](const auto& list) {
    json arr = json::array();
    for (const auto& t : list) {
      json shape = json::array();
      if (batched) shape.push_back(-1);
      for (int64_t d : t.dims()) shape.push_back(d);
      arr.push_back({{"name", t.name()},
                     {"datatype", std::string(ConfigTypeToDatatype(t.data_type()))},
                     {"shape", shape}});
    }
    return arr;
  };
  json versions = json::array();
  for (auto& mv : repo->Versions(v.name())) versions.push_back(mv->version_string());
  return json{{"name", v.name()},
              {"versions", versions},
              {"platform", c.platform().empty() ? c.backend() : c.platform()},
              {"inputs", tensors(c.input())},
              {"outputs", tensors(c.output())}};
}

bool Authorized(const ApiContext* ctx, const HttpRequest& r) {
  return ctx->admin_token.empty() || r.authorization == "Bearer " + ctx->admin_token;
}

void HandleRepository(ApiContext* ctx, const std::vector<std::string>& p, HttpRequest&& req,
                      HttpResponder respond) {
  if (!Authorized(ctx, req)) {
    HttpResponse r =
        Json(401, json{{"error", "repository API needs 'Authorization: Bearer <token>'"}});
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return respond(std::move(r));
  }
  json body = json::object();
  if (!req.body.empty()) {
    body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return respond(Error(InvalidArgumentError("request body is not a JSON object")));
    }
  }
  if (p.size() == 3 && p[2] == "index") {
    bool ready = body.contains("ready") && body["ready"].is_boolean() && body["ready"].get<bool>();
    json arr = json::array();
    for (const auto& e : ctx->repo->Index(ready)) {
      json j{{"name", e.name}};
      if (!e.version.empty()) j["version"] = e.version;
      if (!e.state.empty()) j["state"] = e.state;
      if (!e.reason.empty()) j["reason"] = e.reason;
      arr.push_back(std::move(j));
    }
    return respond(Json(200, arr));
  }
  if (p.size() == 5 && p[2] == "models" && (p[4] == "load" || p[4] == "unload")) {
    if (Status s = ctx->repo->CheckControlAllowed(); !s.ok()) return respond(Error(s));
    if (Status s = ValidateModelName(p[3]); !s.ok()) return respond(Error(s));
    std::string config;
    if (body.contains("parameters") && body["parameters"].is_object()) {
      for (auto& [k, v] : body["parameters"].items()) {
        if (k == "config") {
          if (!v.is_string()) {
            return respond(Error(InvalidArgumentError("parameter 'config' must be a JSON string")));
          }
          config = v.get<std::string>();
        } else if (k.rfind("file:", 0) == 0) {
          return respond(Error(
              Status(StatusCode::kUnimplemented, "load with 'file:' overrides is not supported")));
        }
      }
    }
    std::string name = p[3];
    bool load = p[4] == "load";
    ModelRepository* repo = ctx->repo;
    ctx->control->Post([repo, name, load, config, respond] {
      Status s = load ? repo->Load(name, config) : repo->Unload(name);
      respond(s.ok() ? Empty(200) : Error(s));
    });
    return;
  }
  respond(Json(404, json{{"error", "Not Found"}}));
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kResourceExhausted:
      return 503;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kInternal:
    case StatusCode::kDataLoss:
      return 500;
    default:
      return 400;
  }
}

ControlQueue::ControlQueue() {
  thread_ = std::thread([this] {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [this] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  });
}

ControlQueue::~ControlQueue() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ControlQueue::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

Status DecodeInferRequest(const HttpRequest& http, InferRequest* out) {
  size_t header_len = http.inference_header_length.value_or(http.body.size());
  std::string_view header(http.body.data(), header_len);
  std::string_view binary(http.body.data() + header_len, http.body.size() - header_len);
  if (header_len == 0) {
    return Status(StatusCode::kUnimplemented,
                  "raw binary requests (Inference-Header-Content-Length: 0) are not supported; "
                  "send a JSON header");
  }
  json j = json::parse(header, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError("inference request header is not a JSON object");
  }
  if (j.contains("id")) {
    if (!j["id"].is_string()) return InvalidArgumentError("'id' must be a string");
    out->id = j["id"].get<std::string>();
  }
  if (j.contains("parameters")) {
    const json& params = j["parameters"];
    if (!params.is_object()) return InvalidArgumentError("'parameters' must be an object");
    if (params.contains("priority")) {
      if (!params["priority"].is_number_integer()) {
        return InvalidArgumentError("parameter 'priority' must be an integer");
      }
      out->priority = params["priority"].get<int64_t>();
    }
    if (params.contains("timeout")) {
      if (!params["timeout"].is_number_integer() || params["timeout"].get<int64_t>() < 0) {
        return InvalidArgumentError("parameter 'timeout' must be a non-negative integer (us)");
      }
      out->timeout_us = params["timeout"].get<uint64_t>();
    }
    if (params.contains("binary_data_output") && params["binary_data_output"].is_boolean()) {
      out->binary_output = params["binary_data_output"].get<bool>();
    }
  }
  if (!j.contains("inputs") || !j["inputs"].is_array()) {
    return InvalidArgumentError("inference request needs an 'inputs' array");
  }
  size_t offset = 0;
  for (const auto& in : j["inputs"]) {
    if (!in.is_object() || !in.contains("name") || !in["name"].is_string() ||
        !in.contains("datatype") || !in["datatype"].is_string() || !in.contains("shape")) {
      return InvalidArgumentError("each input needs 'name', 'datatype' and 'shape'");
    }
    InferTensor t;
    t.name = in["name"].get<std::string>();
    t.datatype = in["datatype"].get<std::string>();
    SURGE_ASSIGN_OR_RETURN(t.shape, ParseShapeJson(in["shape"], t.name));
    if (!t.is_bytes()) SURGE_RETURN_IF_ERROR(DTypeFromDatatype(t.datatype).status());
    const json* params = in.contains("parameters") ? &in["parameters"] : nullptr;
    if (params && params->contains("binary_data_size")) {
      const json& sz = (*params)["binary_data_size"];
      if (!sz.is_number_integer() || sz.get<int64_t>() < 0) {
        return InvalidArgumentError("input '{}': binary_data_size must be a non-negative integer",
                                    t.name);
      }
      size_t n = sz.get<size_t>();
      if (n > binary.size() - offset) {
        return InvalidArgumentError(
            "input '{}': binary_data_size {} exceeds the {} bytes left in "
            "the request body",
            t.name, n, binary.size() - offset);
      }
      std::string_view bytes = binary.substr(offset, n);
      offset += n;
      if (t.is_bytes()) {
        SURGE_ASSIGN_OR_RETURN(t.strings, UnpackBytes(bytes, t.numel()));
      } else {
        SURGE_ASSIGN_OR_RETURN(DType dt, DTypeFromDatatype(t.datatype));
        size_t want = static_cast<size_t>(t.numel()) * DTypeSize(dt);
        if (n != want) {
          return InvalidArgumentError(
              "input '{}': {} bytes of binary data, but shape {} of {} "
              "needs {}",
              t.name, n, ShapeToString(t.shape), t.datatype, want);
        }
        t.tensor = Tensor(dt, t.shape);
        if (n) std::memcpy(t.tensor.data(), bytes.data(), n);
      }
    } else if (in.contains("data")) {
      SURGE_RETURN_IF_ERROR(FillFromJson(in["data"], &t));
    } else {
      return InvalidArgumentError("input '{}' has neither 'data' nor binary_data_size", t.name);
    }
    out->inputs.push_back(std::move(t));
  }
  if (offset != binary.size()) {
    return InvalidArgumentError("{} bytes of binary data follow the inputs unused",
                                binary.size() - offset);
  }
  if (j.contains("outputs")) {
    if (!j["outputs"].is_array()) return InvalidArgumentError("'outputs' must be an array");
    for (const auto& o : j["outputs"]) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) {
        return InvalidArgumentError("each requested output needs a 'name'");
      }
      RequestedOutput ro;
      ro.name = o["name"].get<std::string>();
      ro.binary = out->binary_output;
      if (o.contains("parameters") && o["parameters"].is_object()) {
        const json& p = o["parameters"];
        if (p.contains("binary_data") && p["binary_data"].is_boolean()) {
          ro.binary = p["binary_data"].get<bool>();
        }
        if (p.contains("classification")) {
          if (!p["classification"].is_number_integer() || p["classification"].get<int64_t>() < 0) {
            return InvalidArgumentError("output '{}': classification must be a positive integer",
                                        ro.name);
          }
          ro.classification = p["classification"].get<int64_t>();
        }
      }
      out->outputs.push_back(std::move(ro));
    }
  }
  return Status::Ok();
}

HttpResponse EncodeInferResponse(const InferResponse& resp) {
  json j{{"model_name", resp.model_name}, {"model_version", resp.model_version}};
  if (!resp.id.empty()) j["id"] = resp.id;
  json outs = json::array();
  std::string blob;
  for (size_t i = 0; i < resp.outputs.size(); ++i) {
    const InferTensor& t = resp.outputs[i];
    json o{{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}};
    bool binary = i < resp.binary.size() && resp.binary[i];
    if (binary) {
      size_t before = blob.size();
      if (t.is_bytes()) {
        blob += PackBytes(t.strings);
      } else {
        blob.append(static_cast<const char*>(t.tensor.data()), t.tensor.nbytes());
      }
      o["parameters"] = {{"binary_data_size", blob.size() - before}};
    } else {
      o["data"] = TensorToJson(t);
    }
    outs.push_back(std::move(o));
  }
  j["outputs"] = std::move(outs);
  HttpResponse r;
  r.body = j.dump();
  if (!blob.empty()) {
    r.headers.emplace_back("Inference-Header-Content-Length", std::to_string(r.body.size()));
    r.content_type = "application/octet-stream";
    r.body += blob;
  }
  return r;
}

std::vector<ModelMetricsView> MetricsViews(ModelRepository* repo,
                                           std::vector<std::shared_ptr<ModelVersion>>* keep) {
  *keep = repo->AllVersions();
  std::vector<ModelMetricsView> views;
  for (auto& v : *keep) {
    views.push_back({v->name(), v->version_string(), &v->stats(), v->pending()});
  }
  return views;
}

HttpHandler MakeMetricsHandler(ApiContext* ctx) {
  return [ctx](HttpRequest&& req, HttpResponder respond, const std::shared_ptr<HttpCall>&) {
    auto p = SplitPath(req.target);
    if (p.size() != 1 || p[0] != "metrics") return respond(Json(404, json{{"error", "Not Found"}}));
    std::vector<std::shared_ptr<ModelVersion>> keep;
    auto views = MetricsViews(ctx->repo, &keep);
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = RenderMetrics(views, ctx->gpus ? ctx->gpus->Latest() : std::vector<GpuSample>{});
    respond(std::move(r));
  };
}

HttpHandler MakeKServeHandler(ApiContext* ctx) {
  return [ctx](HttpRequest&& req, HttpResponder respond, const std::shared_ptr<HttpCall>& call) {
    auto p = SplitPath(req.target);
    ModelRepository* repo = ctx->repo;
    if (p.empty() || p[0] != "v2") return respond(Json(404, json{{"error", "Not Found"}}));
    if (p.size() == 1) {
      return respond(Json(200, json{{"name", ctx->server_name},
                                    {"version", ctx->server_version},
                                    {"extensions", ServerExtensions()}}));
    }
    if (p[1] == "health" && p.size() == 3) {
      if (p[2] == "live") return respond(Empty(200));
      if (p[2] == "ready") return respond(Empty(repo->Ready() ? 200 : 400));
    }
    if (p[1] == "repository") return HandleRepository(ctx, p, std::move(req), std::move(respond));
    if (p[1] != "models") return respond(Json(404, json{{"error", "Not Found"}}));
    // v2/models/stats
    if (p.size() == 3 && p[2] == "stats") {
      json arr = json::array();
      for (auto& v : repo->AllVersions()) arr.push_back(StatsJson(*v));
      return respond(Json(200, json{{"model_stats", arr}}));
    }
    if (p.size() < 3) return respond(Json(404, json{{"error", "Not Found"}}));
    std::string model = p[2];
    std::string version;
    size_t i = 3;
    if (p.size() >= 5 && p[3] == "versions") {
      version = p[4];
      i = 5;
    }
    std::string action = i < p.size() ? p[i] : "";
    if (i + 1 < p.size()) return respond(Json(404, json{{"error", "Not Found"}}));
    if (action == "infer") {
      if (req.method != "POST") {
        return respond(Json(405, json{{"error", "infer needs POST"}}));
      }
      InferRequest r;
      if (Status s = DecodeInferRequest(req, &r); !s.ok()) return respond(Error(s));
      r.model_name = model;
      r.model_version = version;
      r.cancelled = call->cancelled;
      call->on_cancel = [repo, model] { repo->Poke(model); };
      repo->Infer(std::move(r), [respond](Result<InferResponse> res) {
        if (!res.ok()) return respond(Error(res.status()));
        respond(EncodeInferResponse(*res));
      });
      return;
    }
    if (action == "stats") {
      json arr = json::array();
      if (version.empty()) {
        for (auto& v : repo->Versions(model)) arr.push_back(StatsJson(*v));
        if (arr.empty()) {
          return respond(Error(NotFoundError("requested model '{}' is not available", model)));
        }
      } else {
        auto v = repo->Find(model, version);
        if (!v.ok()) return respond(Error(v.status()));
        arr.push_back(StatsJson(**v));
      }
      return respond(Json(200, json{{"model_stats", arr}}));
    }
    auto v = repo->Find(model, version);
    if (action == "ready") return respond(Empty(v.ok() ? 200 : 400));
    if (!v.ok()) return respond(Error(v.status()));
    if (action.empty()) return respond(Json(200, MetadataJson(repo, **v)));
    if (action == "config") {
      HttpResponse r;
      r.body = ConfigToJson((*v)->config());
      return respond(std::move(r));
    }
    respond(Json(404, json{{"error", "Not Found"}}));
  };
}

}  // namespace surge::serve
