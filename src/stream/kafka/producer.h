// KafkaProducer: an idempotent librdkafka producer (enable.idempotence=true, acks=all), so broker
// retries after timeouts, leader changes or reconnects never write a record twice or out of order
// within a partition.
//
// Keyed records go to the partition murmur2(key) picks (the Java client's partitioner, so other
// clients agree on where a key lives); records without a key are spread. Delivery reports arrive
// through `on_delivery` on the thread that calls Produce, Poll or Flush; Flush also sums up every
// failure since the previous Flush, so a caller that only checks Flush still sees each loss.
//
// Thread safety: use one producer from one thread at a time (Produce, Poll and Flush all run the
// delivery callback on the calling thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "stream/kafka/types.h"
#include "stream/kafka/uri.h"

namespace surge::stream::kafka {

struct DeliveryReport {
  std::string topic;
  int32_t partition = kAnyPartition;
  int64_t offset = -1;  // -1 when the record was not written
  std::string key;
  uint64_t tag = 0;  // the caller's ProducerRecord::tag
  Status status;     // OK when the brokers acknowledged the record (acks=all)
};

struct ProducerOptions {
  std::string brokers;    // bootstrap.servers form
  Properties properties;  // passed to librdkafka (e.g. linger.ms, message.max.bytes)
  std::string client_id = "surge";
  std::function<void(const DeliveryReport&)> on_delivery;
  // How long Produce waits for room when the local queue (queue.buffering.max.messages) is full.
  int queue_full_timeout_ms = 30000;
  // How long the destructor waits for outstanding records before dropping them (logged as lost).
  int close_timeout_ms = 10000;

  static ProducerOptions FromUri(const KafkaUri& uri);
};

struct ProducerRecord {
  std::string_view topic;
  std::string_view key;  // empty: no key
  std::string_view value;
  int32_t partition = kAnyPartition;
  std::vector<Header> headers;
  uint64_t tag = 0;  // returned in the DeliveryReport
};

class KafkaProducer {
 public:
  struct Counters {
    int64_t produced = 0;   // accepted by Produce
    int64_t delivered = 0;  // acknowledged by the brokers
    int64_t failed = 0;     // failed delivery (after librdkafka's retries)
  };

  // Errors: a property librdkafka rejects, or one that would break idempotence (acks,
  // enable.idempotence) — named with the reason.
  static Result<std::unique_ptr<KafkaProducer>> Create(ProducerOptions options);
  ~KafkaProducer();
  KafkaProducer(const KafkaProducer&) = delete;
  KafkaProducer& operator=(const KafkaProducer&) = delete;

  // Enqueues one record (copied). Errors at once: a record larger than message.max.bytes
  // (kInvalidArgument, with both sizes), a topic the brokers said does not exist (kNotFound), a
  // queue still full after queue_full_timeout_ms (kResourceExhausted). Broker trouble shows up
  // later, in the delivery report and in Flush.
  Status Produce(const ProducerRecord& record);
  Status Produce(std::string_view topic, std::string_view key, std::string_view value);

  // Serves delivery reports for up to `timeout_ms`; returns how many events were served.
  int Poll(int timeout_ms);

  // Waits until every record produced so far is acknowledged or failed. kDeadlineExceeded when
  // records are still outstanding after `timeout_ms` (with the count and the last broker error,
  // e.g. all brokers down); otherwise, if any record failed since the previous Flush, the first
  // failure (topic, partition, reason) and how many failed.
  Status Flush(int timeout_ms);

  // Partitions of `topic`, from the brokers' metadata. kNotFound when it does not exist;
  // kUnavailable when no broker answers within `timeout_ms`.
  Result<int> PartitionCount(std::string_view topic, int timeout_ms);

  // Records produced and not yet acknowledged or failed.
  int64_t Outstanding() const;
  Counters counters() const;
  const std::string& brokers() const;

 private:
  struct Impl;
  explicit KafkaProducer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace surge::stream::kafka
