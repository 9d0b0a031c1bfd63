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
  const StatsSnapshot st = v.stats().Snapshot();
  s->set_name(v.name());
  s->set_version(v.version_string());
  s->set_last_inference(st.last_inference_ms);
  s->set_inference_count(st.inference_count);
  s->set_execution_count(st.execution_count);
  auto* is = s->mutable_inference_stats();
  FillDuration(st.success.count, st.success.ns, is->mutable_success());
  FillDuration(st.fail.count, st.fail.ns, is->mutable_fail());
  FillDuration(st.queue.count, st.queue.ns, is->mutable_queue());
  FillDuration(st.compute_input.count, st.compute_input.ns, is->mutable_compute_input());
  FillDuration(st.compute_infer.count, st.compute_infer.ns, is->mutable_compute_infer());
  FillDuration(st.compute_output.count, st.compute_output.ns, is->mutable_compute_output());
  is->mutable_cache_hit();
  is->mutable_cache_miss();
  for (const auto& [bs, b] : st.batches) {
    auto* bst = s->add_batch_stats();
    bst->set_batch_size(bs);
    FillDuration(b.count, b.compute_input_ns, bst->mutable_compute_input());
    FillDuration(b.count, b.compute_infer_ns, bst->mutable_compute_infer());
    FillDuration(b.count, b.compute_output_ns, bst->mutable_compute_output());
  }
}

// The whole service runs on gRPC's asynchronous API, as Triton's does: `threads` threads poll one
// completion queue and read, parse and complete calls themselves, with no hand-over between gRPC
// threads per call (the callback API hands every call from its pollers to separate threads).
// Nothing blocks these threads: inference is answered from the scheduler's answer thread, model
// load/unload from the control queue.
//
// Every operation started on a call carries a Tag naming the call and the event; a call is deleted
// once every event it waits for has come back.
using G = inference::GRPCInferenceService;

class AsyncServer;

class AsyncCall {
 public:
  virtual ~AsyncCall() = default;
  virtual void Proceed(int event, bool ok) = 0;
};

struct Tag {
  AsyncCall* call;
  int event;
};

enum Event { kStarted, kRead, kWritten, kFinished, kDone };

class AsyncServer {
 public:
  explicit AsyncServer(ApiContext* ctx) : ctx_(ctx) {}

  G::AsyncService* service() { return &service_; }
  grpc::ServerCompletionQueue* cq() { return cq_.get(); }
  ApiContext* ctx() { return ctx_; }

  // Once the server is built: posts the first calls of every method on `cq` and starts the
  // polling threads.
  void Start(std::unique_ptr<grpc::ServerCompletionQueue> cq, int threads);
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

  void Added() {
    std::lock_guard<std::mutex> lk(mu_);
    ++live_;
  }
  void Delete(AsyncCall* c) {
    delete c;
    std::lock_guard<std::mutex> lk(mu_);
    if (--live_ == 0) cv_.notify_all();
  }

 private:
  ApiContext* ctx_;
  G::AsyncService service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  int live_ = 0;
};

// A unary call. The method's handler reads request(), fills response() and calls Finish() once,
// from any thread. With `cancel` set, the call also asks for its done notification; when the
// client cancelled the call, cancelled() is set and `cancel` runs.
template <class Req, class Resp>
class UnaryCall final : public AsyncCall {
 public:
  using RequestFn = void (G::AsyncService::*)(grpc::ServerContext*, Req*,
                                              grpc::ServerAsyncResponseWriter<Resp>*,
                                              grpc::CompletionQueue*, grpc::ServerCompletionQueue*,
                                              void*);
  using Handler = std::function<void(UnaryCall*)>;
  using Cancel = std::function<void(UnaryCall*)>;

  static void Post(AsyncServer* server, RequestFn request, Handler handler, Cancel cancel = {}) {
    auto* c = new UnaryCall(server, request, std::move(handler), std::move(cancel));
    server->Added();
    if (c->cancel_) c->ctx_.AsyncNotifyWhenDone(&c->done_);
    (server->service()->*request)(&c->ctx_, &c->request_, &c->writer_, server->cq(), server->cq(),
                                  &c->started_);
  }

  const Req& request() const { return request_; }
  Resp* response() { return &response_; }
  grpc::ServerContext& context() { return ctx_; }
  const CancelFlag& cancelled() const { return cancelled_; }
  void Finish(const grpc::Status& s) {
    if (s.ok()) {
      writer_.Finish(response_, s, &finished_);
    } else {
      writer_.FinishWithError(s, &finished_);
    }
  }

  void Proceed(int event, bool ok) override {
    if (event == kStarted) {
      if (!ok) return server_->Delete(this);  // shutting down: the call never started
      Post(server_, request_fn_, handler_, cancel_);
      handler_(this);
      return Release();
    }
    if (event == kDone && ctx_.IsCancelled()) {
      cancelled_->store(true);
      cancel_(this);
    }
    Release();  // finished (ok is false when the client went away) or done
  }

 private:
  UnaryCall(AsyncServer* server, RequestFn request, Handler handler, Cancel cancel)
      : server_(server),
        request_fn_(request),
        handler_(std::move(handler)),
        cancel_(std::move(cancel)),
        writer_(&ctx_),
        events_(cancel_ ? 3 : 2) {
    if (cancel_) cancelled_ = std::make_shared<std::atomic<bool>>(false);
  }
  void Release() {
    if (events_.fetch_sub(1, std::memory_order_acq_rel) == 1) server_->Delete(this);
  }

  AsyncServer* server_;
  RequestFn request_fn_;
  Handler handler_;
  Cancel cancel_;
  grpc::ServerContext ctx_;
  Req request_;
  Resp response_;
  grpc::ServerAsyncResponseWriter<Resp> writer_;
  CancelFlag cancelled_;
  Tag started_{this, kStarted};
  Tag finished_{this, kFinished};
  Tag done_{this, kDone};
  // Still to come once started: the handler's return, the finish and the done notification.
  std::atomic<int> events_;
};

// ModelStreamInfer: reads requests one after another and queues each; answers are written in the
// order they complete, one write at a time. The call finishes once the client has half-closed,
// every request was answered and every answer written. Cancelling the stream cancels its queued
// requests. The call is deleted when its finish has completed and no operation is in flight.
class StreamCall final : public AsyncCall {
 public:
  using Response = inference::ModelStreamInferResponse;

  static void Post(AsyncServer* server) {
    auto* c = new StreamCall(server);
    server->Added();
    c->ctx_.AsyncNotifyWhenDone(&c->done_);
    server->service()->RequestModelStreamInfer(&c->ctx_, &c->stream_, server->cq(), server->cq(),
                                               &c->started_);
  }

  void Proceed(int event, bool ok) override {
    std::optional<InferRequest> submit;
    bool cancelled = false;
    bool remove = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      --ops_;
      switch (event) {
        case kStarted:
          if (!ok) {
            remove = true;  // shutting down: the call never started
            break;
          }
          ++ops_;  // the done notification
          Post(server_);
          StartReadLocked();
          break;
        case kRead:
          if (!ok) {
            reading_ = false;  // half-closed by the client, or gone
            break;
          }
          submit.emplace();
          if (Status s = DecodeGrpc(request_, &*submit); !s.ok()) {
            submit.reset();
            Response resp;
            resp.set_error_message(s.message());
            QueueLocked(std::move(resp));
          } else {
            ++outstanding_;
            models_.insert(submit->model_name);
            submit->cancelled = cancelled_;
          }
          StartReadLocked();
          break;
        case kWritten:
          writes_.pop_front();
          if (!ok) broken_ = true;  // the client is gone: drop the answers still to come
          if (broken_) writes_.clear();
          if (!writes_.empty()) StartWriteLocked();
          break;
        case kFinished:
          finished_ = true;
          break;
        case kDone:
          cancelled = ctx_.IsCancelled();
          break;
      }
      if (!remove) {
        MaybeFinishLocked();
        remove = finished_ && ops_ == 0;
      }
    }
    if (cancelled) Cancel();
    if (submit) Submit(std::move(*submit));
    if (remove) server_->Delete(this);
  }

 private:
  explicit StreamCall(AsyncServer* server) : server_(server), stream_(&ctx_) {}

  void Submit(InferRequest req) {
    std::string id = req.id;
    server_->ctx()->repo->Infer(std::move(req), [this, id](Result<InferResponse> res) {
      Response resp;
      if (res.ok()) {
        EncodeGrpc(*res, resp.mutable_infer_response());
      } else {
        resp.set_error_message(res.status().message());
        resp.mutable_infer_response()->set_id(id);
      }
      std::lock_guard<std::mutex> lk(mu_);
      --outstanding_;
      QueueLocked(std::move(resp));
      MaybeFinishLocked();
    });
  }
  void Cancel() {
    cancelled_->store(true);
    std::set<std::string> models;
    {
      std::lock_guard<std::mutex> lk(mu_);
      models = models_;
    }
    for (const auto& m : models) server_->ctx()->repo->Poke(m);
  }
  void StartReadLocked() {
    reading_ = true;
    ++ops_;
    stream_.Read(&request_, &read_);
  }
  void QueueLocked(Response resp) {
    if (broken_) return;
    writes_.push_back(std::move(resp));
    if (writes_.size() == 1) StartWriteLocked();
  }
  void StartWriteLocked() {
    ++ops_;
    stream_.Write(writes_.front(), &written_);
  }
  void MaybeFinishLocked() {
    if (reading_ || outstanding_ > 0 || !writes_.empty() || finishing_) return;
    finishing_ = true;
    ++ops_;
    stream_.Finish(grpc::Status::OK, &finish_);
  }

  AsyncServer* server_;
  grpc::ServerContext ctx_;
  grpc::ServerAsyncReaderWriter<Response, inference::ModelInferRequest> stream_;
  inference::ModelInferRequest request_;
  CancelFlag cancelled_ = std::make_shared<std::atomic<bool>>(false);
  Tag started_{this, kStarted};
  Tag read_{this, kRead};
  Tag written_{this, kWritten};
  Tag finish_{this, kFinished};
  Tag done_{this, kDone};
  std::mutex mu_;
  int ops_ = 1;  // operations whose tag has not come back: first, the start
  bool reading_ = false;
  bool broken_ = false;
  bool finishing_ = false;
  bool finished_ = false;
  int outstanding_ = 0;          // requests in the scheduler
  std::deque<Response> writes_;  // front: being written
  std::set<std::string> models_;
};

bool Authorized(ApiContext* ctx, const grpc::ServerContext& c) {
  if (ctx->admin_token.empty()) return true;
  auto it = c.client_metadata().find("authorization");
  return it != c.client_metadata().end() &&
         std::string(it->second.data(), it->second.size()) == "Bearer " + ctx->admin_token;
}

grpc::Status Unauthorized() {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "repository API needs metadata 'authorization: Bearer <token>'");
}

grpc::Status ModelMetadata(ApiContext* ctx, const inference::ModelMetadataRequest& q,
                           inference::ModelMetadataResponse* r) {
  auto v = ctx->repo->Find(q.name(), q.version());
  if (!v.ok()) return ToGrpc(v.status());
  const auto& cfg = (*v)->config();
  r->set_name(cfg.name());
  for (auto& mv : ctx->repo->Versions(cfg.name())) r->add_versions(mv->version_string());
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
  return grpc::Status::OK;
}

grpc::Status ModelStatistics(ApiContext* ctx, const inference::ModelStatisticsRequest& q,
                             inference::ModelStatisticsResponse* r) {
  if (q.name().empty()) {
    for (auto& v : ctx->repo->AllVersions()) FillStats(*v, r->add_model_stats());
    return grpc::Status::OK;
  }
  if (q.version().empty()) {
    auto vs = ctx->repo->Versions(q.name());
    if (vs.empty()) {
      return ToGrpc(NotFoundError("requested model '{}' is not available", q.name()));
    }
    for (auto& v : vs) FillStats(*v, r->add_model_stats());
    return grpc::Status::OK;
  }
  auto v = ctx->repo->Find(q.name(), q.version());
  if (!v.ok()) return ToGrpc(v.status());
  FillStats(**v, r->add_model_stats());
  return grpc::Status::OK;
}

// A method answered on the polling thread: `fn(ctx, request, response)` returns the status.
template <class Req, class Resp, class Fn>
void PostAnswered(AsyncServer* s, typename UnaryCall<Req, Resp>::RequestFn request, Fn fn) {
  UnaryCall<Req, Resp>::Post(s, request, [s, fn](UnaryCall<Req, Resp>* c) {
    c->Finish(fn(s->ctx(), c->request(), c->response(), c->context()));
  });
}

// A repository action: refused at once or run on the control queue, which finishes the call.
template <class Req, class Resp, class Fn>
void PostControl(AsyncServer* s, typename UnaryCall<Req, Resp>::RequestFn request, Fn action) {
  UnaryCall<Req, Resp>::Post(s, request, [s, action](UnaryCall<Req, Resp>* c) {
    ApiContext* ctx = s->ctx();
    if (!Authorized(ctx, c->context())) return c->Finish(Unauthorized());
    if (Status st = ctx->repo->CheckControlAllowed(); !st.ok()) return c->Finish(ToGrpc(st));
    Result<std::function<Status()>> run = action(ctx, c->request());
    if (!run.ok()) return c->Finish(ToGrpc(run.status()));
    ctx->control->Post([c, run = std::move(run).value()] { c->Finish(ToGrpc(run())); });
  });
}

void PostInfer(AsyncServer* s) {
  using Call = UnaryCall<inference::ModelInferRequest, inference::ModelInferResponse>;
  Call::Post(
      s, &G::AsyncService::RequestModelInfer,
      [s](Call* c) {
        InferRequest req;
        if (Status st = DecodeGrpc(c->request(), &req); !st.ok()) return c->Finish(ToGrpc(st));
        req.cancelled = c->cancelled();
        s->ctx()->repo->Infer(std::move(req), [c](Result<InferResponse> res) {
          if (!res.ok()) return c->Finish(ToGrpc(res.status()));
          EncodeGrpc(*res, c->response());
          c->Finish(grpc::Status::OK);
        });
      },
      [s](Call* c) { s->ctx()->repo->Poke(c->request().model_name()); });
}

void AsyncServer::Start(std::unique_ptr<grpc::ServerCompletionQueue> cq, int threads) {
  cq_ = std::move(cq);
  using namespace inference;
  using S = G::AsyncService;
  AsyncServer* s = this;
  // Calls waiting for ModelInfer requests, so that a burst of them is matched at once.
  for (int i = 0; i < 16; ++i) PostInfer(s);
  StreamCall::Post(s);
  PostAnswered<ServerLiveRequest, ServerLiveResponse>(s, &S::RequestServerLive,
                                                      [](ApiContext*, const auto&, auto* r, auto&) {
                                                        r->set_live(true);
                                                        return grpc::Status::OK;
                                                      });
  PostAnswered<ServerReadyRequest, ServerReadyResponse>(
      s, &S::RequestServerReady, [](ApiContext* ctx, const auto&, auto* r, auto&) {
        r->set_ready(ctx->repo->Ready());
        return grpc::Status::OK;
      });
  PostAnswered<ModelReadyRequest, ModelReadyResponse>(
      s, &S::RequestModelReady, [](ApiContext* ctx, const auto& q, auto* r, auto&) {
        r->set_ready(ctx->repo->Find(q.name(), q.version()).ok());
        return grpc::Status::OK;
      });
  PostAnswered<ServerMetadataRequest, ServerMetadataResponse>(
      s, &S::RequestServerMetadata, [](ApiContext* ctx, const auto&, auto* r, auto&) {
        r->set_name(ctx->server_name);
        r->set_version(ctx->server_version);
        for (const auto& e : ServerExtensions()) r->add_extensions(e);
        return grpc::Status::OK;
      });
  PostAnswered<ModelMetadataRequest, ModelMetadataResponse>(
      s, &S::RequestModelMetadata,
      [](ApiContext* ctx, const auto& q, auto* r, auto&) { return ModelMetadata(ctx, q, r); });
  PostAnswered<ModelConfigRequest, ModelConfigResponse>(
      s, &S::RequestModelConfig, [](ApiContext* ctx, const auto& q, auto* r, auto&) {
        auto v = ctx->repo->Find(q.name(), q.version());
        if (!v.ok()) return ToGrpc(v.status());
        *r->mutable_config() = (*v)->config();
        return grpc::Status::OK;
      });
  PostAnswered<ModelStatisticsRequest, ModelStatisticsResponse>(
      s, &S::RequestModelStatistics,
      [](ApiContext* ctx, const auto& q, auto* r, auto&) { return ModelStatistics(ctx, q, r); });
  PostAnswered<RepositoryIndexRequest, RepositoryIndexResponse>(
      s, &S::RequestRepositoryIndex,
      [](ApiContext* ctx, const auto& q, auto* r, grpc::ServerContext& c) {
        if (!Authorized(ctx, c)) return Unauthorized();
        for (const auto& e : ctx->repo->Index(q.ready())) {
          auto* m = r->add_models();
          m->set_name(e.name);
          m->set_version(e.version);
          m->set_state(e.state);
          m->set_reason(e.reason);
        }
        return grpc::Status::OK;
      });
  PostControl<RepositoryModelLoadRequest, RepositoryModelLoadResponse>(
      s, &S::RequestRepositoryModelLoad,
      [](ApiContext* ctx, const auto& q) -> Result<std::function<Status()>> {
        std::string config;
        for (const auto& [k, v] : q.parameters()) {
          if (k == "config") config = v.string_param();
          if (k.rfind("file:", 0) == 0) {
            return Status(surge::StatusCode::kUnimplemented,
                          "load with 'file:' overrides is not supported");
          }
        }
        return std::function<Status()>(
            [repo = ctx->repo, name = q.model_name(), config] { return repo->Load(name, config); });
      });
  PostControl<RepositoryModelUnloadRequest, RepositoryModelUnloadResponse>(
      s, &S::RequestRepositoryModelUnload,
      [](ApiContext* ctx, const auto& q) -> Result<std::function<Status()>> {
        return std::function<Status()>(
            [repo = ctx->repo, name = q.model_name()] { return repo->Unload(name); });
      });
  for (int i = 0; i < std::max(1, threads); ++i) {
    threads_.emplace_back([this] {
      void* tag = nullptr;
      bool ok = false;
      while (cq_->Next(&tag, &ok)) {
        auto* t = static_cast<Tag*>(tag);
        t->call->Proceed(t->event, ok);
      }
    });
  }
}

}  // namespace

struct GrpcServer::Impl {
  GrpcServerOptions options;
  ApiContext* ctx;
  std::unique_ptr<AsyncServer> async;
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
  impl_->async = std::make_unique<AsyncServer>(impl_->ctx);
  grpc::ServerBuilder b;
  std::string addr = fmt::format("{}:{}", impl_->options.address, impl_->options.port);
  b.AddListeningPort(addr, grpc::InsecureServerCredentials(), &impl_->bound_port);
  b.SetMaxReceiveMessageSize(impl_->options.max_message_bytes);
  b.SetMaxSendMessageSize(impl_->options.max_message_bytes);
  b.RegisterService(impl_->async->service());
  std::unique_ptr<grpc::ServerCompletionQueue> cq = b.AddCompletionQueue();
  impl_->server = b.BuildAndStart();
  if (!impl_->server || impl_->bound_port == 0) {
    if (impl_->server) impl_->server->Shutdown();
    impl_->server.reset();
    return UnavailableError("cannot listen for gRPC on {}", addr);
  }
  impl_->async->Start(std::move(cq), impl_->options.threads);
  return Status::Ok();
}

void GrpcServer::Stop() {
  if (impl_ && impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
    impl_->server->Wait();
    impl_->async->Stop();
    impl_->server.reset();
    impl_->async.reset();
  }
}

int GrpcServer::port() const { return impl_->bound_port; }

}  // namespace surge::serve
