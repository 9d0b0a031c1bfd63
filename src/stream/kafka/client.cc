#include "stream/kafka/client.h"

#include <algorithm>

#include "core/logging.h"

namespace surge::stream::kafka {

std::string_view RebalanceKindName(RebalanceKind kind) {
  switch (kind) {
    case RebalanceKind::kAssigned:
      return "assigned";
    case RebalanceKind::kRevoked:
      return "revoked";
    case RebalanceKind::kLost:
      return "lost";
  }
  return "?";
}

std::string ToString(const TopicPartition& tp) {
  return fmt::format("{}[{}]", tp.topic, tp.partition);
}

std::string ToString(const TopicPartitionOffset& tpo) {
  return fmt::format("{}[{}]@{}", tpo.topic, tpo.partition, tpo.offset);
}

namespace internal {

StatusCode CodeFor(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
      return StatusCode::kOk;
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__RESOLVE:
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
      return StatusCode::kUnavailable;
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
      return StatusCode::kDeadlineExceeded;
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
      return StatusCode::kNotFound;
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR__INVALID_TYPE:
      return StatusCode::kInvalidArgument;
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
      return StatusCode::kResourceExhausted;
    case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
    case RD_KAFKA_RESP_ERR__ASSIGNMENT_LOST:
    case RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID:
    case RD_KAFKA_RESP_ERR__STATE:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
      return StatusCode::kFailedPrecondition;
    default:
      return StatusCode::kInternal;
  }
}

Status KafkaStatus(rd_kafka_resp_err_t err, std::string_view context) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return Status::Ok();
  return Status(CodeFor(err),
                fmt::format("{}: {} ({})", context, rd_kafka_err2str(err), rd_kafka_err2name(err)));
}

void ClientState::SetLastError(rd_kafka_resp_err_t err, std::string reason) {
  std::lock_guard<std::mutex> lock(mu_);
  err_ = err;
  reason_ = std::move(reason);
}

std::string ClientState::LastError() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (err_ == RD_KAFKA_RESP_ERR_NO_ERROR) return "";
  return fmt::format("{} ({})", reason_, rd_kafka_err2name(err_));
}

namespace {

// librdkafka logs with syslog levels (0 emerg .. 7 debug). Called from librdkafka's threads.
void LogCallback(const rd_kafka_t* rk, int level, const char* facility, const char* message) {
  const char* name = rk ? rd_kafka_name(rk) : "kafka";
  if (level <= 3) {
    SURGE_LOG_ERROR("librdkafka {} {}: {}", name, facility, message);
  } else if (level == 4) {
    SURGE_LOG_WARN("librdkafka {} {}: {}", name, facility, message);
  } else if (level <= 6) {
    SURGE_LOG_INFO("librdkafka {} {}: {}", name, facility, message);
  } else {
    SURGE_LOG_DEBUG("librdkafka {} {}: {}", name, facility, message);
  }
}

void ErrorCallback(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
  auto code = static_cast<rd_kafka_resp_err_t>(err);
  if (code == RD_KAFKA_RESP_ERR__FATAL) {
    char buf[512];
    rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, buf, sizeof(buf));
    SURGE_LOG_ERROR("kafka {}: fatal error {}: {}", rd_kafka_name(rk), rd_kafka_err2name(orig),
                    buf);
  } else {
    // Transient: librdkafka retries by itself (e.g. a broker going down and coming back).
    SURGE_LOG_WARN("kafka {}: {} ({})", rd_kafka_name(rk), reason, rd_kafka_err2name(code));
  }
  if (opaque != nullptr) static_cast<ClientState*>(opaque)->SetLastError(code, reason);
}

Status SetProperty(rd_kafka_conf_t* conf, std::string_view client_kind, const std::string& key,
                   const std::string& value) {
  char err[512];
  if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof(err)) != RD_KAFKA_CONF_OK) {
    return InvalidArgumentError("kafka {}: property '{}={}' rejected: {}", client_kind, key, value,
                                err);
  }
  return Status::Ok();
}

}  // namespace

Result<ConfPtr> BuildConf(std::string_view client_kind, std::string_view brokers,
                          const Properties& defaults, const Properties& properties,
                          const std::vector<Pinned>& pinned, ClientState* owner) {
  if (brokers.empty()) {
    return InvalidArgumentError("kafka {}: no brokers given (e.g. kafka://localhost:9092/topic)",
                                client_kind);
  }
  ConfPtr conf(rd_kafka_conf_new());
  SURGE_RETURN_IF_ERROR(
      SetProperty(conf.get(), client_kind, "bootstrap.servers", std::string(brokers)));
  for (const auto& [k, v] : defaults) {
    SURGE_RETURN_IF_ERROR(SetProperty(conf.get(), client_kind, k, v));
  }
  for (const auto& [k, v] : properties) {
    auto pin =
        std::find_if(pinned.begin(), pinned.end(), [&](const Pinned& p) { return p.key == k; });
    if (pin != pinned.end()) {
      bool accepted = v == pin->value;
      std::string_view list = pin->accepted_values;
      while (!accepted && !list.empty()) {
        size_t comma = list.find(',');
        accepted = list.substr(0, comma) == v;
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      }
      if (!accepted) {
        return InvalidArgumentError("kafka {}: property '{}={}' is not allowed: {} (it stays '{}')",
                                    client_kind, k, v, pin->why, pin->value);
      }
    }
    SURGE_RETURN_IF_ERROR(SetProperty(conf.get(), client_kind, k, v));
  }
  for (const Pinned& p : pinned) {
    SURGE_RETURN_IF_ERROR(
        SetProperty(conf.get(), client_kind, std::string(p.key), std::string(p.value)));
  }
  rd_kafka_conf_set_log_cb(conf.get(), LogCallback);
  rd_kafka_conf_set_error_cb(conf.get(), ErrorCallback);
  rd_kafka_conf_set_opaque(conf.get(), owner);
  return conf;
}

PartitionListPtr ToList(const std::vector<TopicPartitionOffset>& tpos) {
  PartitionListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(tpos.size())));
  for (const auto& tpo : tpos) {
    rd_kafka_topic_partition_list_add(list.get(), tpo.topic.c_str(), tpo.partition)->offset =
        tpo.offset;
  }
  return list;
}

std::vector<TopicPartitionOffset> FromList(const rd_kafka_topic_partition_list_t* list) {
  std::vector<TopicPartitionOffset> out;
  if (list == nullptr) return out;
  out.reserve(list->cnt);
  for (int i = 0; i < list->cnt; ++i) {
    const auto& e = list->elems[i];
    out.push_back({e.topic, e.partition, e.offset});
  }
  return out;
}

Result<int> PartitionCount(rd_kafka_t* rk, std::string_view topic, int timeout_ms,
                           std::string_view brokers, const ClientState& errors) {
  const struct rd_kafka_metadata* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, /*all_topics=*/1, nullptr, &md, timeout_ms);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    std::string last = errors.LastError();
    Status s = KafkaStatus(err, fmt::format("metadata request to brokers {} for topic '{}' within "
                                            "{} ms",
                                            brokers, topic, timeout_ms));
    if (err == RD_KAFKA_RESP_ERR__TIMED_OUT || err == RD_KAFKA_RESP_ERR__TRANSPORT) {
      return UnavailableError("{}; no broker answered{}{}", s.message(),
                              last.empty() ? "" : "; last client error: ", last);
    }
    return s;
  }
  std::unique_ptr<const struct rd_kafka_metadata, void (*)(const struct rd_kafka_metadata*)> guard(
      md, rd_kafka_metadata_destroy);
  std::string known;
  for (int i = 0; i < md->topic_cnt; ++i) {
    const auto& t = md->topics[i];
    if (topic == t.topic) {
      if (t.err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) continue;
      if (t.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return KafkaStatus(t.err, fmt::format("topic '{}' on brokers {}", topic, brokers));
      }
      return t.partition_cnt;
    }
    if (known.size() < 300) {
      if (!known.empty()) known += ", ";
      known += t.topic;
    }
  }
  return NotFoundError(
      "topic '{}' does not exist on brokers {} (topics there: {}); create it with the partition "
      "count the stage needs, or name an existing topic",
      topic, brokers, known.empty() ? "none" : known);
}

}  // namespace internal
}  // namespace surge::stream::kafka
