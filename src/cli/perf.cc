// `surge perf`: a perf_analyzer-like load generator for KServe v2 servers (surge serve, Triton).
// Concurrency sweep (N requests outstanding) or request-rate mode (constant or Poisson arrivals),
// over HTTP (binary tensor extension, keep-alive) or gRPC (raw_input_contents); tensor inputs with
// generated data or raw text for models that tokenise server-side. Prints throughput and latency
// percentiles per step; optional CSV (perf_analyzer's columns) and JSON.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "serve/infer.h"
#include "serve/proto/grpc_service.grpc.pb.h"

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
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

class Client {
 public:
  virtual ~Client() = default;
  virtual bool Infer() = 0;
};

class HttpClient final : public Client {
 public:
  HttpClient(const std::string& url, const std::string& target, const std::string* body,
             size_t header_len)
      : conn_(SplitUrl(url).first, SplitUrl(url).second),
        target_(target),
        body_(body),
        header_len_(header_len) {}
  bool Infer() override {
    if (body_ == nullptr) return conn_.Send(http::verb::get, target_, "", 0, nullptr) == 200;
    return conn_.Send(http::verb::post, target_, *body_, header_len_, nullptr) == 200;
  }

 private:
  HttpConn conn_;
  std::string target_;
  const std::string* body_;
  size_t header_len_;
};

class GrpcClient final : public Client {
 public:
  GrpcClient(std::shared_ptr<grpc::Channel> ch, const inference::ModelInferRequest* req)
      : stub_(inference::GRPCInferenceService::NewStub(ch)), req_(req) {}
  bool Infer() override {
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    return stub_->ModelInfer(&ctx, *req_, &resp).ok();
  }

 private:
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  const inference::ModelInferRequest* req_;
};

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
  if (a.protocol == "http") {
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
  std::string target = "/v2/models/" + a.model + "/infer";
  auto make_client = [&]() -> std::unique_ptr<Client> {
    if (a.protocol == "http") {
      if (a.health) return std::make_unique<HttpClient>(a.url, "/v2/health/live", nullptr, 0);
      return std::make_unique<HttpClient>(a.url, target, &http_body, header_len);
    }
    return std::make_unique<GrpcClient>(channel, &grpc_req);
  };

  const bool rate_mode = !a.request_rate_range.empty();
  auto range = ParseRange(rate_mode ? a.request_rate_range : a.concurrency_range);
  if (!range.ok()) {
    std::cerr << "error: " << range.status().message() << '\n';
    return 2;
  }
  std::vector<StepResult> results;
  for (double x = range->start; x <= range->end + 1e-9; x += range->step) {
    std::mutex mu;
    std::vector<Sample> samples;
    std::atomic<bool> stop{false};
    std::atomic<bool> measuring{false};
    int threads = rate_mode ? a.max_threads : static_cast<int>(x);
    auto t_start = Clock::now();
    auto t_measure = t_start + std::chrono::milliseconds(a.warmup_ms);
    std::vector<std::thread> workers;
    for (int w = 0; w < threads; ++w) {
      workers.emplace_back([&, w] {
        auto client = make_client();
        std::vector<Sample> local;
        std::mt19937_64 wrng(w + 1);
        std::exponential_distribution<double> expo(x);
        // Rate mode: worker w sends every threads-th scheduled request.
        Clock::time_point next = t_start;
        int64_t k = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          Clock::time_point sched = Clock::now();
          if (rate_mode) {
            // Each worker's arrivals are a 1/threads share of the total process.
            double gap = a.distribution == "poisson" ? expo(wrng) * threads : threads / x;
            if (k == 0) gap *= static_cast<double>(w) / threads;
            next += std::chrono::nanoseconds(static_cast<int64_t>(gap * 1e9));
            ++k;
            std::this_thread::sleep_until(next);
            if (stop.load()) break;
            sched = next;
          }
          bool ok = client->Infer();
          double us = std::chrono::duration<double, std::micro>(Clock::now() - sched).count();
          if (measuring.load(std::memory_order_relaxed)) local.push_back({us, ok});
        }
        std::lock_guard<std::mutex> lk(mu);
        samples.insert(samples.end(), local.begin(), local.end());
      });
    }
    std::this_thread::sleep_until(t_measure);
    measuring = true;
    auto m0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(a.measurement_ms));
    measuring = false;
    double secs = std::chrono::duration<double>(Clock::now() - m0).count();
    stop = true;
    for (auto& t : workers) t.join();
    StepResult r;
    r.x = x;
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
    }
    std::cout << json{{"model", a.model}, {"protocol", a.protocol}, {"results", arr}}.dump()
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
  sub.add_option("--max-threads", a->max_threads, "workers in request-rate mode");
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
