#include "stream/kafka/producer.h"

#include <atomic>
#include <chrono>

#include "core/logging.h"
#include "stream/kafka/client.h"

namespace surge::stream::kafka {

struct KafkaProducer::Impl : internal::ClientState {
  ProducerOptions options;
  rd_kafka_t* rk = nullptr;
  int64_t message_max_bytes = 0;
  std::atomic<int64_t> produced{0};
  std::atomic<int64_t> delivered{0};
  std::atomic<int64_t> failed{0};
  // Failures since the last Flush (touched only on the polling thread).
  int64_t failed_since_flush = 0;
  Status first_failure;

  ~Impl() override {
    if (rk == nullptr) return;
    rd_kafka_flush(rk, options.close_timeout_ms);
    int left = rd_kafka_outq_len(rk);
    if (left > 0) {
      SURGE_LOG_ERROR(
          "kafka producer {}: {} record(s) still undelivered after {} ms at shutdown are lost "
          "(last client error: {})",
          options.brokers, left, options.close_timeout_ms, LastError());
    }
    rd_kafka_destroy(rk);
  }

  void OnDelivery(const rd_kafka_message_t* m) {
    DeliveryReport r;
    r.topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
    r.partition = m->partition;
    r.tag = reinterpret_cast<uintptr_t>(m->_private);
    if (m->key != nullptr) r.key.assign(static_cast<const char*>(m->key), m->key_len);
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      r.offset = m->offset;
      delivered.fetch_add(1, std::memory_order_relaxed);
    } else {
      std::string why = LastError();
      r.status = internal::KafkaStatus(
          m->err,
          fmt::format("delivery of a record (key '{}') to topic '{}' partition {} via {}{}{}",
                      r.key, r.topic, r.partition, options.brokers,
                      why.empty() ? "" : "; last client error: ", why));
      failed.fetch_add(1, std::memory_order_relaxed);
      if (failed_since_flush++ == 0) first_failure = r.status;
    }
    if (options.on_delivery) options.on_delivery(r);
  }

  static void DeliveryCallback(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    static_cast<Impl*>(static_cast<internal::ClientState*>(opaque))->OnDelivery(m);
  }
};

ProducerOptions ProducerOptions::FromUri(const KafkaUri& uri) {
  ProducerOptions o;
  o.brokers = uri.brokers;
  o.properties = uri.properties;
  return o;
}

KafkaProducer::KafkaProducer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KafkaProducer::~KafkaProducer() = default;

Result<std::unique_ptr<KafkaProducer>> KafkaProducer::Create(ProducerOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const ProducerOptions& o = impl->options;
  const Properties defaults = {
      {"client.id", o.client_id},
      // Java-compatible key → partition mapping; keyless records spread at random.
      {"partitioner", "murmur2_random"},
      {"linger.ms", "5"},
  };
  static constexpr std::string_view kIdempotent =
      "the producer is idempotent so that broker retries never duplicate or reorder a record";
  const std::vector<internal::Pinned> pinned = {
      {"enable.idempotence", "true", "true", kIdempotent},
      {"acks", "all", "all,-1", kIdempotent},
  };
  SURGE_ASSIGN_OR_RETURN(
      internal::ConfPtr conf,
      internal::BuildConf("producer", o.brokers, defaults, o.properties, pinned, impl.get()));
  rd_kafka_conf_set_dr_msg_cb(conf.get(), &Impl::DeliveryCallback);
  char buf[64];
  size_t len = sizeof(buf);
  if (rd_kafka_conf_get(conf.get(), "message.max.bytes", buf, &len) == RD_KAFKA_CONF_OK) {
    impl->message_max_bytes = std::atoll(buf);
  }
  char err[512];
  impl->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof(err));
  if (impl->rk == nullptr) {
    return InvalidArgumentError("kafka producer for {}: {}", o.brokers, err);
  }
  conf.release();  // owned by rk now
  return std::unique_ptr<KafkaProducer>(new KafkaProducer(std::move(impl)));
}

Status KafkaProducer::Produce(std::string_view topic, std::string_view key,
                              std::string_view value) {
  ProducerRecord r;
  r.topic = topic;
  r.key = key;
  r.value = value;
  return Produce(r);
}

Status KafkaProducer::Produce(const ProducerRecord& record) {
  Impl& m = *impl_;
  std::string topic(record.topic);
  std::vector<rd_kafka_vu_t> vus;
  vus.reserve(8);
  auto add = [&vus](rd_kafka_vtype_t t) -> rd_kafka_vu_t& {
    vus.emplace_back();
    vus.back().vtype = t;
    return vus.back();
  };
  add(RD_KAFKA_VTYPE_TOPIC).u.cstr = topic.c_str();
  add(RD_KAFKA_VTYPE_MSGFLAGS).u.i = RD_KAFKA_MSG_F_COPY;
  if (record.partition != kAnyPartition) add(RD_KAFKA_VTYPE_PARTITION).u.i32 = record.partition;
  auto& value = add(RD_KAFKA_VTYPE_VALUE).u.mem;
  value.ptr = const_cast<char*>(record.value.data());
  value.size = record.value.size();
  if (!record.key.empty()) {
    auto& key = add(RD_KAFKA_VTYPE_KEY).u.mem;
    key.ptr = const_cast<char*>(record.key.data());
    key.size = record.key.size();
  }
  add(RD_KAFKA_VTYPE_OPAQUE).u.ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(record.tag));
  for (const Header& h : record.headers) {
    auto& hv = add(RD_KAFKA_VTYPE_HEADER).u.header;
    hv.name = h.key.c_str();
    hv.val = h.value.data();
    hv.size = static_cast<ssize_t>(h.value.size());
  }
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(m.options.queue_full_timeout_ms);
  while (true) {
    rd_kafka_error_t* error = rd_kafka_produceva(m.rk, vus.data(), vus.size());
    if (error == nullptr) break;
    rd_kafka_resp_err_t code = rd_kafka_error_code(error);
    rd_kafka_error_destroy(error);
    if (code == RD_KAFKA_RESP_ERR__QUEUE_FULL && std::chrono::steady_clock::now() < deadline) {
      rd_kafka_poll(m.rk, 50);  // serve delivery reports so the queue drains
      continue;
    }
    size_t bytes = record.value.size() + record.key.size();
    switch (code) {
      case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
        return InvalidArgumentError(
            "kafka producer: record of {} bytes (key {} + value {}) for topic '{}' exceeds "
            "message.max.bytes={}; send smaller records or raise message.max.bytes (and the "
            "topic's max.message.bytes)",
            bytes, record.key.size(), record.value.size(), topic, m.message_max_bytes);
      case RD_KAFKA_RESP_ERR__QUEUE_FULL:
        return ResourceExhaustedError(
            "kafka producer: local queue for {} still full after {} ms ({} records outstanding); "
            "brokers are not keeping up or are unreachable (last client error: {})",
            m.options.brokers, m.options.queue_full_timeout_ms, rd_kafka_outq_len(m.rk),
            m.LastError());
      case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
      case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
        return NotFoundError(
            "kafka producer: topic '{}' does not exist on brokers {}; create it "
            "or name an existing topic",
            topic, m.options.brokers);
      case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
        return NotFoundError("kafka producer: topic '{}' has no partition {} on brokers {}", topic,
                             record.partition, m.options.brokers);
      default:
        return internal::KafkaStatus(code,
                                     fmt::format("kafka producer: producing to topic '{}'", topic));
    }
  }
  m.produced.fetch_add(1, std::memory_order_relaxed);
  rd_kafka_poll(m.rk, 0);
  return Status::Ok();
}

int KafkaProducer::Poll(int timeout_ms) { return rd_kafka_poll(impl_->rk, timeout_ms); }

Status KafkaProducer::Flush(int timeout_ms) {
  Impl& m = *impl_;
  rd_kafka_resp_err_t err = rd_kafka_flush(m.rk, timeout_ms);
  if (err == RD_KAFKA_RESP_ERR__TIMED_OUT) {
    std::string why = m.LastError();
    return MakeStatus(StatusCode::kDeadlineExceeded,
                      "kafka producer: {} record(s) to {} still unacknowledged after {} ms{}{}",
                      rd_kafka_outq_len(m.rk), m.options.brokers, timeout_ms,
                      why.empty() ? "" : "; last client error: ", why);
  }
  if (m.failed_since_flush > 0) {
    Status s(m.first_failure.code(),
             fmt::format("{} record(s) failed delivery since the last flush; first: {}",
                         m.failed_since_flush, m.first_failure.message()));
    m.failed_since_flush = 0;
    m.first_failure = Status::Ok();
    return s;
  }
  return Status::Ok();
}

Result<int> KafkaProducer::PartitionCount(std::string_view topic, int timeout_ms) {
  return internal::PartitionCount(impl_->rk, topic, timeout_ms, impl_->options.brokers, *impl_);
}

int64_t KafkaProducer::Outstanding() const { return rd_kafka_outq_len(impl_->rk); }

KafkaProducer::Counters KafkaProducer::counters() const {
  return {impl_->produced.load(), impl_->delivered.load(), impl_->failed.load()};
}

const std::string& KafkaProducer::brokers() const { return impl_->options.brokers; }

}  // namespace surge::stream::kafka
