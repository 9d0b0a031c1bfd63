#include "serve/api.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "serve/metrics.h"

namespace surge::serve {
namespace {

TEST(InferDecode, JsonTensors) {
  HttpRequest h;
  h.body = R"({"id":"r1","parameters":{"priority":1,"timeout":500},
              "inputs":[{"name":"input_ids","datatype":"INT64","shape":[2,2],"data":[[1,2],[3,4]]},
                        {"name":"text","datatype":"BYTES","shape":[1],"data":["héllo"]}],
              "outputs":[{"name":"logits","parameters":{"classification":2}}]})";
  InferRequest r;
  ASSERT_TRUE(DecodeInferRequest(h, &r).ok());
  EXPECT_EQ(r.id, "r1");
  EXPECT_EQ(r.priority, 1);
  EXPECT_EQ(r.timeout_us, 500u);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0].tensor.shape(), (Shape{2, 2}));
  EXPECT_EQ(r.inputs[0].tensor.data_as<int64_t>()[3], 4);
  EXPECT_EQ(r.inputs[1].strings.at(0), "héllo");
  EXPECT_EQ(r.outputs.at(0).classification, 2);
}

TEST(InferDecode, BinaryTensorExtension) {
  std::string header =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},
                    {"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":13}}],
         "parameters":{"binary_data_output":true}})";
  float v[2] = {1.5f, -2.f};
  std::string body = header + std::string(reinterpret_cast<char*>(v), 8) + PackBytes({"ab", "cde"});
  HttpRequest h;
  h.body = body;
  h.inference_header_length = header.size();
  InferRequest r;
  Status s = DecodeInferRequest(h, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.inputs[0].tensor.data_as<float>()[1], -2.f);
  EXPECT_EQ(r.inputs[1].strings, (std::vector<std::string>{"ab", "cde"}));
  EXPECT_TRUE(r.binary_output);
}

TEST(InferDecode, BadRequestsSayWhy) {
  auto decode = [](std::string body, std::optional<size_t> hlen = std::nullopt) {
    HttpRequest h;
    h.body = std::move(body);
    h.inference_header_length = hlen;
    InferRequest r;
    return DecodeInferRequest(h, &r);
  };
  EXPECT_EQ(decode("{not json").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decode(R"({"inputs":5})").code(), StatusCode::kInvalidArgument);
  Status n = decode(R"({"inputs":[{"name":"x","datatype":"INT64","shape":[3],"data":[1,2]}]})");
  EXPECT_NE(n.message().find("needs 3"), std::string::npos) << n.message();
  EXPECT_FALSE(
      decode(R"({"inputs":[{"name":"x","datatype":"INT64","shape":[-1],"data":[]}]})").ok());
  EXPECT_FALSE(
      decode(R"({"inputs":[{"name":"x","datatype":"COMPLEX","shape":[1],"data":[1]}]})").ok());
  EXPECT_FALSE(
      decode(R"({"inputs":[{"name":"x","datatype":"INT64","shape":[1],"data":["a"]}]})").ok());
  EXPECT_FALSE(
      decode(R"({"inputs":[{"name":"x","datatype":"INT64","shape":[100000,100000,1000]}]})").ok());
  // Binary size disagrees with the shape; binary larger than the body.
  std::string hdr =
      R"({"inputs":[{"name":"x","datatype":"INT64","shape":[2],"parameters":{"binary_data_size":8}}]})";
  EXPECT_FALSE(decode(hdr + std::string(8, '\0'), hdr.size()).ok());
  std::string hdr2 =
      R"({"inputs":[{"name":"x","datatype":"INT64","shape":[1],"parameters":{"binary_data_size":80}}]})";
  EXPECT_FALSE(decode(hdr2 + std::string(8, '\0'), hdr2.size()).ok());
  // Truncated BYTES element.
  EXPECT_FALSE(UnpackBytes(std::string("\x05\x00\x00\x00"
                                       "ab",
                                       6),
                           1)
                   .ok());
}

TEST(InferEncode, BinaryOutputsFollowTheJsonHeader) {
  InferResponse resp;
  resp.model_name = "m";
  resp.model_version = "1";
  InferTensor t;
  t.name = "logits";
  t.datatype = "FP32";
  t.shape = {1, 2};
  t.tensor = Tensor(DType::kFloat32, {1, 2});
  t.tensor.data_as<float>()[1] = 3.f;
  resp.outputs.push_back(t);
  resp.binary.push_back(true);
  InferTensor j = t;
  j.name = "json";
  resp.outputs.push_back(j);
  resp.binary.push_back(false);
  HttpResponse h = EncodeInferResponse(resp);
  ASSERT_EQ(h.headers.size(), 1u);
  size_t hlen = std::stoul(h.headers[0].second);
  auto json = nlohmann::json::parse(h.body.substr(0, hlen));
  EXPECT_EQ(json["outputs"][0]["parameters"]["binary_data_size"], 8);
  EXPECT_EQ(json["outputs"][1]["data"][1], 3.0);
  ASSERT_EQ(h.body.size(), hlen + 8);
  float back[2];
  std::memcpy(back, h.body.data() + hlen, 8);
  EXPECT_EQ(back[1], 3.f);
}

TEST(HttpStatus, TritonMapping) {
  EXPECT_EQ(HttpStatusFor(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnimplemented), 501);
  EXPECT_EQ(HttpStatusFor(StatusCode::kInternal), 500);
}

TEST(Metrics, TritonNamesLabelsAndHistograms) {
  ModelStats s;
  s.success.Add(2'000'000);
  s.inference_count = 4;
  s.execution_count = 1;
  s.AddFailure(FailureReason::kRejected, 1000);
  s.request_us.Observe(2000);
  s.request_us.Observe(20);
  ModelMetricsView v{"bert", "1", &s, 3};
  GpuSample g;
  g.uuid = "GPU-abc";
  g.memory_used_bytes = 1024;
  std::string text = RenderMetrics({v}, {g});
  for (const char* want :
       {"# TYPE nv_inference_request_success counter",
        "nv_inference_request_success{model=\"bert\",version=\"1\"} 1",
        "nv_inference_request_failure{model=\"bert\",version=\"1\",reason=\"REJECTED\"} 1",
        "nv_inference_count{model=\"bert\",version=\"1\"} 4",
        "nv_inference_exec_count{model=\"bert\",version=\"1\"} 1",
        "nv_inference_pending_request_count{model=\"bert\",version=\"1\"} 3",
        "nv_inference_request_duration_us{model=\"bert\",version=\"1\"} 2001",
        "nv_inference_queue_duration_us", "nv_inference_compute_infer_duration_us",
        "# TYPE nv_inference_request_duration_histogram_us histogram",
        "nv_inference_request_duration_histogram_us_bucket{model=\"bert\",version=\"1\",le=\"100\"}"
        " 1",
        "nv_inference_request_duration_histogram_us_bucket{model=\"bert\",version=\"1\",le="
        "\"2500\"} 2",
        "nv_inference_request_duration_histogram_us_bucket{model=\"bert\",version=\"1\",le=\"+"
        "Inf\"} 2",
        "nv_inference_request_duration_histogram_us_count{model=\"bert\",version=\"1\"} 2",
        "\nnv_gpu_memory_used_bytes{gpu_uuid=\"GPU-abc\"} 1024"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  EXPECT_EQ(RenderMetrics({}, {}).find("nv_gpu"), std::string::npos);
}

// Requests finishing on several threads while another reads the statistics: every reading counts
// each request in all of its phases or in none (perf_analyzer checks exactly this per window).
TEST(Stats, SnapshotsCountEveryPhaseOfARequestTogether) {
  ModelStats s;
  constexpr int kWriters = 4, kEach = 20000;
  std::atomic<bool> done{false}, reading{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&s, &reading] {
      // The writers start once the reader runs (on a busy machine it could otherwise be scheduled
      // only after they all finished, and check nothing).
      while (!reading.load()) std::this_thread::yield();
      for (int i = 0; i < kEach; ++i) {
        s.AddSuccess(5000, 1000, 100, 3000, 200, 2, 1);
        s.AddExecution(2, 100, 3000, 200);
      }
    });
  }
  int readings = 0, torn = 0;
  std::thread reader([&] {
    while (!done.load()) {
      const StatsSnapshot r = s.Snapshot();
      ++readings;
      const uint64_t n = r.success.count;
      torn += r.queue.count != n || r.compute_input.count != n || r.compute_infer.count != n ||
              r.compute_output.count != n || r.inference_count != 2 * n ||
              r.compute_infer.ns != 3000 * n;
      uint64_t batch_runs = r.batches.count(2) ? r.batches.at(2).count : 0;
      torn += batch_runs != r.execution_count;
      reading = true;
    }
  });
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  EXPECT_GT(readings, 0);
  EXPECT_EQ(torn, 0) << "of " << readings << " readings";
  const StatsSnapshot end = s.Snapshot();
  EXPECT_EQ(end.success.count, uint64_t{kWriters} * kEach);
  EXPECT_EQ(end.execution_count, uint64_t{kWriters} * kEach);
  EXPECT_EQ(end.batches.at(2).compute_infer_ns, uint64_t{kWriters} * kEach * 3000);
}

TEST(Metrics, ParsesNvidiaSmiCsv) {
  auto g = ParseNvidiaSmi("GPU-1234, 37, 1000, 81920, 120.5, 700.00\ngarbage\n");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].uuid, "GPU-1234");
  EXPECT_DOUBLE_EQ(g[0].utilization, 0.37);
  EXPECT_DOUBLE_EQ(g[0].memory_total_bytes, 81920.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(g[0].power_limit_watts, 700.0);
}

}  // namespace
}  // namespace surge::serve
