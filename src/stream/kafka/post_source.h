// KafkaPostSource: posts (DESIGN.md §5 JSON, one per message value) from a Kafka topic through a
// consumer group. A record that does not parse — bad JSON, a missing field, invalid UTF-8, over
// kMaxPostBytes, a null value — goes to the dead-letter callback with the reason and its
// topic/partition/offset, is counted per kind (the first of each kind is logged), and the stream
// goes on. Dead-lettered records advance the batch's offsets like good ones: once the batch is
// checkpointed they are committed too (so make the dead-letter sink durable before committing,
// e.g. flush a KafkaDeadLetterWriter in the checkpoint's flush step).
//
// Thread safety: one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "stream/kafka/consumer.h"
#include "stream/kafka/types.h"
#include "stream/kafka/uri.h"
#include "stream/post.h"

namespace surge::stream::kafka {

// A rejected record: the raw message, why (the parser's error), and the stable kind
// (PostErrorKind vocabulary, plus "null_value").
using DeadLetterFn =
    std::function<void(const Message& record, const Status& why, std::string_view kind)>;

struct SourcedPost {
  Post post;
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
};

struct PostBatch {
  std::vector<SourcedPost> posts;
  // Per partition, one past the last record this batch consumed (good or dead-lettered).
  std::vector<TopicPartitionOffset> next_offsets;
  int64_t dead_letters = 0;

  void Clear();
};

struct KafkaPostSourceOptions {
  KafkaUri uri;  // brokers, topic (required), group (required), librdkafka properties
  size_t max_batch = 1024;
  DeadLetterFn on_dead_letter;
  RebalanceHandler on_rebalance;
  std::string client_id = "surge-posts";
};

class KafkaPostSource {
 public:
  // Creates the consumer and subscribes to uri.topic. Errors: no topic or group in the URI, or a
  // consumer configuration error.
  static Result<std::unique_ptr<KafkaPostSource>> Create(KafkaPostSourceOptions options);

  // Clears `batch` and fills it with up to max_batch records, waiting up to `timeout_ms` for the
  // first. Errors only for what stops the consumer (KafkaConsumer::Poll), never a bad record.
  Status Poll(int timeout_ms, PostBatch* batch);

  int64_t posts() const { return posts_; }
  int64_t dead_letters() const { return dead_letters_; }
  const std::map<std::string, int64_t, std::less<>>& dead_letter_counts() const {
    return dead_letter_counts_;
  }
  KafkaConsumer& consumer() { return *consumer_; }
  const KafkaUri& uri() const { return options_.uri; }

 private:
  KafkaPostSource() = default;
  void DeadLetter(const Message& m, const Status& why, std::string_view kind);

  KafkaPostSourceOptions options_;
  std::unique_ptr<KafkaConsumer> consumer_;
  PostParser parser_;
  int64_t posts_ = 0;
  int64_t dead_letters_ = 0;
  std::map<std::string, int64_t, std::less<>> dead_letter_counts_;
};

}  // namespace surge::stream::kafka
