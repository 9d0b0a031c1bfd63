#include "stream/kafka/sinks.h"

namespace surge::stream::kafka {

Result<std::unique_ptr<KafkaTopicWriter>> KafkaTopicWriter::Create(const KafkaUri& uri,
                                                                   std::string_view default_topic,
                                                                   int timeout_ms) {
  std::unique_ptr<KafkaTopicWriter> w(new KafkaTopicWriter());
  w->topic_ = uri.topic.empty() ? std::string(default_topic) : uri.topic;
  SURGE_RETURN_IF_ERROR(ValidateTopicName(w->topic_));
  ProducerOptions po = ProducerOptions::FromUri(uri);
  po.client_id = "surge-" + w->topic_;
  SURGE_ASSIGN_OR_RETURN(w->producer_, KafkaProducer::Create(std::move(po)));
  Result<int> partitions = w->producer_->PartitionCount(w->topic_, timeout_ms);
  if (!partitions.ok()) {
    return partitions.status().WithContext(fmt::format("kafka sink {}", uri.ToString()));
  }
  w->partitions_ = *partitions;
  return w;
}

Status KafkaTopicWriter::Write(std::string_view key, std::string_view value) {
  return producer_->Produce(topic_, key, value);
}

Status KafkaTopicWriter::Write(ProducerRecord record) {
  record.topic = topic_;
  return producer_->Produce(record);
}

Result<std::unique_ptr<KafkaTrendSink>> KafkaTrendSink::Create(const KafkaUri& uri,
                                                               int timeout_ms) {
  auto sink = std::make_unique<KafkaTrendSink>();
  SURGE_ASSIGN_OR_RETURN(sink->writer_, KafkaTopicWriter::Create(uri, kTrendsTopic, timeout_ms));
  return sink;
}

Status KafkaTrendSink::Write(const TrendUpdate& update) {
  if (update.topic_id.empty()) {
    return InvalidArgumentError(
        "kafka trend sink: an update for '{}' has no topic_id (the record key)", update.hashtag);
  }
  json_.clear();
  AppendTrendJson(update, &json_);
  return writer_->Write(update.topic_id, json_);
}

Status KafkaTrendSink::OnHotList(const HotList& list) {
  for (const TrendUpdate& u : list.updates) SURGE_RETURN_IF_ERROR(Write(u));
  return Status::Ok();
}

Result<std::unique_ptr<KafkaPostSink>> KafkaPostSink::Create(const KafkaUri& uri, int timeout_ms) {
  auto sink = std::make_unique<KafkaPostSink>();
  SURGE_ASSIGN_OR_RETURN(sink->writer_, KafkaTopicWriter::Create(uri, kPostsTopic, timeout_ms));
  return sink;
}

Status KafkaPostSink::Write(const Post& post) {
  if (post.id.empty()) {
    return InvalidArgumentError("kafka post sink: a post has no id (the record key)");
  }
  json_.clear();
  AppendPostJson(post, &json_);
  return writer_->Write(post.id, json_);
}

Result<std::unique_ptr<KafkaDeadLetterWriter>> KafkaDeadLetterWriter::Create(const KafkaUri& uri,
                                                                             int timeout_ms) {
  auto sink = std::make_unique<KafkaDeadLetterWriter>();
  SURGE_ASSIGN_OR_RETURN(sink->writer_,
                         KafkaTopicWriter::Create(uri, kDeadLetterTopic, timeout_ms));
  return sink;
}

Status KafkaDeadLetterWriter::Write(const Message& record, const Status& why,
                                    std::string_view kind) {
  ProducerRecord r;
  r.key = record.key;
  r.value = record.value;
  r.headers = {{"surge.dl.kind", std::string(kind)},
               {"surge.dl.reason", why.message()},
               {"surge.dl.topic", record.topic},
               {"surge.dl.partition", std::to_string(record.partition)},
               {"surge.dl.offset", std::to_string(record.offset)}};
  return writer_->Write(std::move(r));
}

}  // namespace surge::stream::kafka
