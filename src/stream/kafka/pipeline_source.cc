#include "stream/kafka/pipeline_source.h"

#include <algorithm>

#include "core/logging.h"

namespace surge::stream::kafka {

Result<std::unique_ptr<KafkaPipelineSource>> KafkaPipelineSource::Open(const std::string& uri,
                                                                       int idle_ms) {
  SURGE_ASSIGN_OR_RETURN(KafkaUri u, KafkaUri::Parse(uri));
  if (u.topic.empty()) {
    return InvalidArgumentError("source '{}': name the posts topic, kafka://HOST:PORT/TOPIC", uri);
  }
  if (u.group.empty()) u.group = "surge-trends";
  auto s = std::unique_ptr<KafkaPipelineSource>(new KafkaPipelineSource());
  s->name_ = "kafka:" + u.topic;
  s->topic_ = u.topic;
  s->idle_ms_ = std::max(0, idle_ms);
  KafkaPostSourceOptions o;
  o.uri = u;
  KafkaPipelineSource* self = s.get();
  o.on_dead_letter = [self](const Message& m, const Status& why, std::string_view kind) {
    SourceError e;
    e.kind = std::string(kind);
    e.message = fmt::format("{} (topic {}, partition {}, offset {})", why.message(), m.topic,
                            m.partition, m.offset);
    e.position = {m.partition, m.offset};
    e.raw = m.value.substr(0, 4096);
    self->pending_errors_.push_back(std::move(e));
  };
  SURGE_ASSIGN_OR_RETURN(s->source_, KafkaPostSource::Create(std::move(o)));
  s->last_record_ = std::chrono::steady_clock::now();
  return s;
}

Result<bool> KafkaPipelineSource::Read(RecordBlock* block, size_t /*max_records*/) {
  for (;;) {
    if (stop_.load()) return false;
    SURGE_RETURN_IF_ERROR(source_->Poll(200, &batch_));
    for (auto& e : pending_errors_) block->errors.push_back(std::move(e));
    pending_errors_.clear();
    for (SourcedPost& sp : batch_.posts) {
      block->post_positions.push_back({sp.partition, sp.offset});
      block->posts.push_back(std::move(sp.post));
    }
    for (const TopicPartitionOffset& o : batch_.next_offsets) {
      auto it = std::find_if(next_.begin(), next_.end(), [&](const TopicPartitionOffset& x) {
        return x.topic == o.topic && x.partition == o.partition;
      });
      if (it == next_.end()) {
        next_.push_back(o);
      } else {
        it->offset = std::max(it->offset, o.offset);
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (block->size() > 0) {
      last_record_ = now;
      received_ = true;
      assigned_ = true;  // records come only from assigned partitions
      return true;
    }
    if (idle_ms_ > 0 && !assigned_) {
      // The idle clock starts once the group has assigned partitions: joining a group takes
      // seconds of its own (the coordinator's rebalance delay), which is not the topic being idle.
      auto parts = source_->consumer().Assignment();
      if (parts.ok() && !parts->empty()) {
        assigned_ = true;
        last_record_ = now;
        continue;
      }
      // A join slower than its allowance: are the brokers there and the topic with them? If so,
      // the group is up and only rebalancing, which can take several rounds (members joining,
      // a member slow to rejoin, a metadata change mid-join): wait for it a while longer.
      const auto waited = now - last_record_;
      if (!cluster_answered_ && waited > std::chrono::milliseconds(idle_ms_ + kJoinAllowanceMs)) {
        Result<int> partitions = source_->consumer().PartitionCount(topic_, kMetadataTimeoutMs);
        if (!partitions.ok()) {
          return UnavailableError(
              "{}: no partition assigned in {} ms: {} (are the brokers reachable and does the "
              "topic exist?)",
              name_, idle_ms_ + kJoinAllowanceMs, partitions.status().message());
        }
        cluster_answered_ = true;
        SURGE_LOG_WARN(
            "{}: group '{}' has assigned this reader no partition in {} ms; the brokers answer "
            "and the topic has {} partition(s): waiting up to {} ms in all for the rebalance",
            name_, source_->consumer().group(), idle_ms_ + kJoinAllowanceMs, *partitions,
            idle_ms_ + kRebalanceAllowanceMs);
      }
      if (waited > std::chrono::milliseconds(idle_ms_ + kRebalanceAllowanceMs)) {
        return UnavailableError(
            "{}: group '{}' assigned this reader no partition in {} ms (a rebalance that did not "
            "settle, or more readers in the group than the topic has partitions)",
            name_, source_->consumer().group(), idle_ms_ + kRebalanceAllowanceMs);
      }
      continue;
    }
    if (idle_ms_ > 0 && now - last_record_ > std::chrono::milliseconds(idle_ms_)) {
      if (!received_) {
        return UnavailableError(
            "{}: no record in {} ms (are the brokers reachable and does the topic hold posts? "
            "--idle-ms 0 waits for ever)",
            name_, idle_ms_);
      }
      return false;
    }
  }
}

Status KafkaPipelineSource::CommitAll() {
  if (next_.empty()) return Status::Ok();
  return source_->consumer().Commit(next_);
}

}  // namespace surge::stream::kafka
