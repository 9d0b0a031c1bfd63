// Kafka endpoints as URIs, the form every --in/--out/--kafka flag takes:
//
//   kafka://host:port[,host2:port2...]/topic?group=name&librdkafka.property=value&...
//
// Brokers are a comma-separated list of host or host:port (IPv6 as [addr]:port); the port defaults
// to 9092. The path is one topic name (optional; empty when the URI only names a cluster). Query
// parameters: `group` is the consumer group id; every other key is passed to librdkafka unchanged
// (e.g. `client.id=...`, `message.max.bytes=...`, `session.timeout.ms=...`). Values are
// percent-decoded. Errors say which part is wrong and what is valid.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace surge::stream::kafka {

using Properties = std::vector<std::pair<std::string, std::string>>;

struct KafkaUri {
  std::string brokers;  // librdkafka bootstrap.servers form: "h1:9092,h2:9093"
  std::string topic;    // may be empty
  std::string group;    // may be empty
  Properties properties;

  static Result<KafkaUri> Parse(std::string_view uri);
  // Canonical form; Parse(ToString()) gives back the same value.
  std::string ToString() const;
};

// Checks a topic name the way Kafka does: 1..249 characters of [a-zA-Z0-9._-], not "." or "..".
Status ValidateTopicName(std::string_view topic);

}  // namespace surge::stream::kafka
