// Plain value types shared by the Kafka producer, consumer, sources and sinks. No librdkafka types
// appear here, so callers need not include rdkafka.h.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace surge::stream::kafka {

// Let the partitioner pick the partition (from the key; murmur2 like the Java client).
inline constexpr int32_t kAnyPartition = -1;

// Special start offsets for an assignment (same values as librdkafka's RD_KAFKA_OFFSET_*).
inline constexpr int64_t kOffsetBeginning = -2;
inline constexpr int64_t kOffsetEnd = -1;
// Start from the group's committed offset, else from auto.offset.reset.
inline constexpr int64_t kOffsetCommitted = -1001;

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
  auto operator<=>(const TopicPartition&) const = default;
  bool operator==(const TopicPartition&) const = default;
};

// `offset` is the next offset to read (the Kafka convention for commits): one past the last record
// whose effects are applied.
struct TopicPartitionOffset {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = kOffsetCommitted;
  bool operator==(const TopicPartitionOffset&) const = default;
};

struct Header {
  std::string key;
  std::string value;
  bool operator==(const Header&) const = default;
};

// One consumed record. `key` is empty for a record without a key; `value_is_null` tells a tombstone
// (null value) from an empty one.
struct Message {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::string key;
  std::string value;
  bool value_is_null = false;
  int64_t timestamp_ms = 0;  // producer or log-append time; 0 when the broker gives none
  std::vector<Header> headers;
};

// What a consumer-group rebalance did to this member.
enum class RebalanceKind {
  kAssigned,  // partitions are now ours; the handler may set where each starts
  kRevoked,   // partitions are about to go to another member: checkpoint them now
  kLost,      // partitions were already taken (session expired): do NOT checkpoint, drop state
};
std::string_view RebalanceKindName(RebalanceKind kind);

struct RebalanceEvent {
  RebalanceKind kind = RebalanceKind::kAssigned;
  // For kAssigned every offset starts as kOffsetCommitted; the handler may overwrite it (e.g. with
  // the offset its checkpoint reflects: the checkpoint wins over the group's committed offset).
  std::vector<TopicPartitionOffset> partitions;
};

// "topic[partition]@offset".
std::string ToString(const TopicPartitionOffset& tpo);
std::string ToString(const TopicPartition& tp);

}  // namespace surge::stream::kafka
