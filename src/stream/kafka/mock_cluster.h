// MockCluster: librdkafka's built-in mock Kafka cluster (rdkafka_mock.h) as an RAII object. It is
// a real Kafka protocol peer on loopback (127.0.0.1, ephemeral ports): producers, consumer groups,
// offset commits, idempotent-producer sequence checks; any Kafka client — including kcat —
// can use bootstrap(). Errors are injected per request type (ApiKey) or per broker, brokers can
// go down and up, and partition leaders can move.
//
// For tests and local runs; the mock keeps everything in memory and its API is librdkafka's
// experimental one. Thread safety: all methods may be called from any thread.
#pragma once

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

struct rd_kafka_mock_cluster_s;

namespace surge::stream::kafka {

// Kafka protocol request types (ApiKey) that error injection names.
enum class ApiKey : int16_t {
  kProduce = 0,
  kFetch = 1,
  kListOffsets = 2,
  kMetadata = 3,
  kOffsetCommit = 8,
  kOffsetFetch = 9,
  kFindCoordinator = 10,
  kJoinGroup = 11,
  kHeartbeat = 12,
  kLeaveGroup = 13,
  kSyncGroup = 14,
  kInitProducerId = 22,
};

class MockCluster {
 public:
  // `brokers` brokers with ids 1..brokers.
  static Result<std::unique_ptr<MockCluster>> Create(int brokers);
  ~MockCluster();
  MockCluster(const MockCluster&) = delete;
  MockCluster& operator=(const MockCluster&) = delete;

  // "127.0.0.1:port1,127.0.0.1:port2,...".
  const std::string& bootstrap() const { return bootstrap_; }
  int broker_count() const { return brokers_; }
  // "kafka://<bootstrap>/<topic>[?group=<group>]".
  std::string Uri(std::string_view topic, std::string_view group = "") const;

  // Partition leaders are spread over the brokers.
  Status CreateTopic(std::string_view topic, int partitions, int replication_factor = 1);

  // The next errors.size() requests of `api` (to any broker) fail with these errors, in order.
  // RD_KAFKA_RESP_ERR__TRANSPORT makes the broker drop the connection instead.
  void PushRequestErrors(ApiKey api, const std::vector<rd_kafka_resp_err_t>& errors);
  // The next requests of `api` to one broker answer with err (NO_ERROR = handled normally) after
  // rtt_ms — a delay past the client's request.timeout.ms makes it retry a request the broker
  // already applied.
  Status PushBrokerErrors(int32_t broker, ApiKey api,
                          const std::vector<std::pair<rd_kafka_resp_err_t, int>>& errors_and_rtts);
  void ClearRequestErrors(ApiKey api);

  // Disconnects the broker and refuses connections (-1: all brokers); leaders do not move.
  Status SetBrokerDown(int32_t broker);
  Status SetBrokerUp(int32_t broker);
  Status SetBrokerRtt(int32_t broker, int rtt_ms);
  Status SetPartitionLeader(std::string_view topic, int32_t partition, int32_t broker);
  // Metadata answers for `topic` carry `err` (e.g. UNKNOWN_TOPIC_OR_PART: a broker with topic
  // auto-creation off; the mock otherwise creates any topic a producer names).
  void SetTopicError(std::string_view topic, rd_kafka_resp_err_t err);

  // The partition's log start and end offsets, asked of the cluster like any client would. The
  // mock keeps a bounded log per partition (a few MB in librdkafka 2.x) and deletes the oldest
  // records past it, as retention would: a start offset above 0 means records were dropped.
  Result<std::pair<int64_t, int64_t>> Watermarks(std::string_view topic, int32_t partition,
                                                 int timeout_ms = 5000);

 private:
  MockCluster() = default;
  rd_kafka_t* owner_ = nullptr;
  rd_kafka_t* query_ = nullptr;  // a client of the cluster for Watermarks(), made on first use
  rd_kafka_mock_cluster_s* cluster_ = nullptr;
  std::string bootstrap_;
  int brokers_ = 0;
};

}  // namespace surge::stream::kafka
