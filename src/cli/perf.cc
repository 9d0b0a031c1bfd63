// `surge perf`: a perf_analyzer-like load generator for KServe v2 servers (surge serve, Triton).
// Concurrency sweep (N requests outstanding) or request-rate mode (constant or Poisson arrivals),
// over HTTP (binary tensor extension, keep-alive) or gRPC (raw_input_contents); tensor inputs with
// generated data or raw text for models that tokenise server-side. Requests are sent and read
// asynchronously on a few client threads. Prints throughput and latency percentiles per step;
// optional CSV (perf_analyzer's columns) and JSON.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "serve/infer.h"
#include "serve/model_config.h"
#include "serve/proto/grpc_service.grpc.pb.h"
#include "serve/repository.h"

namespace surge::cli {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct PerfArgs {
  std::string model;
  std::string url = "localhost:8000";
  std::string protocol = "http";
  std::string concurrency_range = "1";
  std::string request_rate_range;
  std::string distribution = "constant";
  std::vector<std::string> shapes;
  int batch = 1;
  int measurement_ms = 5000;
  int warmup_ms = 1000;
  std::string text;
  std::string csv;
  bool json_out = false;
  int max_threads = 64;
  int client_threads = 1;
  std::string in_process;  // a model repository to load and drive in this process
  std::string cache_dir;
  bool health = false;  // load GET /v2/health/live instead of inference (HTTP only)
};

struct InputSpec {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
  std::string bytes;  // raw (binary extension / raw_input_contents) contents
};

struct Range {
  double start = 1, end = 1, step = 1;
};

Result<Range> ParseRange(const std::string& s) {
  Range r;
  std::vector<double> v;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t c = s.find(':', pos);
    if (c == std::string::npos) c = s.size();
    try {
      v.push_back(std::stod(s.substr(pos, c - pos)));
    } catch (...) {
      return InvalidArgumentError("range '{}' is not start[:end[:step]]", s);
    }
    pos = c + 1;
  }
  if (v.empty() || v.size() > 3 || v[0] <= 0) return InvalidArgumentError("bad range '{}'", s);
  r.start = v[0];
  r.end = v.size() > 1 ? v[1] : v[0];
  r.step = v.size() > 2 ? v[2] : 1;
  if (r.end < r.start || r.step <= 0) return InvalidArgumentError("bad range '{}'", s);
  return r;
}

std::pair<std::string, std::string> SplitUrl(const std::string& url) {
  std::string u = url;
  if (u.rfind("http://", 0) == 0) u = u.substr(7);
  size_t c = u.rfind(':');
  if (c == std::string::npos) return {u, "80"};
  return {u.substr(0, c), u.substr(c + 1)};
}

// One keep-alive HTTP connection.
class HttpConn {
 public:
  HttpConn(const std::string& host, const std::string& port) : host_(host), port_(port) {}
  Status Connect() {
    try {
      tcp::resolver resolver(ioc_);
      stream_ = std::make_unique<beast::tcp_stream>(ioc_);
      stream_->connect(resolver.resolve(host_, port_));
      stream_->socket().set_option(tcp::no_delay(true));
    } catch (const std::exception& e) {
      return UnavailableError("cannot connect to {}:{}: {}", host_, port_, e.what());
    }
    return Status::Ok();
  }
  // Returns the HTTP status (0 on a network error, after which the connection is re-opened).
  int Send(http::verb verb, const std::string& target, const std::string& body, size_t header_len,
           std::string* response_body) {
    try {
      if (!stream_) {
        if (!Connect().ok()) return 0;
      }
      http::request<http::string_body> req(verb, target, 11);
      req.set(http::field::host, host_);
      req.keep_alive(true);
      if (verb == http::verb::post) {
        req.set(http::field::content_type, "application/octet-stream");
        if (header_len) req.set("Inference-Header-Content-Length", std::to_string(header_len));
        req.body() = body;
        req.prepare_payload();
      }
      http::write(*stream_, req);
      beast::flat_buffer buf;
      http::response<http::string_body> res;
      http::read(*stream_, buf, res);
      if (response_body) *response_body = std::move(res.body());
      if (!res.keep_alive()) stream_.reset();
      return res.result_int();
    } catch (const std::exception&) {
      stream_.reset();
      return 0;
    }
  }

 private:
  net::io_context ioc_;
  std::string host_, port_;
  std::unique_ptr<beast::tcp_stream> stream_;
};

struct Sample {
  double latency_us;
  bool ok;
};

struct StepResult {
  double x = 0;  // concurrency or request rate
  double throughput = 0;
  double avg_us = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0;
  size_t ok = 0, failed = 0;
  double formed_batch = 0;  // in-process: inferences per model execution over the step
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

// One sequential stream of requests: a keep-alive HTTP connection, or a gRPC call slot on the
// shared channel. Send() starts one request; `done(ok)` runs once, on a client network thread.
class Slot {
 public:
  virtual ~Slot() = default;
  virtual void Send(std::function<void(bool)> done) = 0;
};

// Requests go out as soon as a slot is free and are read back asynchronously, so a few client
// threads carry any number of outstanding requests (as perf_analyzer's async mode does) and the
// client takes little of the CPU it shares with the server under test.
class HttpSlot final : public Slot {
 public:
  HttpSlot(net::io_context& ioc, const tcp::endpoint& ep,
           const http::request<http::string_body>* req)
      : socket_(ioc), ep_(ep), req_(req) {}

  void Send(std::function<void(bool)> done) override {
    done_ = std::move(done);
    if (connected_) return Write();
    socket_.async_connect(ep_, [this](beast::error_code ec) {
      if (ec) return Fail();
      socket_.set_option(tcp::no_delay(true), ec);
      connected_ = true;
      Write();
    });
  }

 private:
  void Write() {
    http::async_write(socket_, *req_, [this](beast::error_code ec, size_t) {
      if (ec) return Fail();
      res_ = {};
      http::async_read(socket_, buffer_, res_, [this](beast::error_code ec, size_t) {
        if (ec) return Fail();
        if (!res_.keep_alive()) Reset();
        Complete(res_.result_int() == 200);
      });
    });
  }
  void Reset() {
    beast::error_code ec;
    socket_.close(ec);
    buffer_.clear();
    connected_ = false;
  }
  void Fail() {
    Reset();
    Complete(false);
  }
  void Complete(bool ok) {
    auto done = std::move(done_);
    done(ok);
  }

  tcp::socket socket_;
  tcp::endpoint ep_;
  const http::request<http::string_body>* req_;
  beast::flat_buffer buffer_;
  http::response<http::string_body> res_;
  bool connected_ = false;
  std::function<void(bool)> done_;
};

class GrpcSlot final : public Slot {
 public:
  GrpcSlot(inference::GRPCInferenceService::Stub* stub, grpc::CompletionQueue* cq,
           const inference::ModelInferRequest* req)
      : stub_(stub), cq_(cq), req_(req) {}

  void Send(std::function<void(bool)> done) override {
    done_ = std::move(done);
    ctx_.emplace();
    rpc_ = stub_->AsyncModelInfer(&*ctx_, *req_, cq_);
    rpc_->Finish(&resp_, &status_, this);
  }
  // Called by the completion-queue thread.
  void OnDone(bool ok) {
    auto done = std::move(done_);
    done(ok && status_.ok());
  }

 private:
  inference::GRPCInferenceService::Stub* stub_;
  grpc::CompletionQueue* cq_;
  const inference::ModelInferRequest* req_;
  std::optional<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> rpc_;
  inference::ModelInferResponse resp_;
  grpc::Status status_;
  std::function<void(bool)> done_;
};

// The client's network threads and the slots they serve.
class LoadClient {
 public:
  virtual ~LoadClient() = default;
  // The i-th slot, made on first use: a later step reuses the earlier steps' connections.
  virtual Slot* GetSlot(size_t i) = 0;
};

class HttpLoadClient final : public LoadClient {
 public:
  HttpLoadClient(const tcp::endpoint& ep, http::request<http::string_body> req, int threads)
      : ep_(ep), req_(std::move(req)), work_(net::make_work_guard(ioc_)) {
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { ioc_.run(); });
  }
  ~HttpLoadClient() override {
    work_.reset();
    ioc_.stop();
    for (auto& t : threads_) t.join();
  }
  Slot* GetSlot(size_t i) override {
    while (slots_.size() <= i) slots_.push_back(std::make_unique<HttpSlot>(ioc_, ep_, &req_));
    return slots_[i].get();
  }

 private:
  tcp::endpoint ep_;
  http::request<http::string_body> req_;
  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::vector<std::unique_ptr<HttpSlot>> slots_;
  std::vector<std::thread> threads_;
};

class GrpcLoadClient final : public LoadClient {
 public:
  GrpcLoadClient(const std::shared_ptr<grpc::Channel>& channel,
                 const inference::ModelInferRequest* req, int threads)
      : stub_(inference::GRPCInferenceService::NewStub(channel)), req_(req) {
    for (int i = 0; i < std::max(1, threads); ++i) {
      threads_.emplace_back([this] {
        void* tag = nullptr;
        bool ok = false;
        while (cq_.Next(&tag, &ok)) static_cast<GrpcSlot*>(tag)->OnDone(ok);
      });
    }
  }
  // Every slot's call has completed by now (the load loop waits for them).
  ~GrpcLoadClient() override {
    cq_.Shutdown();
    for (auto& t : threads_) t.join();
  }
  Slot* GetSlot(size_t i) override {
    while (slots_.size() <= i) {
      slots_.push_back(std::make_unique<GrpcSlot>(stub_.get(), &cq_, req_));
    }
    return slots_[i].get();
  }

 private:
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  const inference::ModelInferRequest* req_;
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<GrpcSlot>> slots_;
  std::vector<std::thread> threads_;
};

// No network: requests go straight to a repository loaded in this process, so that a run measures
// what serving costs besides the network (batching, the instance, answering).
class InProcessSlot final : public Slot {
 public:
  InProcessSlot(serve::ModelRepository* repo, const serve::InferRequest* req)
      : repo_(repo), req_(req) {}
  void Send(std::function<void(bool)> done) override {
    serve::InferRequest r = *req_;  // tensors share the template's (read-only) data
    r.received = serve::Clock::now();
    repo_->Infer(std::move(r),
                 [done = std::move(done)](Result<serve::InferResponse> res) { done(res.ok()); });
  }

 private:
  serve::ModelRepository* repo_;
  const serve::InferRequest* req_;
};

class InProcessLoadClient final : public LoadClient {
 public:
  InProcessLoadClient(serve::ModelRepository* repo, serve::InferRequest req)
      : repo_(repo), req_(std::move(req)) {}
  Slot* GetSlot(size_t i) override {
    while (slots_.size() <= i) slots_.push_back(std::make_unique<InProcessSlot>(repo_, &req_));
    return slots_[i].get();
  }

 private:
  serve::ModelRepository* repo_;
  serve::InferRequest req_;
  std::vector<std::unique_ptr<InProcessSlot>> slots_;
};

// One load step: `concurrency` slots each sending back to back, or (rate > 0) requests scheduled
// at `rate` per second (constant or Poisson gaps) and sent on the first free one of `max_slots`
// slots; a request's latency counts from its scheduled time, so queueing in the client is seen.
// Samples are the requests that complete inside the measurement window.
struct StepOptions {
  int concurrency = 1;
  double rate = 0;
  bool poisson = false;
  int max_slots = 64;
  int warmup_ms = 1000;
  int measurement_ms = 5000;
};

struct StepSamples {
  std::vector<Sample> samples;
  double seconds = 0;
};

StepSamples RunStep(LoadClient& client, const StepOptions& o) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Sample> samples;
  std::deque<Clock::time_point> backlog;  // rate mode: scheduled, waiting for a free slot
  std::vector<Slot*> idle;
  int outstanding = 0;
  bool stop = false;
  std::atomic<bool> measuring{false};

  // Sends on `slot` a request scheduled at `sched`; on completion the slot takes the next
  // backlogged request, sends again (concurrency mode) or goes idle. Called without `mu`.
  std::function<void(Slot*, Clock::time_point)> send = [&](Slot* slot, Clock::time_point sched) {
    slot->Send([&, slot, sched](bool ok) {
      auto now = Clock::now();
      std::optional<Clock::time_point> next;
      {
        std::lock_guard<std::mutex> lk(mu);
        if (measuring.load(std::memory_order_relaxed)) {
          samples.push_back({std::chrono::duration<double, std::micro>(now - sched).count(), ok});
        }
        if (!stop) {
          if (o.rate <= 0) {
            next = now;
          } else if (!backlog.empty()) {
            next = backlog.front();
            backlog.pop_front();
          } else {
            idle.push_back(slot);
          }
        }
        if (!next && --outstanding == 0) cv.notify_all();
      }
      if (next) send(slot, *next);
    });
  };

  auto t_start = Clock::now();
  const int slots = o.rate > 0 ? std::max(1, o.max_slots) : std::max(1, o.concurrency);
  std::vector<Slot*> all;
  for (int i = 0; i < slots; ++i) all.push_back(client.GetSlot(i));
  if (o.rate <= 0) {
    {
      std::lock_guard<std::mutex> lk(mu);
      outstanding = slots;
    }
    for (Slot* s : all) send(s, Clock::now());
  } else {
    idle = all;
  }
  auto t_measure = t_start + std::chrono::milliseconds(o.warmup_ms);
  auto t_end = t_measure + std::chrono::milliseconds(o.measurement_ms);
  Clock::time_point m0, m1;
  bool started = false;
  auto open_window = [&](Clock::time_point now) {
    if (!started && now >= t_measure) {
      measuring = true;
      m0 = Clock::now();
      started = true;
    }
  };
  if (o.rate > 0) {
    std::mt19937_64 rng(1);
    std::exponential_distribution<double> expo(o.rate);
    Clock::time_point next = t_start;
    while (next < t_end) {
      std::this_thread::sleep_until(next);
      open_window(Clock::now());
      Slot* slot = nullptr;
      {
        std::lock_guard<std::mutex> lk(mu);
        if (idle.empty()) {
          backlog.push_back(next);
        } else {
          slot = idle.back();
          idle.pop_back();
          ++outstanding;
        }
      }
      if (slot) send(slot, next);
      double gap = o.poisson ? expo(rng) : 1.0 / o.rate;
      next += std::chrono::nanoseconds(static_cast<int64_t>(gap * 1e9));
    }
  }
  std::this_thread::sleep_until(t_measure);
  open_window(Clock::now());
  std::this_thread::sleep_until(t_end);
  measuring = false;
  m1 = Clock::now();
  std::unique_lock<std::mutex> lk(mu);
  stop = true;
  backlog.clear();
  cv.wait(lk, [&] { return outstanding == 0; });
  return {std::move(samples), std::chrono::duration<double>(m1 - m0).count()};
}

std::string MakeBytes(const std::string& name, const std::string& datatype, int64_t n,
                      std::mt19937& rng, const std::string& text) {
  if (datatype == "BYTES") {
    return serve::PackBytes(std::vector<std::string>(
        n, text.empty() ? "surge perf: a short post about a trending topic" : text));
  }
  size_t elem = serve::DatatypeSize(datatype);
  std::string out(n * elem, '\0');
  if (datatype == "INT64" || datatype == "INT32") {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = name == "attention_mask" ? 1 : name == "token_type_ids" ? 0 : 5 + rng() % 95;
      if (elem == 8) {
        std::memcpy(&out[i * 8], &v, 8);
      } else {
        int32_t w = static_cast<int32_t>(v);
        std::memcpy(&out[i * 4], &w, 4);
      }
    }
  } else if (datatype == "FP32") {
    for (int64_t i = 0; i < n; ++i) {
      float f = static_cast<float>(rng() % 1000) / 1000.f;
      std::memcpy(&out[i * 4], &f, 4);
    }
  }
  return out;
}

int RunPerf(const PerfArgs& a) {
  // Metadata (always over HTTP when the protocol is HTTP; gRPC otherwise).
  std::vector<InputSpec> inputs;
  json meta;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<serve::ModelRepository> repo;
  if (!a.in_process.empty()) {
    serve::RepositoryOptions ro;
    ro.paths = {a.in_process};
    ro.load.plan_cache_dir = a.cache_dir;
    ro.exit_on_error = true;
    repo = std::make_unique<serve::ModelRepository>(ro);
    if (Status st = repo->Start(); !st.ok()) return Fail(st);
    auto v = repo->Find(a.model, "");
    if (!v.ok()) return Fail(v.status());
    const auto& cfg = (*v)->config();
    meta["inputs"] = json::array();
    for (const auto& in : cfg.input()) {
      std::vector<int64_t> shape;
      if (cfg.max_batch_size() > 0) shape.push_back(-1);
      shape.insert(shape.end(), in.dims().begin(), in.dims().end());
      meta["inputs"].push_back(
          {{"name", in.name()},
           {"datatype", std::string(serve::ConfigTypeToDatatype(in.data_type()))},
           {"shape", shape}});
    }
  } else if (a.protocol == "http") {
    auto [host, port] = SplitUrl(a.url);
    HttpConn c(host, port);
    std::string body;
    int st = c.Send(http::verb::get, "/v2/models/" + a.model, "", 0, &body);
    if (st != 200) {
      std::cerr << "error: model metadata for '" << a.model << "' from " << a.url << ": HTTP " << st
                << " " << body << '\n';
      return 1;
    }
    meta = json::parse(body, nullptr, false);
  } else if (a.protocol == "grpc") {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    // The load generator sets no deadlines and needs no per-call filters beyond the transport's:
    // gRPC's minimal stack takes about a sixth less CPU per call from the machine it shares.
    args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
    channel = grpc::CreateCustomChannel(a.url, grpc::InsecureChannelCredentials(), args);
    auto stub = inference::GRPCInferenceService::NewStub(channel);
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest q;
    q.set_name(a.model);
    inference::ModelMetadataResponse r;
    auto st = stub->ModelMetadata(&ctx, q, &r);
    if (!st.ok()) {
      std::cerr << "error: model metadata over gRPC: " << st.error_message() << '\n';
      return 1;
    }
    meta["inputs"] = json::array();
    for (const auto& t : r.inputs()) {
      meta["inputs"].push_back(
          {{"name", t.name()},
           {"datatype", t.datatype()},
           {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())}});
    }
  } else {
    std::cerr << "error: -i must be http or grpc\n";
    return 2;
  }
  if (!meta.is_object() || !meta.contains("inputs")) {
    std::cerr << "error: unexpected model metadata\n";
    return 1;
  }
  std::mt19937 rng(1);
  bool text_mode = !a.text.empty();
  for (const auto& in : meta["inputs"]) {
    InputSpec s;
    s.name = in["name"].get<std::string>();
    s.datatype = in["datatype"].get<std::string>();
    if (text_mode != (s.datatype == "BYTES")) continue;  // text: only BYTES; else only tensors
    std::vector<int64_t> shape = in["shape"].get<std::vector<int64_t>>();
    for (const auto& spec : a.shapes) {
      size_t c = spec.rfind(':');
      if (c == std::string::npos || spec.substr(0, c) != s.name) continue;
      std::vector<int64_t> given;
      std::string dims = spec.substr(c + 1);
      size_t pos = 0;
      while (pos <= dims.size()) {
        size_t n = dims.find(',', pos);
        if (n == std::string::npos) n = dims.size();
        given.push_back(std::stoll(dims.substr(pos, n - pos)));
        pos = n + 1;
      }
      if (given.size() + 1 == shape.size()) given.insert(given.begin(), a.batch);
      shape = given;
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 0) shape[d] = d == 0 ? a.batch : 1;
    }
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    s.shape = shape;
    s.bytes = MakeBytes(s.name, s.datatype, n, rng, a.text);
    inputs.push_back(std::move(s));
  }
  if (inputs.empty()) {
    std::cerr << "error: no inputs to send (text mode needs a BYTES input)\n";
    return 1;
  }
  // The request, built once.
  std::string http_body;
  size_t header_len = 0;
  inference::ModelInferRequest grpc_req;
  {
    json h{{"inputs", json::array()}};
    for (const auto& s : inputs) {
      h["inputs"].push_back({{"name", s.name},
                             {"datatype", s.datatype},
                             {"shape", s.shape},
                             {"parameters", {{"binary_data_size", s.bytes.size()}}}});
      auto* gi = grpc_req.add_inputs();
      gi->set_name(s.name);
      gi->set_datatype(s.datatype);
      for (int64_t d : s.shape) gi->add_shape(d);
      grpc_req.add_raw_input_contents(s.bytes);
    }
    h["parameters"] = {{"binary_data_output", true}};
    http_body = h.dump();
    header_len = http_body.size();
    for (const auto& s : inputs) http_body += s.bytes;
    grpc_req.set_model_name(a.model);
  }
  std::unique_ptr<LoadClient> client;
  if (repo) {
    serve::InferRequest req;
    req.model_name = a.model;
    for (const auto& spec : inputs) {
      serve::InferTensor t;
      t.name = spec.name;
      t.datatype = spec.datatype;
      t.shape = spec.shape;
      if (t.is_bytes()) {
        auto strings = serve::UnpackBytes(spec.bytes, t.numel());
        if (!strings.ok()) return Fail(strings.status());
        t.strings = std::move(strings).value();
      } else {
        auto dt = serve::DTypeFromDatatype(t.datatype);
        if (!dt.ok()) return Fail(dt.status());
        t.tensor = Tensor(*dt, t.shape);
        std::memcpy(t.tensor.data(), spec.bytes.data(), spec.bytes.size());
      }
      req.inputs.push_back(std::move(t));
    }
    client = std::make_unique<InProcessLoadClient>(repo.get(), std::move(req));
  } else if (a.protocol == "http") {
    auto [host, port] = SplitUrl(a.url);
    tcp::endpoint ep;
    try {
      net::io_context ioc;
      ep = *tcp::resolver(ioc).resolve(host, port).begin();
    } catch (const std::exception& e) {
      std::cerr << "error: cannot resolve " << a.url << ": " << e.what() << '\n';
      return 1;
    }
    http::request<http::string_body> req(
        a.health ? http::verb::get : http::verb::post,
        a.health ? "/v2/health/live" : "/v2/models/" + a.model + "/infer", 11);
    req.set(http::field::host, host);
    req.keep_alive(true);
    if (!a.health) {
      req.set(http::field::content_type, "application/octet-stream");
      req.set("Inference-Header-Content-Length", std::to_string(header_len));
      req.body() = http_body;
      req.prepare_payload();
    }
    client = std::make_unique<HttpLoadClient>(ep, std::move(req), a.client_threads);
  } else {
    client = std::make_unique<GrpcLoadClient>(channel, &grpc_req, a.client_threads);
  }

  const bool rate_mode = !a.request_rate_range.empty();
  auto range = ParseRange(rate_mode ? a.request_rate_range : a.concurrency_range);
  if (!range.ok()) {
    std::cerr << "error: " << range.status().message() << '\n';
    return 2;
  }
  std::vector<StepResult> results;
  for (double x = range->start; x <= range->end + 1e-9; x += range->step) {
    StepOptions so;
    so.concurrency = static_cast<int>(x);
    so.rate = rate_mode ? x : 0;
    so.poisson = a.distribution == "poisson";
    so.max_slots = a.max_threads;
    so.warmup_ms = a.warmup_ms;
    so.measurement_ms = a.measurement_ms;
    auto counts = [&]() -> std::pair<uint64_t, uint64_t> {
      auto v = repo ? repo->Find(a.model, "")
                    : Result<std::shared_ptr<serve::ModelVersion>>(
                          NotFoundError("no repository in process"));
      if (!v.ok()) return {0, 0};
      return {(*v)->stats().inference_count.load(), (*v)->stats().execution_count.load()};
    };
    auto [i0, e0] = counts();
    StepSamples step = RunStep(*client, so);
    auto [i1, e1] = counts();
    const auto& samples = step.samples;
    const double secs = step.seconds;
    StepResult r;
    r.x = x;
    if (e1 > e0) r.formed_batch = static_cast<double>(i1 - i0) / static_cast<double>(e1 - e0);
    std::vector<double> lat;
    for (const auto& s : samples) {
      if (s.ok) {
        lat.push_back(s.latency_us);
        ++r.ok;
      } else {
        ++r.failed;
      }
    }
    r.throughput = r.ok * static_cast<double>(a.batch) / secs;
    double sum = 0;
    for (double l : lat) sum += l;
    r.avg_us = lat.empty() ? 0 : sum / lat.size();
    r.p50 = Percentile(lat, 50);
    r.p90 = Percentile(lat, 90);
    r.p95 = Percentile(lat, 95);
    r.p99 = Percentile(lat, 99);
    std::cout << (rate_mode ? "Request rate: " : "Concurrency: ") << x
              << ", throughput: " << fmt::format("{:.1f}", r.throughput) << " infer/sec, latency "
              << fmt::format("avg {:.0f} p50 {:.0f} p90 {:.0f} p95 {:.0f} p99 {:.0f} usec",
                             r.avg_us, r.p50, r.p90, r.p95, r.p99)
              << (r.failed ? fmt::format(", {} failed", r.failed) : "") << std::endl;
    results.push_back(r);
  }
  if (!a.csv.empty()) {
    std::ofstream out(a.csv);
    out << (rate_mode ? "Request Rate" : "Concurrency")
        << ",Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute "
           "Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 "
           "latency,p95 latency,p99 latency,Avg latency,Failed\n";
    for (const auto& r : results) {
      out << r.x << ',' << r.throughput << ",0,0,0,0,0,0,0," << static_cast<int64_t>(r.p50) << ','
          << static_cast<int64_t>(r.p90) << ',' << static_cast<int64_t>(r.p95) << ','
          << static_cast<int64_t>(r.p99) << ',' << static_cast<int64_t>(r.avg_us) << ',' << r.failed
          << '\n';
    }
  }
  if (a.json_out) {
    json arr = json::array();
    for (const auto& r : results) {
      arr.push_back({{rate_mode ? "request_rate" : "concurrency", r.x},
                     {"throughput", r.throughput},
                     {"avg_us", r.avg_us},
                     {"p50_us", r.p50},
                     {"p90_us", r.p90},
                     {"p95_us", r.p95},
                     {"p99_us", r.p99},
                     {"ok", r.ok},
                     {"failed", r.failed}});
      if (repo) arr.back()["formed_batch"] = r.formed_batch;
    }
    std::cout << json{{"model", a.model},
                      {"protocol", repo ? std::string("in-process") : a.protocol},
                      {"results", arr}}
                     .dump()
              << std::endl;
  }
  for (const auto& r : results) {
    if (r.ok == 0) return 1;
  }
  return 0;
}

std::function<int()> SetupPerf(CLI::App& sub) {
  auto a = std::make_shared<PerfArgs>();
  sub.add_option("-m,--model-name", a->model, "model to load-test")->required();
  sub.add_option("-u,--url", a->url, "server host:port (HTTP 8000, gRPC 8001)");
  sub.add_option("-i,--protocol", a->protocol, "http or grpc");
  sub.add_option("--concurrency-range", a->concurrency_range, "start[:end[:step]] outstanding");
  sub.add_option("--request-rate-range", a->request_rate_range,
                 "start[:end[:step]] requests/s (instead of concurrency)");
  sub.add_option("--request-distribution", a->distribution, "constant or poisson");
  sub.add_option("--shape", a->shapes, "NAME:d1,d2,... for variable dims (repeatable)");
  sub.add_option("-b,--batch-size", a->batch, "batch size of each request");
  sub.add_option("-p,--measurement-interval", a->measurement_ms, "measurement window (ms)");
  sub.add_option("--warmup-ms", a->warmup_ms, "time before measuring each step (ms)");
  sub.add_option("--text", a->text, "send this text to the model's BYTES input (raw text mode)");
  sub.add_option("-f,--csv", a->csv, "write perf_analyzer-style CSV here");
  sub.add_flag("--json", a->json_out, "print one JSON summary line");
  sub.add_option("--max-threads", a->max_threads,
                 "request-rate mode: most requests outstanding (HTTP: connections)");
  sub.add_option("--client-threads", a->client_threads,
                 "client network threads (requests are sent and read asynchronously)")
      ->check(CLI::Range(1, 256));
  sub.add_option("--in-process", a->in_process,
                 "load this model repository here and send requests straight to its scheduler "
                 "(no network; -u and -i are ignored)");
  sub.add_option("--model-cache-dir", a->cache_dir, "with --in-process: where built plans go");
  sub.add_flag("--health", a->health,
               "load GET /v2/health/live instead of inference (HTTP overhead; -m still names a "
               "model whose metadata is read)");
  return [a] { return RunPerf(*a); };
}

}  // namespace

SURGE_REGISTER_COMMAND(perf, "perf",
                       "Load generator for KServe v2 servers (perf_analyzer-like): throughput and "
                       "p50/p90/p95/p99 latency over HTTP or gRPC",
                       SetupPerf);

}  // namespace surge::cli
