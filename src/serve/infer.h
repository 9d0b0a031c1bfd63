// Protocol-neutral inference requests and responses: what the HTTP and gRPC front ends decode
// into and encode from, and what the scheduler runs. BYTES tensors (Triton's TYPE_STRING) have no
// engine dtype; they travel as a list of strings beside an undefined Tensor.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace surge::serve {

using Clock = std::chrono::steady_clock;

// KServe datatype names ("INT64", "FP32", "BYTES", ...).
Result<DType> DTypeFromDatatype(std::string_view datatype);
std::string_view DatatypeName(DType dtype);
// Byte size of one element of `datatype`; 0 for BYTES (variable) and for unknown names.
size_t DatatypeSize(std::string_view datatype);

struct InferTensor {
  std::string name;
  std::string datatype;  // KServe name
  Shape shape;
  Tensor tensor;                     // numeric datatypes
  std::vector<std::string> strings;  // BYTES, row-major

  bool is_bytes() const { return datatype == "BYTES"; }
  int64_t numel() const { return NumElements(shape); }
};

struct RequestedOutput {
  std::string name;
  bool binary = false;         // HTTP binary tensor extension
  int64_t classification = 0;  // classification extension: top-k as "score:index[:label]"
};

// A cancellation flag shared between a front end (which sets it when the client goes away) and the
// scheduler (which drops a queued request whose flag is set).
using CancelFlag = std::shared_ptr<std::atomic<bool>>;

struct InferRequest {
  std::string model_name;
  std::string model_version;  // empty: the latest ready version
  std::string id;
  std::vector<InferTensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output
  bool binary_output = false;            // HTTP "binary_data_output"
  int64_t priority = 0;                  // 0: the model's default level, 1 is the highest
  uint64_t timeout_us = 0;               // 0: the queue policy's default
  CancelFlag cancelled;                  // may be null
  Clock::time_point received = Clock::now();
};

struct InferResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  std::vector<InferTensor> outputs;
  std::vector<bool> binary;  // per output, HTTP only
};

// Called exactly once per request, from any thread.
using InferCallback = std::function<void(Result<InferResponse>)>;

// Packs strings as the binary tensor extension does: a little-endian uint32 length before each.
std::string PackBytes(const std::vector<std::string>& strings);
// The inverse; fails when the bytes are truncated or hold a different number of elements.
Result<std::vector<std::string>> UnpackBytes(std::string_view data, int64_t expected_count);

}  // namespace surge::serve
