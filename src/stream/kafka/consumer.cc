#include "stream/kafka/consumer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "core/logging.h"
#include "stream/kafka/client.h"

namespace surge::stream::kafka {

struct KafkaConsumer::Impl : internal::ClientState {
  ConsumerOptions options;
  rd_kafka_t* rk = nullptr;
  bool closed = false;
  bool close_abandoned = false;  // Close gave up waiting for the group
  bool handler_enabled = true;
  // The queue of a commit that got no answer in its time, and what it committed. librdkafka
  // still sends it when the coordinator is back; the next commit waits for its answer first, so
  // that the older offsets cannot land after the newer ones.
  rd_kafka_queue_t* unanswered_commit = nullptr;
  std::string unanswered_what;
  // Set by the rebalance callback during a Poll.
  bool rebalanced = false;
  std::set<TopicPartition> revoked;
  Status handler_error;
  // Partitions this consumer paused because the rebalance handler failed for their assignment:
  // resumed when assigned again with the handler's success, and until then their records are
  // dropped in Poll, since records fetched between the assign and the pause can still arrive.
  std::set<TopicPartition> failed;

  ~Impl() override {
    if (unanswered_commit != nullptr) rd_kafka_queue_destroy(unanswered_commit);
    if (rk == nullptr) return;
    if (!closed) {
      handler_enabled = false;
      Status st = CloseWithin(kDestroyCloseMs);
      if (!st.ok()) SURGE_LOG_WARN("{}", st.message());
    }
    if (close_abandoned) {
      rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    } else {
      rd_kafka_destroy(rk);
    }
  }

  // How long destruction waits for the group when Close was not called.
  static constexpr int kDestroyCloseMs = 30000;

  // Leaves the group. rd_kafka_consumer_close waits for the coordinator without a bound when it
  // is gone with a commit outstanding; the close runs in the background instead, its callbacks
  // (the revoke) served here, for timeout_ms at most, after which the client is dropped on
  // destruction (close_abandoned).
  Status CloseWithin(int timeout_ms) {
    rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
    rd_kafka_error_t* error = rd_kafka_consumer_close_queue(rk, queue);
    Status status = Status::Ok();
    if (error != nullptr) {
      status = internal::KafkaStatus(rd_kafka_error_code(error),
                                     fmt::format("kafka consumer (group {}): close: {}",
                                                 options.group, rd_kafka_error_string(error)));
      rd_kafka_error_destroy(error);
    } else {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
      while (!rd_kafka_consumer_closed(rk)) {
        if (std::chrono::steady_clock::now() >= deadline) {
          close_abandoned = true;
          status = MakeStatus(StatusCode::kDeadlineExceeded,
                              "kafka consumer (group {}): close did not finish in {} ms (the "
                              "group coordinator is unreachable); the member is dropped and the "
                              "group notices when its session times out",
                              options.group, timeout_ms);
          break;
        }
        rd_kafka_queue_poll_callback(queue, 100);
      }
    }
    rd_kafka_queue_destroy(queue);
    closed = true;
    return status;
  }

  void OnRebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts) {
    const bool cooperative = std::strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    RebalanceEvent event;
    event.partitions = internal::FromList(parts);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      event.kind = RebalanceKind::kAssigned;
      for (auto& p : event.partitions) p.offset = kOffsetCommitted;
    } else {
      event.kind = rd_kafka_assignment_lost(rk) ? RebalanceKind::kLost : RebalanceKind::kRevoked;
      for (const auto& p : event.partitions) revoked.insert({p.topic, p.partition});
    }
    SURGE_LOG_INFO("kafka consumer {} (group {}): {} {} partition(s)", rd_kafka_name(rk),
                   options.group, RebalanceKindName(event.kind), event.partitions.size());
    bool handler_failed = false;
    if (handler_enabled && options.on_rebalance) {
      Status s = options.on_rebalance(event);
      handler_failed = !s.ok();
      if (!s.ok() && handler_error.ok()) {
        handler_error = s.WithContext(
            fmt::format("rebalance handler ({} partitions)", RebalanceKindName(event.kind)));
      }
    }
    rebalanced = true;
    rd_kafka_error_t* error = nullptr;
    rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (event.kind == RebalanceKind::kAssigned) {
      internal::PartitionListPtr list = internal::ToList(event.partitions);
      if (cooperative) {
        error = rd_kafka_incremental_assign(rk, list.get());
      } else {
        code = rd_kafka_assign(rk, list.get());
      }
      if (handler_failed) {
        // The handler could not prepare these partitions (e.g. restore their state): keep them
        // assigned, so the group stays consistent, but fetch and return nothing from them.
        rd_kafka_pause_partitions(rk, list.get());
        for (const auto& p : event.partitions) failed.insert({p.topic, p.partition});
      } else if (std::any_of(event.partitions.begin(), event.partitions.end(),
                             [&](const TopicPartitionOffset& p) {
                               return failed.count({p.topic, p.partition}) > 0;
                             })) {
        // Assigned again, and prepared this time: fetch from them again.
        rd_kafka_resume_partitions(rk, list.get());
        for (const auto& p : event.partitions) failed.erase({p.topic, p.partition});
      }
    } else if (cooperative) {
      error = rd_kafka_incremental_unassign(rk, parts);
    } else {
      code = rd_kafka_assign(rk, nullptr);
    }
    if (error != nullptr) {
      SURGE_LOG_ERROR("kafka consumer {}: applying the rebalance failed: {}", rd_kafka_name(rk),
                      rd_kafka_error_string(error));
      rd_kafka_error_destroy(error);
    } else if (code != RD_KAFKA_RESP_ERR_NO_ERROR) {
      SURGE_LOG_ERROR("kafka consumer {}: applying the rebalance failed: {}", rd_kafka_name(rk),
                      rd_kafka_err2str(code));
    }
  }

  static void RebalanceCallback(rd_kafka_t*, rd_kafka_resp_err_t err,
                                rd_kafka_topic_partition_list_t* parts, void* opaque) {
    static_cast<Impl*>(static_cast<internal::ClientState*>(opaque))->OnRebalance(err, parts);
  }

  Status Usable() const {
    if (rk == nullptr || closed) {
      return FailedPreconditionError("kafka consumer (group {}) is closed", options.group);
    }
    return Status::Ok();
  }
};

ConsumerOptions ConsumerOptions::FromUri(const KafkaUri& uri) {
  ConsumerOptions o;
  o.brokers = uri.brokers;
  o.group = uri.group;
  o.properties = uri.properties;
  return o;
}

KafkaConsumer::KafkaConsumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KafkaConsumer::~KafkaConsumer() = default;

Result<std::unique_ptr<KafkaConsumer>> KafkaConsumer::Create(ConsumerOptions options) {
  if (options.group.empty()) {
    return InvalidArgumentError(
        "kafka consumer for {}: no consumer group; give one (kafka://host:port/topic?group=name)",
        options.brokers);
  }
  if (options.auto_offset_reset != "earliest" && options.auto_offset_reset != "latest") {
    return InvalidArgumentError("kafka consumer: auto_offset_reset '{}' is not earliest or latest",
                                options.auto_offset_reset);
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const ConsumerOptions& o = impl->options;
  const Properties defaults = {
      {"client.id", o.client_id},
      {"group.id", o.group},
      {"auto.offset.reset", o.auto_offset_reset},
      {"enable.partition.eof", "false"},
  };
  static constexpr std::string_view kManual =
      "offsets are committed only after the records' effects are checkpointed";
  const std::vector<internal::Pinned> pinned = {
      {"enable.auto.commit", "false", "false", kManual},
      {"enable.auto.offset.store", "false", "false", kManual},
  };
  for (const auto& [k, v] : o.properties) {
    if (k == "group.id" && v != o.group) {
      return InvalidArgumentError("kafka consumer: group.id '{}' conflicts with group '{}'", v,
                                  o.group);
    }
  }
  SURGE_ASSIGN_OR_RETURN(
      internal::ConfPtr conf,
      internal::BuildConf("consumer", o.brokers, defaults, o.properties, pinned, impl.get()));
  rd_kafka_conf_set_rebalance_cb(conf.get(), &Impl::RebalanceCallback);
  char err[512];
  impl->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf.get(), err, sizeof(err));
  if (impl->rk == nullptr) {
    return InvalidArgumentError("kafka consumer for {} (group {}): {}", o.brokers, o.group, err);
  }
  conf.release();
  // Serve error/log events from consumer_poll too.
  rd_kafka_poll_set_consumer(impl->rk);
  return std::unique_ptr<KafkaConsumer>(new KafkaConsumer(std::move(impl)));
}

Status KafkaConsumer::Subscribe(const std::vector<std::string>& topics) {
  SURGE_RETURN_IF_ERROR(impl_->Usable());
  if (topics.empty()) return InvalidArgumentError("kafka consumer: subscribe to no topic");
  internal::PartitionListPtr list(
      rd_kafka_topic_partition_list_new(static_cast<int>(topics.size())));
  for (const auto& t : topics) {
    SURGE_RETURN_IF_ERROR(ValidateTopicName(t));
    rd_kafka_topic_partition_list_add(list.get(), t.c_str(), RD_KAFKA_PARTITION_UA);
  }
  return internal::KafkaStatus(
      rd_kafka_subscribe(impl_->rk, list.get()),
      fmt::format("kafka consumer (group {}): subscribe", impl_->options.group));
}

Status KafkaConsumer::Assign(const std::vector<TopicPartitionOffset>& partitions) {
  SURGE_RETURN_IF_ERROR(impl_->Usable());
  internal::PartitionListPtr list = internal::ToList(partitions);
  return internal::KafkaStatus(
      rd_kafka_assign(impl_->rk, list.get()),
      fmt::format("kafka consumer (group {}): assign", impl_->options.group));
}

Result<std::vector<Message>> KafkaConsumer::Poll(size_t max_messages, int timeout_ms) {
  Impl& m = *impl_;
  SURGE_RETURN_IF_ERROR(m.Usable());
  std::vector<Message> out;
  m.rebalanced = false;
  m.revoked.clear();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out.size() < max_messages) {
    int wait = 0;
    if (out.empty()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      wait = static_cast<int>(std::max<int64_t>(0, left));
    }
    rd_kafka_message_t* rkm = rd_kafka_consumer_poll(m.rk, wait);
    // revoked is filled only by a rebalance during this Poll.
    if (!m.revoked.empty()) {
      std::erase_if(out, [&](const Message& msg) {
        return m.revoked.count({msg.topic, msg.partition}) > 0;
      });
    }
    if (rkm != nullptr && rkm->err == RD_KAFKA_RESP_ERR_NO_ERROR &&
        (!m.revoked.empty() || !m.failed.empty())) {
      // Not ours to apply: fetched before the callback of a partition now revoked, or before
      // the pause of a failed assignment took hold.
      const TopicPartition tp{rkm->rkt ? rd_kafka_topic_name(rkm->rkt) : "", rkm->partition};
      if (m.revoked.count(tp) > 0 || m.failed.count(tp) > 0) {
        rd_kafka_message_destroy(rkm);
        rkm = nullptr;
      }
    }
    if (rkm == nullptr) {
      if (m.rebalanced || out.size() > 0 || std::chrono::steady_clock::now() >= deadline) break;
      continue;
    }
    std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> guard(
        rkm, rd_kafka_message_destroy);
    if (rkm->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (rkm->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
      std::string topic = rkm->rkt ? rd_kafka_topic_name(rkm->rkt) : "";
      if (rkm->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
          rkm->err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC) {
        return NotFoundError(
            "kafka consumer (group {}): topic '{}' does not exist on brokers {}; create it or "
            "subscribe to an existing topic",
            m.options.group, topic, m.options.brokers);
      }
      char buf[512];
      rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(m.rk, buf, sizeof(buf));
      if (fatal != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return InternalError("kafka consumer (group {}): fatal error {}: {}", m.options.group,
                             rd_kafka_err2name(fatal), buf);
      }
      SURGE_LOG_WARN("kafka consumer (group {}): {} on '{}' [{}]: {}", m.options.group,
                     rd_kafka_err2name(rkm->err), topic, rkm->partition,
                     rd_kafka_message_errstr(rkm));
      continue;
    }
    Message msg;
    msg.topic = rd_kafka_topic_name(rkm->rkt);
    msg.partition = rkm->partition;
    msg.offset = rkm->offset;
    if (rkm->key != nullptr) msg.key.assign(static_cast<const char*>(rkm->key), rkm->key_len);
    if (rkm->payload != nullptr) {
      msg.value.assign(static_cast<const char*>(rkm->payload), rkm->len);
    } else {
      msg.value_is_null = true;
    }
    rd_kafka_timestamp_type_t tstype;
    int64_t ts = rd_kafka_message_timestamp(rkm, &tstype);
    msg.timestamp_ms = ts > 0 ? ts : 0;
    rd_kafka_headers_t* hdrs = nullptr;
    if (rd_kafka_message_headers(rkm, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR && hdrs != nullptr) {
      const char* name;
      const void* val;
      size_t size;
      for (size_t i = 0;
           rd_kafka_header_get_all(hdrs, i, &name, &val, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
           ++i) {
        msg.headers.push_back(
            {name, val ? std::string(static_cast<const char*>(val), size) : std::string()});
      }
    }
    out.push_back(std::move(msg));
    if (m.rebalanced) break;
  }
  if (!m.handler_error.ok()) {
    Status s = std::move(m.handler_error);
    m.handler_error = Status::Ok();
    return s;
  }
  return out;
}

namespace {

// Commit errors that say the coordinator is moving, loading or out of reach, not that the
// offsets are refused: the same commit is sent again until the caller's timeout.
bool RetriableCommitError(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
      return true;
    default:
      return false;
  }
}

// One commit's outcome: no answer by the deadline, or the coordinator's error (the first failed
// partition's, where the request as a whole succeeded).
struct CommitAttempt {
  bool answered = false;
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string failed;  // the failed partition, where one failed alone
};

// The commit's result event on its queue, or null when none came by the deadline.
rd_kafka_event_t* AwaitCommitResult(rd_kafka_queue_t* queue,
                                    std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return nullptr;
    rd_kafka_event_t* ev =
        rd_kafka_queue_poll(queue, static_cast<int>(std::min<int64_t>(left, 100)));
    if (ev == nullptr) continue;
    if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_OFFSET_COMMIT) return ev;
    rd_kafka_event_destroy(ev);  // not ours (the queue carries only this commit's result)
  }
}

// Sends one commit and waits for its answer until the deadline. rd_kafka_commit's synchronous
// form waits without a bound: with the brokers gone it never returns, and a stage told to stop
// could not. Without an answer, the commit's queue is handed to *unanswered (librdkafka may
// still send it).
CommitAttempt CommitOnce(rd_kafka_t* rk, const rd_kafka_topic_partition_list_t* list,
                         std::chrono::steady_clock::time_point deadline,
                         rd_kafka_queue_t** unanswered) {
  CommitAttempt out;
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  out.err = rd_kafka_commit_queue(rk, list, queue, nullptr, nullptr);
  if (out.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    out.answered = true;
    rd_kafka_queue_destroy(queue);
    return out;
  }
  rd_kafka_event_t* ev = AwaitCommitResult(queue, deadline);
  if (ev == nullptr) {
    *unanswered = queue;
    return out;
  }
  out.answered = true;
  out.err = rd_kafka_event_error(ev);
  if (out.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    // Each partition's own result.
    if (const rd_kafka_topic_partition_list_t* done = rd_kafka_event_topic_partition_list(ev)) {
      for (int i = 0; i < done->cnt; ++i) {
        if (done->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
          out.err = done->elems[i].err;
          out.failed = ToString(TopicPartitionOffset{done->elems[i].topic, done->elems[i].partition,
                                                     done->elems[i].offset});
          break;
        }
      }
    }
  }
  rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(queue);
  return out;
}

}  // namespace

Status KafkaConsumer::Commit(const std::vector<TopicPartitionOffset>& offsets, int timeout_ms) {
  SURGE_RETURN_IF_ERROR(impl_->Usable());
  if (offsets.empty()) return Status::Ok();
  for (const auto& o : offsets) {
    if (o.offset < 0) {
      return InvalidArgumentError("kafka consumer: commit of {} has no real offset (>= 0)",
                                  ToString(o));
    }
  }
  internal::PartitionListPtr list = internal::ToList(offsets);
  const std::string committing =
      fmt::format("commit of {} offset(s) (first {})", offsets.size(), ToString(offsets[0]));
  const std::string what =
      fmt::format("kafka consumer (group {}): {}", impl_->options.group, committing);
  // A coordinator that is moving or just came back answers the first commits with a transient
  // error (waiting for the coordinator, not the coordinator, loading); the commit is sent again,
  // as a Java consumer's commitSync does, until it lands, is refused, or the time is up.
  constexpr auto kRetryBackoff = std::chrono::milliseconds(100);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (impl_->unanswered_commit != nullptr) {
    // An earlier commit got no answer in its time and may still land: these offsets are sent
    // only once it is answered, or it could land after them and take the group back.
    rd_kafka_event_t* ev = AwaitCommitResult(impl_->unanswered_commit, deadline);
    if (ev == nullptr) {
      return MakeStatus(StatusCode::kDeadlineExceeded,
                        "{}: not sent in {} ms: the earlier {} is still unanswered by the group "
                        "coordinator, and commits go in order (the next commit or checkpoint "
                        "supersedes these offsets)",
                        what, timeout_ms, impl_->unanswered_what);
    }
    if (rd_kafka_resp_err_t err = rd_kafka_event_error(ev); err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      SURGE_LOG_INFO(
          "kafka consumer (group {}): the earlier {} was answered late: {} ({}); committing the "
          "newer offsets",
          impl_->options.group, impl_->unanswered_what, rd_kafka_err2str(err),
          rd_kafka_err2name(err));
    }
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(impl_->unanswered_commit);
    impl_->unanswered_commit = nullptr;
    impl_->unanswered_what.clear();
  }
  int attempts = 0;
  rd_kafka_resp_err_t transient = RD_KAFKA_RESP_ERR_NO_ERROR;  // the last retried error
  for (;;) {
    ++attempts;
    CommitAttempt a = CommitOnce(impl_->rk, list.get(), deadline, &impl_->unanswered_commit);
    if (!a.answered) {
      impl_->unanswered_what = committing;
      return MakeStatus(
          StatusCode::kDeadlineExceeded,
          "{}: no answer from the group coordinator in {} ms{} (the offsets may or "
          "may not be committed; the next commit or checkpoint supersedes them)",
          what, timeout_ms,
          transient == RD_KAFKA_RESP_ERR_NO_ERROR
              ? std::string()
              : fmt::format(" after {} attempt(s), the earlier answered {} ({})", attempts,
                            rd_kafka_err2str(transient), rd_kafka_err2name(transient)));
    }
    if (a.err == RD_KAFKA_RESP_ERR_NO_ERROR) return Status::Ok();
    const std::string context = a.failed.empty()
                                    ? what
                                    : fmt::format("kafka consumer (group {}): commit of {}",
                                                  impl_->options.group, a.failed);
    if (!RetriableCommitError(a.err)) return internal::KafkaStatus(a.err, context);
    if (std::chrono::steady_clock::now() + kRetryBackoff >= deadline) {
      return MakeStatus(StatusCode::kDeadlineExceeded,
                        "{}: not committed in {} ms, {} attempt(s), the last answered {} ({}) "
                        "(the next commit or checkpoint supersedes them)",
                        context, timeout_ms, attempts, rd_kafka_err2str(a.err),
                        rd_kafka_err2name(a.err));
    }
    transient = a.err;
    std::this_thread::sleep_for(kRetryBackoff);
  }
}

Result<std::vector<TopicPartitionOffset>> KafkaConsumer::Committed(
    const std::vector<TopicPartition>& partitions, int timeout_ms) {
  SURGE_RETURN_IF_ERROR(impl_->Usable());
  std::vector<TopicPartitionOffset> tpos;
  for (const auto& p : partitions) tpos.push_back({p.topic, p.partition, kOffsetCommitted});
  internal::PartitionListPtr list = internal::ToList(tpos);
  SURGE_RETURN_IF_ERROR(internal::KafkaStatus(
      rd_kafka_committed(impl_->rk, list.get(), timeout_ms),
      fmt::format("kafka consumer (group {}): reading committed offsets", impl_->options.group)));
  std::vector<TopicPartitionOffset> out = internal::FromList(list.get());
  for (auto& o : out) {
    if (o.offset < 0) o.offset = kOffsetCommitted;
  }
  return out;
}

Status KafkaConsumer::Seek(const TopicPartitionOffset& position, int timeout_ms) {
  SURGE_RETURN_IF_ERROR(impl_->Usable());
  internal::PartitionListPtr list = internal::ToList({position});
  rd_kafka_error_t* error = rd_kafka_seek_partitions(impl_->rk, list.get(), timeout_ms);
  if (error != nullptr) {
    Status s = internal::KafkaStatus(rd_kafka_error_code(error),
                                     fmt::format("kafka consumer: seek to {}", ToString(position)));
    rd_kafka_error_destroy(error);
    return s;
  }
  return internal::KafkaStatus(list->elems[0].err,
                               fmt::format("kafka consumer: seek to {}", ToString(position)));
}

Result<std::vector<TopicPartition>> KafkaConsumer::Assignment() const {
  SURGE_RETURN_IF_ERROR(impl_->Usable());
  rd_kafka_topic_partition_list_t* raw = nullptr;
  SURGE_RETURN_IF_ERROR(internal::KafkaStatus(rd_kafka_assignment(impl_->rk, &raw),
                                              "kafka consumer: reading the assignment"));
  internal::PartitionListPtr list(raw);
  std::vector<TopicPartition> out;
  for (const auto& p : internal::FromList(list.get())) out.push_back({p.topic, p.partition});
  std::sort(out.begin(), out.end());
  return out;
}

Status KafkaConsumer::Close(int timeout_ms) {
  SURGE_RETURN_IF_ERROR(impl_->Usable());
  Status status = impl_->CloseWithin(timeout_ms);
  Status handler = std::move(impl_->handler_error);
  impl_->handler_error = Status::Ok();
  SURGE_RETURN_IF_ERROR(status);
  return handler;
}

void KafkaConsumer::Abandon() {
  if (impl_->rk == nullptr) return;
  rd_kafka_destroy_flags(impl_->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  impl_->rk = nullptr;
}

const std::string& KafkaConsumer::group() const { return impl_->options.group; }

Result<int> KafkaConsumer::PartitionCount(std::string_view topic, int timeout_ms) {
  SURGE_RETURN_IF_ERROR(impl_->Usable());
  return internal::PartitionCount(impl_->rk, topic, timeout_ms, impl_->options.brokers, *impl_);
}

std::string KafkaConsumer::MemberId() const {
  if (impl_->rk == nullptr) return "";
  char* id = rd_kafka_memberid(impl_->rk);
  if (id == nullptr) return "";
  std::string out(id);
  rd_kafka_mem_free(impl_->rk, id);
  return out;
}

}  // namespace surge::stream::kafka
