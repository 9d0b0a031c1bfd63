// Internal to src/stream/kafka: the pieces the producer, consumer and mock cluster share (building
// a librdkafka configuration, routing its logs to spdlog, turning its error codes into Status).
#pragma once

#include <librdkafka/rdkafka.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "core/status.h"
#include "stream/kafka/types.h"
#include "stream/kafka/uri.h"

namespace surge::stream::kafka::internal {

// The StatusCode that fits a librdkafka error: broker/transport trouble → kUnavailable, timeouts →
// kDeadlineExceeded, unknown topic/partition → kNotFound, message too large or a bad argument →
// kInvalidArgument, queue full → kResourceExhausted, rebalance/generation errors →
// kFailedPrecondition, the rest → kInternal.
StatusCode CodeFor(rd_kafka_resp_err_t err);

// "context: <librdkafka's description> (<ERROR_NAME>)" with the fitting code.
Status KafkaStatus(rd_kafka_resp_err_t err, std::string_view context);

// Per-client state that librdkafka's callbacks reach through the configuration's opaque pointer
// (one opaque serves every callback, so producer and consumer derive from this). Keeps the last
// error the error callback reported, so that a timeout can say why ("all brokers are down").
// Thread-safe.
class ClientState {
 public:
  virtual ~ClientState() = default;
  void SetLastError(rd_kafka_resp_err_t err, std::string reason);
  // "" when none.
  std::string LastError() const;

 private:
  mutable std::mutex mu_;
  rd_kafka_resp_err_t err_ = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string reason_;
};

struct ConfDeleter {
  void operator()(rd_kafka_conf_t* c) const { rd_kafka_conf_destroy(c); }
};
using ConfPtr = std::unique_ptr<rd_kafka_conf_t, ConfDeleter>;

struct PartitionListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using PartitionListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, PartitionListDeleter>;

// A property the caller may not override, with the only value(s) that keep the contract.
struct Pinned {
  std::string_view key;
  std::string_view value;            // what we set
  std::string_view accepted_values;  // comma-separated values the caller may also write
  std::string_view why;
};

// Builds a configuration: `defaults` first, then the caller's properties (errors name the property
// and librdkafka's reason), then `pinned` (a caller value for a pinned key that is not accepted is
// an error saying why it is pinned). Installs the spdlog log callback and the error callback, and
// makes `owner` the opaque every callback receives (it must outlive the client).
Result<ConfPtr> BuildConf(std::string_view client_kind, std::string_view brokers,
                          const Properties& defaults, const Properties& properties,
                          const std::vector<Pinned>& pinned, ClientState* owner);

PartitionListPtr ToList(const std::vector<TopicPartitionOffset>& tpos);
std::vector<TopicPartitionOffset> FromList(const rd_kafka_topic_partition_list_t* list);

// Partition count of `topic` from a metadata request (no auto-creation); kNotFound names the topic
// and the topics that do exist; kUnavailable/kDeadlineExceeded when no broker answers.
Result<int> PartitionCount(rd_kafka_t* rk, std::string_view topic, int timeout_ms,
                           std::string_view brokers, const ClientState& errors);

}  // namespace surge::stream::kafka::internal
