#include "serve/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "serve/model_config.h"
#include "serve/proto/grpc_service.grpc.pb.h"

namespace surge::serve {
namespace {

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

// A unary call answered at once.
grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* c, const grpc::Status& s) {
  grpc::ServerUnaryReactor* r = c->DefaultReactor();
  r->Finish(s);
  return r;
}

// ModelStreamInfer: reads requests one after another and queues each; answers are written in the
// order they complete, one write at a time. The call finishes once the client has half-closed,
// every request was answered and every answer written. Cancelling the stream cancels its queued
// requests. gRPC operations are started outside mu_, since gRPC may run a reaction at once.
class StreamReactor final : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                                           inference::ModelStreamInferResponse> {
 public:
  using Response = inference::ModelStreamInferResponse;

  explicit StreamReactor(ModelRepository* repo) : repo_(repo) { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      bool finish;
      {
        std::lock_guard<std::mutex> lk(mu_);
        reading_ = false;
        finish = ShouldFinishLocked();
      }
      if (finish) Finish(grpc::Status::OK);
      return;
    }
    InferRequest req;
    if (Status s = DecodeGrpc(request_, &req); !s.ok()) {
      Response resp;
      resp.set_error_message(s.message());
      Answer(std::move(resp), false);
    } else {
      {
        std::lock_guard<std::mutex> lk(mu_);
        ++outstanding_;
        models_.insert(req.model_name);
      }
      req.cancelled = cancelled_;
      std::string id = req.id;
      repo_->Infer(std::move(req), [this, id](Result<InferResponse> res) {
        Response resp;
        if (res.ok()) {
          EncodeGrpc(*res, resp.mutable_infer_response());
        } else {
          resp.set_error_message(res.status().message());
          resp.mutable_infer_response()->set_id(id);
        }
        Answer(std::move(resp), true);
      });
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    const Response* next = nullptr;
    bool finish = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      writes_.pop_front();
      if (!ok) broken_ = true;  // the client is gone: drop the answers still to come
      if (broken_) writes_.clear();
      if (!writes_.empty()) {
        next = &writes_.front();
      } else {
        writing_ = false;
        finish = ShouldFinishLocked();
      }
    }
    if (next) StartWrite(next);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnCancel() override {
    cancelled_->store(true);
    std::set<std::string> models;
    {
      std::lock_guard<std::mutex> lk(mu_);
      models = models_;
    }
    for (const auto& m : models) repo_->Poke(m);
  }

  void OnDone() override { delete this; }

 private:
  // Queues an answer (`answered`: for a request that was outstanding) and starts writing it when
  // no write is in flight.
  void Answer(Response resp, bool answered) {
    const Response* start = nullptr;
    bool finish = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (answered) --outstanding_;
      if (broken_) {
        finish = ShouldFinishLocked();
      } else {
        writes_.push_back(std::move(resp));
        if (!writing_) {
          writing_ = true;
          start = &writes_.front();
        }
      }
    }
    if (start) StartWrite(start);
    if (finish) Finish(grpc::Status::OK);
  }
  bool ShouldFinishLocked() {
    if (reading_ || outstanding_ > 0 || writing_ || finished_) return false;
    finished_ = true;
    return true;
  }

  ModelRepository* repo_;
  inference::ModelInferRequest request_;
  CancelFlag cancelled_ = std::make_shared<std::atomic<bool>>(false);
  std::mutex mu_;
  bool reading_ = true;
  bool writing_ = false;
  bool broken_ = false;
  bool finished_ = false;
  int outstanding_ = 0;
  std::deque<Response> writes_;  // front: being written; a deque keeps it in place
  std::set<std::string> models_;
};

// ModelInfer runs on gRPC's asynchronous API (AsyncInfer below); every other method on the callback
// API. Nothing blocks gRPC's threads: inference is answered from the scheduler, model load/unload
// from the control queue.
using G = inference::GRPCInferenceService;
using ServiceBase = G::WithCallbackMethod_ServerLive<
    G::WithCallbackMethod_ServerReady<G::WithCallbackMethod_ModelReady<
        G::WithCallbackMethod_ServerMetadata<G::WithCallbackMethod_ModelMetadata<
            G::WithAsyncMethod_ModelInfer<G::WithCallbackMethod_ModelStreamInfer<
                G::WithCallbackMethod_ModelConfig<G::WithCallbackMethod_ModelStatistics<
                    G::WithCallbackMethod_RepositoryIndex<G::WithCallbackMethod_RepositoryModelLoad<
                        G::WithCallbackMethod_RepositoryModelUnload<G::Service>>>>>>>>>>>>;

class Service final : public ServiceBase {
 public:
  explicit Service(ApiContext* ctx) : ctx_(ctx) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* c,
                                       const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* r) override {
    r->set_live(true);
    return Reply(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* c,
                                        const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* r) override {
    r->set_ready(ctx_->repo->Ready());
    return Reply(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* c,
                                       const inference::ModelReadyRequest* q,
                                       inference::ModelReadyResponse* r) override {
    r->set_ready(ctx_->repo->Find(q->name(), q->version()).ok());
    return Reply(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* c,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* r) override {
    r->set_name(ctx_->server_name);
    r->set_version(ctx_->server_version);
    for (const auto& e : ServerExtensions()) r->add_extensions(e);
    return Reply(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* c,
                                          const inference::ModelMetadataRequest* q,
                                          inference::ModelMetadataResponse* r) override {
    auto v = ctx_->repo->Find(q->name(), q->version());
    if (!v.ok()) return Reply(c, ToGrpc(v.status()));
    const auto& cfg = (*v)->config();
    r->set_name(cfg.name());
    for (auto& mv : ctx_->repo->Versions(cfg.name())) r->add_versions(mv->version_string());
    r->set_platform(cfg.platform().empty() ? cfg.backend() : cfg.platform());
    const bool batched = cfg.max_batch_size() > 0;
    auto fill = [&](const auto& list, auto* out) {
      for (const auto& t : list) {
        auto* m = out->Add();
        m->set_name(t.name());
        m->set_datatype(std::string(ConfigTypeToDatatype(t.data_type())));
        if (batched) m->add_shape(-1);
        for (int64_t d : t.dims()) m->add_shape(d);
      }
    };
    fill(cfg.input(), r->mutable_inputs());
    fill(cfg.output(), r->mutable_outputs());
    return Reply(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* c,
                                        const inference::ModelConfigRequest* q,
                                        inference::ModelConfigResponse* r) override {
    auto v = ctx_->repo->Find(q->name(), q->version());
    if (!v.ok()) return Reply(c, ToGrpc(v.status()));
    *r->mutable_config() = (*v)->config();
    return Reply(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* c,
                                            const inference::ModelStatisticsRequest* q,
                                            inference::ModelStatisticsResponse* r) override {
    if (q->name().empty()) {
      for (auto& v : ctx_->repo->AllVersions()) FillStats(*v, r->add_model_stats());
      return Reply(c, grpc::Status::OK);
    }
    if (q->version().empty()) {
      auto vs = ctx_->repo->Versions(q->name());
      if (vs.empty()) {
        return Reply(c, ToGrpc(NotFoundError("requested model '{}' is not available", q->name())));
      }
      for (auto& v : vs) FillStats(*v, r->add_model_stats());
      return Reply(c, grpc::Status::OK);
    }
    auto v = ctx_->repo->Find(q->name(), q->version());
    if (!v.ok()) return Reply(c, ToGrpc(v.status()));
    FillStats(**v, r->add_model_stats());
    return Reply(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* c,
                                            const inference::RepositoryIndexRequest* q,
                                            inference::RepositoryIndexResponse* r) override {
    if (!Authorized(c)) return Reply(c, Unauthorized());
    for (const auto& e : ctx_->repo->Index(q->ready())) {
      auto* m = r->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return Reply(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* c,
                                                const inference::RepositoryModelLoadRequest* q,
                                                inference::RepositoryModelLoadResponse*) override {
    if (!Authorized(c)) return Reply(c, Unauthorized());
    if (Status s = ctx_->repo->CheckControlAllowed(); !s.ok()) return Reply(c, ToGrpc(s));
    std::string config;
    for (const auto& [k, v] : q->parameters()) {
      if (k == "config") config = v.string_param();
      if (k.rfind("file:", 0) == 0) {
        return Reply(c, ToGrpc(Status(surge::StatusCode::kUnimplemented,
                                      "load with 'file:' overrides is not supported")));
      }
    }
    return Control(c, [repo = ctx_->repo, name = q->model_name(), config] {
      return repo->Load(name, config);
    });
  }
  grpc::ServerUnaryReactor* RepositoryModelUnload(
      grpc::CallbackServerContext* c, const inference::RepositoryModelUnloadRequest* q,
      inference::RepositoryModelUnloadResponse*) override {
    if (!Authorized(c)) return Reply(c, Unauthorized());
    if (Status s = ctx_->repo->CheckControlAllowed(); !s.ok()) return Reply(c, ToGrpc(s));
    return Control(c, [repo = ctx_->repo, name = q->model_name()] { return repo->Unload(name); });
  }

  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(grpc::CallbackServerContext*) override {
    return new StreamReactor(ctx_->repo);
  }

 private:
  // Runs a blocking repository action on the control queue and finishes the call from there.
  grpc::ServerUnaryReactor* Control(grpc::CallbackServerContext* c,
                                    std::function<Status()> action) {
    grpc::ServerUnaryReactor* r = c->DefaultReactor();
    ctx_->control->Post([r, action = std::move(action)] { r->Finish(ToGrpc(action())); });
    return r;
  }
  bool Authorized(grpc::CallbackServerContext* c) const {
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

// ModelInfer on gRPC's asynchronous API, as Triton serves it: the infer threads poll one completion
// queue and read, parse and complete calls themselves, with no hand-over between gRPC threads per
// call; the scheduler's answer thread fills the response and finishes the call. A call ends after
// two events, its finish and its done notification (which says whether the client cancelled).
class AsyncInfer {
 public:
  AsyncInfer(Service* service, ModelRepository* repo,
             std::unique_ptr<grpc::ServerCompletionQueue> cq)
      : service_(service), repo_(repo), cq_(std::move(cq)) {}

  void Start(int threads) {
    for (int i = 0; i < kPosted; ++i) Post();
    for (int i = 0; i < std::max(1, threads); ++i) {
      threads_.emplace_back([this] {
        void* tag = nullptr;
        bool ok = false;
        while (cq_->Next(&tag, &ok)) Handle(static_cast<Tag*>(tag), ok);
      });
    }
  }

  // After the server's shutdown: waits until every call has ended, then drains the queue.
  void Stop() {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [this] { return live_ == 0; });
    }
    cq_->Shutdown();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  static constexpr int kPosted = 16;  // calls waiting for a request, so that bursts match at once
  struct Call;
  struct Tag {
    Call* call;
    bool done_notification;
  };
  struct Call {
    explicit Call(AsyncInfer* o) : owner(o), writer(&ctx) {}
    AsyncInfer* owner;
    grpc::ServerContext ctx;
    inference::ModelInferRequest request;
    inference::ModelInferResponse response;
    grpc::ServerAsyncResponseWriter<inference::ModelInferResponse> writer;
    CancelFlag cancelled = std::make_shared<std::atomic<bool>>(false);
    Tag main{this, false};
    Tag done{this, true};
    bool started = false;
    std::atomic<int> events{2};  // finish and done notification, once started
  };

  void Post() {
    auto* c = new Call(this);
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++live_;
    }
    c->ctx.AsyncNotifyWhenDone(&c->done);
    service_->RequestModelInfer(&c->ctx, &c->request, &c->writer, cq_.get(), cq_.get(), &c->main);
  }

  void Handle(Tag* tag, bool ok) {
    Call* c = tag->call;
    if (tag->done_notification) {
      if (c->ctx.IsCancelled()) {
        c->cancelled->store(true);
        repo_->Poke(c->request.model_name());
      }
      return Release(c);
    }
    if (c->started) return Release(c);  // finished (ok is false when the client went away)
    if (!ok) return Delete(c);          // shutting down: the call never started
    c->started = true;
    Post();
    InferRequest req;
    if (Status s = DecodeGrpc(c->request, &req); !s.ok()) {
      return c->writer.FinishWithError(ToGrpc(s), &c->main);
    }
    req.cancelled = c->cancelled;
    repo_->Infer(std::move(req), [c](Result<InferResponse> res) {
      if (!res.ok()) return c->writer.FinishWithError(ToGrpc(res.status()), &c->main);
      EncodeGrpc(*res, &c->response);
      c->writer.Finish(c->response, grpc::Status::OK, &c->main);
    });
  }

  void Release(Call* c) {
    if (c->events.fetch_sub(1, std::memory_order_acq_rel) == 1) Delete(c);
  }
  void Delete(Call* c) {
    delete c;
    std::lock_guard<std::mutex> lk(mu_);
    if (--live_ == 0) cv_.notify_all();
  }

  Service* service_;
  ModelRepository* repo_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  int live_ = 0;
};

}  // namespace

struct GrpcServer::Impl {
  GrpcServerOptions options;
  ApiContext* ctx;
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<AsyncInfer> infer;
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
  std::unique_ptr<grpc::ServerCompletionQueue> cq = b.AddCompletionQueue();
  impl_->server = b.BuildAndStart();
  if (!impl_->server || impl_->bound_port == 0) {
    impl_->server.reset();
    return UnavailableError("cannot listen for gRPC on {}", addr);
  }
  impl_->infer =
      std::make_unique<AsyncInfer>(impl_->service.get(), impl_->ctx->repo, std::move(cq));
  impl_->infer->Start(impl_->options.infer_threads);
  return Status::Ok();
}

void GrpcServer::Stop() {
  if (impl_ && impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
    impl_->server->Wait();
    if (impl_->infer) impl_->infer->Stop();
    impl_->infer.reset();
    impl_->server.reset();
  }
}

int GrpcServer::port() const { return impl_->bound_port; }

}  // namespace surge::serve
