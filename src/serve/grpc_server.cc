#include "serve/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "core/logging.h"
#include "serve/model_config.h"
#include "serve/proto/grpc_service.grpc.pb.h"

namespace surge::serve {
namespace {

using grpc::ServerContext;
using grpc::StatusCode;

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  grpc::StatusCode c = grpc::StatusCode::UNKNOWN;
  switch (s.code()) {
    case surge::StatusCode::kInvalidArgument:
    case surge::StatusCode::kOutOfRange:
    case surge::StatusCode::kFailedPrecondition:
      c = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case surge::StatusCode::kNotFound:
      c = grpc::StatusCode::NOT_FOUND;
      break;
    case surge::StatusCode::kAlreadyExists:
      c = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case surge::StatusCode::kUnimplemented:
      c = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case surge::StatusCode::kUnavailable:
    case surge::StatusCode::kDeadlineExceeded:
    case surge::StatusCode::kResourceExhausted:
      c = grpc::StatusCode::UNAVAILABLE;
      break;
    case surge::StatusCode::kCancelled:
      c = grpc::StatusCode::CANCELLED;
      break;
    case surge::StatusCode::kInternal:
    case surge::StatusCode::kDataLoss:
      c = grpc::StatusCode::INTERNAL;
      break;
    default:
      break;
  }
  return grpc::Status(c, s.message());
}

template <typename T>
void CopyTyped(const google::protobuf::RepeatedField<T>& src, Tensor* t) {
  auto n = static_cast<int64_t>(src.size());
  switch (t->dtype()) {
    case DType::kBool:
    case DType::kUInt8:
      for (int64_t i = 0; i < n; ++i) t->data_as<uint8_t>()[i] = static_cast<uint8_t>(src[i]);
      break;
    case DType::kInt8:
      for (int64_t i = 0; i < n; ++i) t->data_as<int8_t>()[i] = static_cast<int8_t>(src[i]);
      break;
    case DType::kInt32:
      for (int64_t i = 0; i < n; ++i) t->data_as<int32_t>()[i] = static_cast<int32_t>(src[i]);
      break;
    case DType::kInt64:
      for (int64_t i = 0; i < n; ++i) t->data_as<int64_t>()[i] = static_cast<int64_t>(src[i]);
      break;
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) t->data_as<float>()[i] = static_cast<float>(src[i]);
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) t->data_as<double>()[i] = static_cast<double>(src[i]);
      break;
    default:
      break;
  }
}

Status DecodeGrpc(const inference::ModelInferRequest& g, InferRequest* r) {
  r->model_name = g.model_name();
  r->model_version = g.model_version();
  r->id = g.id();
  for (const auto& [k, v] : g.parameters()) {
    if (k == "priority") r->priority = v.has_int64_param() ? v.int64_param() : v.uint64_param();
    if (k == "timeout") {
      int64_t t = v.has_int64_param() ? v.int64_param() : static_cast<int64_t>(v.uint64_param());
      if (t < 0) return InvalidArgumentError("parameter 'timeout' must be non-negative");
      r->timeout_us = static_cast<uint64_t>(t);
    }
  }
  bool raw = g.raw_input_contents_size() > 0;
  if (raw && g.raw_input_contents_size() != g.inputs_size()) {
    return InvalidArgumentError("{} raw_input_contents for {} inputs", g.raw_input_contents_size(),
                                g.inputs_size());
  }
  for (int i = 0; i < g.inputs_size(); ++i) {
    const auto& in = g.inputs(i);
    InferTensor t;
    t.name = in.name();
    t.datatype = in.datatype();
    int64_t n = 1;
    for (int64_t d : in.shape()) {
      if (d < 0 || (d > 0 && n > (int64_t{1} << 31) / d)) {
        return InvalidArgumentError("input '{}': invalid shape", t.name);
      }
      n *= d;
      t.shape.push_back(d);
    }
    if (t.is_bytes()) {
      if (raw) {
        SURGE_ASSIGN_OR_RETURN(t.strings, UnpackBytes(g.raw_input_contents(i), n));
      } else {
        if (in.contents().bytes_contents_size() != n) {
          return InvalidArgumentError("input '{}': {} bytes_contents for {} elements", t.name,
                                      in.contents().bytes_contents_size(), n);
        }
        t.strings.assign(in.contents().bytes_contents().begin(),
                         in.contents().bytes_contents().end());
      }
      r->inputs.push_back(std::move(t));
      continue;
    }
    SURGE_ASSIGN_OR_RETURN(DType dt, DTypeFromDatatype(t.datatype));
    t.tensor = Tensor(dt, t.shape);
    if (raw) {
      const std::string& bytes = g.raw_input_contents(i);
      if (bytes.size() != t.tensor.nbytes()) {
        return InvalidArgumentError("input '{}': {} bytes of raw data, but shape {} of {} needs {}",
                                    t.name, bytes.size(), ShapeToString(t.shape), t.datatype,
                                    t.tensor.nbytes());
      }
      if (!bytes.empty()) std::memcpy(t.tensor.data(), bytes.data(), bytes.size());
    } else {
      const auto& c = in.contents();
      int64_t got = 0;
      switch (dt) {
        case DType::kBool:
          got = c.bool_contents_size();
          CopyTyped(c.bool_contents(), &t.tensor);
          break;
        case DType::kUInt8:
          got = c.uint_contents_size();
          CopyTyped(c.uint_contents(), &t.tensor);
          break;
        case DType::kInt8:
        case DType::kInt32:
          got = c.int_contents_size();
          CopyTyped(c.int_contents(), &t.tensor);
          break;
        case DType::kInt64:
          got = c.int64_contents_size();
          CopyTyped(c.int64_contents(), &t.tensor);
          break;
        case DType::kFloat32:
          got = c.fp32_contents_size();
          CopyTyped(c.fp32_contents(), &t.tensor);
          break;
        case DType::kFloat64:
          got = c.fp64_contents_size();
          CopyTyped(c.fp64_contents(), &t.tensor);
          break;
        default:
          return InvalidArgumentError("input '{}': {} needs raw_input_contents", t.name,
                                      t.datatype);
      }
      if (got != n) {
        return InvalidArgumentError("input '{}': {} elements in contents, shape {} needs {}",
                                    t.name, got, ShapeToString(t.shape), n);
      }
    }
    r->inputs.push_back(std::move(t));
  }
  for (const auto& o : g.outputs()) {
    RequestedOutput ro;
    ro.name = o.name();
    auto it = o.parameters().find("classification");
    if (it != o.parameters().end()) ro.classification = it->second.int64_param();
    r->outputs.push_back(std::move(ro));
  }
  return Status::Ok();
}

void EncodeGrpc(const InferResponse& r, inference::ModelInferResponse* g) {
  g->set_model_name(r.model_name);
  g->set_model_version(r.model_version);
  g->set_id(r.id);
  for (const auto& t : r.outputs) {
    auto* o = g->add_outputs();
    o->set_name(t.name);
    o->set_datatype(t.datatype);
    for (int64_t d : t.shape) o->add_shape(d);
    if (t.is_bytes()) {
      g->add_raw_output_contents(PackBytes(t.strings));
    } else {
      g->add_raw_output_contents(static_cast<const char*>(t.tensor.data()), t.tensor.nbytes());
    }
  }
}

void FillDuration(uint64_t count, uint64_t ns, inference::StatisticDuration* d) {
  d->set_count(count);
  d->set_ns(ns);
}

void FillStats(ModelVersion& v, inference::ModelStatistics* s) {
  ModelStats& st = v.stats();
  s->set_name(v.name());
  s->set_version(v.version_string());
  s->set_last_inference(st.last_inference_ms.load());
  s->set_inference_count(st.inference_count.load());
  s->set_execution_count(st.execution_count.load());
  auto* is = s->mutable_inference_stats();
  FillDuration(st.success.count, st.success.ns, is->mutable_success());
  FillDuration(st.fail.count, st.fail.ns, is->mutable_fail());
  FillDuration(st.queue.count, st.queue.ns, is->mutable_queue());
  FillDuration(st.compute_input.count, st.compute_input.ns, is->mutable_compute_input());
  FillDuration(st.compute_infer.count, st.compute_infer.ns, is->mutable_compute_infer());
  FillDuration(st.compute_output.count, st.compute_output.ns, is->mutable_compute_output());
  is->mutable_cache_hit();
  is->mutable_cache_miss();
  for (const auto& [bs, b] : st.BatchSnapshot()) {
    auto* bst = s->add_batch_stats();
    bst->set_batch_size(bs);
    FillDuration(b.count, b.compute_input_ns, bst->mutable_compute_input());
    FillDuration(b.count, b.compute_infer_ns, bst->mutable_compute_infer());
    FillDuration(b.count, b.compute_output_ns, bst->mutable_compute_output());
  }
}

class Service final : public inference::GRPCInferenceService::Service {
 public:
  explicit Service(ApiContext* ctx) : ctx_(ctx) {}

  grpc::Status ServerLive(ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* r) override {
    r->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerReady(ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* r) override {
    r->set_ready(ctx_->repo->Ready());
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(ServerContext*, const inference::ModelReadyRequest* q,
                          inference::ModelReadyResponse* r) override {
    r->set_ready(ctx_->repo->Find(q->name(), q->version()).ok());
    return grpc::Status::OK;
  }
  grpc::Status ServerMetadata(ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* r) override {
    r->set_name(ctx_->server_name);
    r->set_version(ctx_->server_version);
    for (const auto& e : ServerExtensions()) r->add_extensions(e);
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(ServerContext*, const inference::ModelMetadataRequest* q,
                             inference::ModelMetadataResponse* r) override {
    auto v = ctx_->repo->Find(q->name(), q->version());
    if (!v.ok()) return ToGrpc(v.status());
    const auto& c = (*v)->config();
    r->set_name(c.name());
    for (auto& mv : ctx_->repo->Versions(c.name())) r->add_versions(mv->version_string());
    r->set_platform(c.platform().empty() ? c.backend() : c.platform());
    const bool batched = c.max_batch_size() > 0;
    auto fill = [&](const auto& list, auto* out) {
      for (const auto& t : list) {
        auto* m = out->Add();
        m->set_name(t.name());
        m->set_datatype(std::string(ConfigTypeToDatatype(t.data_type())));
        if (batched) m->add_shape(-1);
        for (int64_t d : t.dims()) m->add_shape(d);
      }
    };
    fill(c.input(), r->mutable_inputs());
    fill(c.output(), r->mutable_outputs());
    return grpc::Status::OK;
  }
  grpc::Status ModelConfig(ServerContext*, const inference::ModelConfigRequest* q,
                           inference::ModelConfigResponse* r) override {
    auto v = ctx_->repo->Find(q->name(), q->version());
    if (!v.ok()) return ToGrpc(v.status());
    *r->mutable_config() = (*v)->config();
    return grpc::Status::OK;
  }
  grpc::Status ModelStatistics(ServerContext*, const inference::ModelStatisticsRequest* q,
                               inference::ModelStatisticsResponse* r) override {
    if (q->name().empty()) {
      for (auto& v : ctx_->repo->AllVersions()) FillStats(*v, r->add_model_stats());
      return grpc::Status::OK;
    }
    if (q->version().empty()) {
      auto vs = ctx_->repo->Versions(q->name());
      if (vs.empty()) {
        return ToGrpc(NotFoundError("requested model '{}' is not available", q->name()));
      }
      for (auto& v : vs) FillStats(*v, r->add_model_stats());
      return grpc::Status::OK;
    }
    auto v = ctx_->repo->Find(q->name(), q->version());
    if (!v.ok()) return ToGrpc(v.status());
    FillStats(**v, r->add_model_stats());
    return grpc::Status::OK;
  }
  grpc::Status RepositoryIndex(ServerContext* c, const inference::RepositoryIndexRequest* q,
                               inference::RepositoryIndexResponse* r) override {
    if (!Authorized(c)) return Unauthorized();
    for (const auto& e : ctx_->repo->Index(q->ready())) {
      auto* m = r->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return grpc::Status::OK;
  }
  grpc::Status RepositoryModelLoad(ServerContext* c, const inference::RepositoryModelLoadRequest* q,
                                   inference::RepositoryModelLoadResponse*) override {
    if (!Authorized(c)) return Unauthorized();
    if (Status s = ctx_->repo->CheckControlAllowed(); !s.ok()) return ToGrpc(s);
    std::string config;
    for (const auto& [k, v] : q->parameters()) {
      if (k == "config") config = v.string_param();
      if (k.rfind("file:", 0) == 0) {
        return ToGrpc(Status(surge::StatusCode::kUnimplemented,
                             "load with 'file:' overrides is not supported"));
      }
    }
    return ToGrpc(ctx_->repo->Load(q->model_name(), config));
  }
  grpc::Status RepositoryModelUnload(ServerContext* c,
                                     const inference::RepositoryModelUnloadRequest* q,
                                     inference::RepositoryModelUnloadResponse*) override {
    if (!Authorized(c)) return Unauthorized();
    if (Status s = ctx_->repo->CheckControlAllowed(); !s.ok()) return ToGrpc(s);
    return ToGrpc(ctx_->repo->Unload(q->model_name()));
  }

  grpc::Status ModelInfer(ServerContext* c, const inference::ModelInferRequest* q,
                          inference::ModelInferResponse* r) override {
    InferRequest req;
    if (Status s = DecodeGrpc(*q, &req); !s.ok()) return ToGrpc(s);
    struct Wait {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      Status status;
    };
    auto w = std::make_shared<Wait>();
    req.cancelled = std::make_shared<std::atomic<bool>>(false);
    CancelFlag flag = req.cancelled;
    std::string model = req.model_name;
    ctx_->repo->Infer(std::move(req), [w, r](Result<InferResponse> res) {
      std::lock_guard<std::mutex> lk(w->mu);
      if (res.ok()) {
        EncodeGrpc(*res, r);
      } else {
        w->status = res.status();
      }
      w->done = true;
      w->cv.notify_all();
    });
    std::unique_lock<std::mutex> lk(w->mu);
    while (!w->done) {
      if (w->cv.wait_for(lk, std::chrono::milliseconds(50)) == std::cv_status::timeout &&
          c->IsCancelled() && !flag->load()) {
        flag->store(true);
        ctx_->repo->Poke(model);
      }
    }
    return ToGrpc(w->status);
  }

  grpc::Status ModelStreamInfer(
      ServerContext* c,
      grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>*
          stream) override {
    struct Shared {
      std::mutex mu;
      std::condition_variable cv;
      int outstanding = 0;
    };
    auto sh = std::make_shared<Shared>();
    inference::ModelInferRequest q;
    while (stream->Read(&q)) {
      InferRequest req;
      Status s = DecodeGrpc(q, &req);
      if (!s.ok()) {
        inference::ModelStreamInferResponse resp;
        resp.set_error_message(s.message());
        std::lock_guard<std::mutex> lk(sh->mu);
        stream->Write(resp);
        continue;
      }
      {
        std::lock_guard<std::mutex> lk(sh->mu);
        ++sh->outstanding;
      }
      std::string id = req.id;
      ctx_->repo->Infer(std::move(req), [sh, stream, id](Result<InferResponse> res) {
        inference::ModelStreamInferResponse resp;
        if (res.ok()) {
          EncodeGrpc(*res, resp.mutable_infer_response());
        } else {
          resp.set_error_message(res.status().message());
          resp.mutable_infer_response()->set_id(id);
        }
        std::lock_guard<std::mutex> lk(sh->mu);
        stream->Write(resp);
        --sh->outstanding;
        sh->cv.notify_all();
      });
    }
    std::unique_lock<std::mutex> lk(sh->mu);
    sh->cv.wait(lk, [&] { return sh->outstanding == 0; });
    return grpc::Status::OK;
  }

 private:
  bool Authorized(ServerContext* c) const {
    if (ctx_->admin_token.empty()) return true;
    auto it = c->client_metadata().find("authorization");
    return it != c->client_metadata().end() &&
           std::string(it->second.data(), it->second.size()) == "Bearer " + ctx_->admin_token;
  }
  static grpc::Status Unauthorized() {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "repository API needs metadata 'authorization: Bearer <token>'");
  }

  ApiContext* ctx_;
};

}  // namespace

struct GrpcServer::Impl {
  GrpcServerOptions options;
  ApiContext* ctx;
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
  int bound_port = 0;
};

GrpcServer::GrpcServer(GrpcServerOptions options, ApiContext* ctx)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->ctx = ctx;
}

GrpcServer::~GrpcServer() { Stop(); }

Status GrpcServer::Start() {
  impl_->service = std::make_unique<Service>(impl_->ctx);
  grpc::ServerBuilder b;
  std::string addr = fmt::format("{}:{}", impl_->options.address, impl_->options.port);
  b.AddListeningPort(addr, grpc::InsecureServerCredentials(), &impl_->bound_port);
  b.SetMaxReceiveMessageSize(impl_->options.max_message_bytes);
  b.SetMaxSendMessageSize(impl_->options.max_message_bytes);
  b.RegisterService(impl_->service.get());
  impl_->server = b.BuildAndStart();
  if (!impl_->server || impl_->bound_port == 0) {
    impl_->server.reset();
    return UnavailableError("cannot listen for gRPC on {}", addr);
  }
  return Status::Ok();
}

void GrpcServer::Stop() {
  if (impl_ && impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
    impl_->server->Wait();
    impl_->server.reset();
  }
}

int GrpcServer::port() const { return impl_->bound_port; }

}  // namespace surge::serve
