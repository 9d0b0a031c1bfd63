#include "stream/kafka/mock_cluster.h"

#include <librdkafka/rdkafka_mock.h>

#include "stream/kafka/client.h"
#include "stream/kafka/uri.h"

namespace surge::stream::kafka {

Result<std::unique_ptr<MockCluster>> MockCluster::Create(int brokers) {
  if (brokers < 1 || brokers > 64) {
    return InvalidArgumentError("mock cluster: {} brokers requested; give 1..64", brokers);
  }
  internal::ConfPtr conf(rd_kafka_conf_new());
  char err[512];
  // The handle only hosts the cluster; it connects nowhere, so keep its "no bootstrap.servers"
  // warning out of the log.
  if (rd_kafka_conf_set(conf.get(), "log_level", "3", err, sizeof(err)) != RD_KAFKA_CONF_OK ||
      rd_kafka_conf_set(conf.get(), "client.id", "surge-mock-cluster", err, sizeof(err)) !=
          RD_KAFKA_CONF_OK) {
    return InternalError("mock cluster: configuring its host handle: {}", err);
  }
  std::unique_ptr<MockCluster> mc(new MockCluster());
  mc->owner_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof(err));
  if (mc->owner_ == nullptr)
    return InternalError("mock cluster: creating its host handle: {}", err);
  conf.release();
  mc->cluster_ = rd_kafka_mock_cluster_new(mc->owner_, brokers);
  if (mc->cluster_ == nullptr) {
    return UnavailableError("mock cluster: could not start {} brokers on loopback", brokers);
  }
  mc->bootstrap_ = rd_kafka_mock_cluster_bootstraps(mc->cluster_);
  mc->brokers_ = brokers;
  return mc;
}

MockCluster::~MockCluster() {
  if (query_ != nullptr) rd_kafka_destroy(query_);
  if (cluster_ != nullptr) rd_kafka_mock_cluster_destroy(cluster_);
  if (owner_ != nullptr) rd_kafka_destroy(owner_);
}

Result<std::pair<int64_t, int64_t>> MockCluster::Watermarks(std::string_view topic,
                                                            int32_t partition, int timeout_ms) {
  if (query_ == nullptr) {
    internal::ConfPtr conf(rd_kafka_conf_new());
    char err[512];
    if (rd_kafka_conf_set(conf.get(), "bootstrap.servers", bootstrap_.c_str(), err, sizeof(err)) !=
            RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf.get(), "client.id", "surge-mock-watermarks", err, sizeof(err)) !=
            RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf.get(), "log_level", "3", err, sizeof(err)) != RD_KAFKA_CONF_OK) {
      return InternalError("mock cluster: configuring its query client: {}", err);
    }
    query_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof(err));
    if (query_ == nullptr) return InternalError("mock cluster: creating its query client: {}", err);
    conf.release();
  }
  int64_t low = 0, high = 0;
  const std::string name(topic);
  rd_kafka_resp_err_t e =
      rd_kafka_query_watermark_offsets(query_, name.c_str(), partition, &low, &high, timeout_ms);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return UnavailableError("mock cluster: watermarks of {}[{}]: {}", topic, partition,
                            rd_kafka_err2str(e));
  }
  return std::make_pair(low, high);
}

std::string MockCluster::Uri(std::string_view topic, std::string_view group) const {
  std::string uri = fmt::format("kafka://{}/{}", bootstrap_, topic);
  if (!group.empty()) uri += fmt::format("?group={}", group);
  return uri;
}

Status MockCluster::CreateTopic(std::string_view topic, int partitions, int replication_factor) {
  SURGE_RETURN_IF_ERROR(ValidateTopicName(topic));
  if (partitions < 1) {
    return InvalidArgumentError("mock cluster: topic '{}' with {} partitions; give at least 1",
                                topic, partitions);
  }
  if (replication_factor < 1 || replication_factor > brokers_) {
    return InvalidArgumentError(
        "mock cluster: topic '{}' with replication factor {}; give 1..{} (the broker count)", topic,
        replication_factor, brokers_);
  }
  std::string name(topic);
  return internal::KafkaStatus(
      rd_kafka_mock_topic_create(cluster_, name.c_str(), partitions, replication_factor),
      fmt::format("mock cluster: creating topic '{}'", topic));
}

void MockCluster::PushRequestErrors(ApiKey api, const std::vector<rd_kafka_resp_err_t>& errors) {
  rd_kafka_mock_push_request_errors_array(cluster_, static_cast<int16_t>(api), errors.size(),
                                          errors.data());
}

Status MockCluster::PushBrokerErrors(
    int32_t broker, ApiKey api,
    const std::vector<std::pair<rd_kafka_resp_err_t, int>>& errors_and_rtts) {
  // The C API is variadic (err, rtt) pairs; push them one at a time to keep their order.
  for (const auto& [err, rtt] : errors_and_rtts) {
    SURGE_RETURN_IF_ERROR(internal::KafkaStatus(
        rd_kafka_mock_broker_push_request_error_rtts(cluster_, broker, static_cast<int16_t>(api), 1,
                                                     err, rtt),
        fmt::format("mock cluster: injecting an error on broker {}", broker)));
  }
  return Status::Ok();
}

void MockCluster::ClearRequestErrors(ApiKey api) {
  rd_kafka_mock_clear_request_errors(cluster_, static_cast<int16_t>(api));
}

Status MockCluster::SetBrokerDown(int32_t broker) {
  return internal::KafkaStatus(rd_kafka_mock_broker_set_down(cluster_, broker),
                               fmt::format("mock cluster: taking broker {} down", broker));
}

Status MockCluster::SetBrokerUp(int32_t broker) {
  return internal::KafkaStatus(rd_kafka_mock_broker_set_up(cluster_, broker),
                               fmt::format("mock cluster: bringing broker {} up", broker));
}

Status MockCluster::SetBrokerRtt(int32_t broker, int rtt_ms) {
  return internal::KafkaStatus(rd_kafka_mock_broker_set_rtt(cluster_, broker, rtt_ms),
                               fmt::format("mock cluster: setting broker {} rtt", broker));
}

Status MockCluster::SetPartitionLeader(std::string_view topic, int32_t partition, int32_t broker) {
  std::string name(topic);
  return internal::KafkaStatus(
      rd_kafka_mock_partition_set_leader(cluster_, name.c_str(), partition, broker),
      fmt::format("mock cluster: moving the leader of {}[{}] to broker {}", topic, partition,
                  broker));
}

void MockCluster::SetTopicError(std::string_view topic, rd_kafka_resp_err_t err) {
  std::string name(topic);
  rd_kafka_mock_topic_set_error(cluster_, name.c_str(), err);
}

}  // namespace surge::stream::kafka
