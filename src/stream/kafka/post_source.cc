#include "stream/kafka/post_source.h"

#include <algorithm>

#include "core/logging.h"

namespace surge::stream::kafka {

void PostBatch::Clear() {
  posts.clear();
  next_offsets.clear();
  dead_letters = 0;
}

Result<std::unique_ptr<KafkaPostSource>> KafkaPostSource::Create(KafkaPostSourceOptions options) {
  if (options.uri.topic.empty()) {
    return InvalidArgumentError("kafka post source {}: no topic (kafka://host:port/topic?group=g)",
                                options.uri.ToString());
  }
  if (options.max_batch == 0) {
    return InvalidArgumentError("kafka post source: max_batch must be at least 1");
  }
  std::unique_ptr<KafkaPostSource> source(new KafkaPostSource());
  ConsumerOptions co = ConsumerOptions::FromUri(options.uri);
  co.client_id = options.client_id;
  co.on_rebalance = options.on_rebalance;
  SURGE_ASSIGN_OR_RETURN(source->consumer_, KafkaConsumer::Create(std::move(co)));
  SURGE_RETURN_IF_ERROR(source->consumer_->Subscribe({options.uri.topic}));
  source->options_ = std::move(options);
  return source;
}

void KafkaPostSource::DeadLetter(const Message& m, const Status& why, std::string_view kind) {
  ++dead_letters_;
  auto it = dead_letter_counts_.find(kind);
  if (it == dead_letter_counts_.end()) {
    it = dead_letter_counts_.emplace(std::string(kind), 0).first;
    SURGE_LOG_WARN(
        "kafka post source: dead-lettered {}[{}]@{} ({}): {} (later '{}' records are only "
        "counted)",
        m.topic, m.partition, m.offset, kind, why.message(), kind);
  }
  ++it->second;
  if (options_.on_dead_letter) options_.on_dead_letter(m, why, kind);
}

Status KafkaPostSource::Poll(int timeout_ms, PostBatch* batch) {
  batch->Clear();
  SURGE_ASSIGN_OR_RETURN(std::vector<Message> messages,
                         consumer_->Poll(options_.max_batch, timeout_ms));
  batch->posts.reserve(messages.size());
  for (const Message& m : messages) {
    auto next = std::find_if(batch->next_offsets.begin(), batch->next_offsets.end(),
                             [&](const TopicPartitionOffset& o) {
                               return o.partition == m.partition && o.topic == m.topic;
                             });
    if (next == batch->next_offsets.end()) {
      batch->next_offsets.push_back({m.topic, m.partition, m.offset + 1});
    } else {
      next->offset = std::max(next->offset, m.offset + 1);
    }
    if (m.value_is_null) {
      DeadLetter(m,
                 InvalidArgumentError("null_value: the record has no value (a tombstone); a post "
                                      "is a JSON object"),
                 "null_value");
      ++batch->dead_letters;
      continue;
    }
    SourcedPost sp;
    Status s = parser_.ParseInto(m.value, &sp.post);
    if (!s.ok()) {
      DeadLetter(m, s, PostErrorKind(s));
      ++batch->dead_letters;
      continue;
    }
    sp.topic = m.topic;
    sp.partition = m.partition;
    sp.offset = m.offset;
    batch->posts.push_back(std::move(sp));
    ++posts_;
  }
  return Status::Ok();
}

}  // namespace surge::stream::kafka
