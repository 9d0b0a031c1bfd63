// Kafka sinks: one topic written through an idempotent KafkaProducer.
//
//  * KafkaTrendSink — TrendUpdate JSON (trend.h) to `surge.trends` (or the URI's topic), keyed by
//    topic_id, so every update of one topic lands in one partition, in order.
//  * KafkaPostSink — Post JSON (post.h) to `surge.posts` (or the URI's topic), keyed by post id;
//    what `surge simulate --kafka` produces and KafkaPostSource reads.
//  * KafkaDeadLetterWriter — a rejected record to a dead-letter topic: key and value exactly as
//    they came (bytes that are not JSON or not UTF-8 survive), the reason in headers
//    surge.dl.kind, surge.dl.reason, surge.dl.topic, surge.dl.partition, surge.dl.offset.
//
// Create checks that the topic exists (kNotFound names it and the topics that do) and that a
// broker answers (kUnavailable) within `timeout_ms`, so a wrong URI fails at start, not after the
// first record. Writes are asynchronous; Flush(timeout) waits for the brokers' acks and reports
// any failed record (KafkaProducer::Flush).
//
// Thread safety: one thread per sink.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "stream/kafka/producer.h"
#include "stream/kafka/types.h"
#include "stream/kafka/uri.h"
#include "stream/post.h"
#include "stream/sink.h"
#include "stream/trend.h"

namespace surge::stream::kafka {

inline constexpr std::string_view kTrendsTopic = "surge.trends";
inline constexpr std::string_view kPostsTopic = "surge.posts";
inline constexpr std::string_view kDeadLetterTopic = "surge.deadletter";

// A producer bound to one existing topic.
class KafkaTopicWriter {
 public:
  // The URI's topic, or `default_topic` when it names none.
  static Result<std::unique_ptr<KafkaTopicWriter>> Create(const KafkaUri& uri,
                                                          std::string_view default_topic,
                                                          int timeout_ms);
  Status Write(std::string_view key, std::string_view value);
  Status Write(ProducerRecord record);  // record.topic is replaced by this writer's topic
  Status Flush(int timeout_ms) { return producer_->Flush(timeout_ms); }

  const std::string& topic() const { return topic_; }
  int partitions() const { return partitions_; }
  KafkaProducer& producer() { return *producer_; }

 private:
  KafkaTopicWriter() = default;
  std::unique_ptr<KafkaProducer> producer_;
  std::string topic_;
  int partitions_ = 0;
};

// Also a TrendSink (sink.h): OnHotList writes the list's updates, Close flushes (close_timeout_ms).
class KafkaTrendSink final : public TrendSink {
 public:
  static Result<std::unique_ptr<KafkaTrendSink>> Create(const KafkaUri& uri, int timeout_ms);
  Status Write(const TrendUpdate& update);
  Status Flush(int timeout_ms) { return writer_->Flush(timeout_ms); }
  KafkaTopicWriter& writer() { return *writer_; }

  Status OnHotList(const HotList& list) override;
  Status Close() override { return Flush(close_timeout_ms_); }
  void set_close_timeout_ms(int ms) { close_timeout_ms_ = ms; }

 private:
  std::unique_ptr<KafkaTopicWriter> writer_;
  std::string json_;
  int close_timeout_ms_ = 30000;
};

class KafkaPostSink {
 public:
  static Result<std::unique_ptr<KafkaPostSink>> Create(const KafkaUri& uri, int timeout_ms);
  Status Write(const Post& post);
  Status Flush(int timeout_ms) { return writer_->Flush(timeout_ms); }
  KafkaTopicWriter& writer() { return *writer_; }

 private:
  std::unique_ptr<KafkaTopicWriter> writer_;
  std::string json_;
};

class KafkaDeadLetterWriter {
 public:
  static Result<std::unique_ptr<KafkaDeadLetterWriter>> Create(const KafkaUri& uri, int timeout_ms);
  Status Write(const Message& record, const Status& why, std::string_view kind);
  Status Flush(int timeout_ms) { return writer_->Flush(timeout_ms); }
  KafkaTopicWriter& writer() { return *writer_; }

 private:
  std::unique_ptr<KafkaTopicWriter> writer_;
};

}  // namespace surge::stream::kafka
