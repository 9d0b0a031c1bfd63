// Helpers for the tests that run against librdkafka's mock cluster on loopback. Waits are bounded
// by generous deadlines (the CI machine is small and shared); no test asserts on timing.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stream/kafka/consumer.h"
#include "stream/kafka/mock_cluster.h"
#include "stream/kafka/producer.h"
#include "stream/post.h"

namespace surge::stream::kafka::testing {

// Upper bound for any wait in these tests; a healthy run takes a small fraction of it.
inline constexpr int kPatienceMs = 60000;

// Client properties that keep group rebalances and fetches brisk on the mock cluster.
inline Properties FastConsumerProps() {
  return {{"session.timeout.ms", "6000"},
          {"heartbeat.interval.ms", "300"},
          {"fetch.wait.max.ms", "50"},
          {"topic.metadata.refresh.interval.ms", "1000"},
          {"reconnect.backoff.max.ms", "500"}};
}

inline Properties FastProducerProps() {
  return {{"linger.ms", "1"}, {"reconnect.backoff.max.ms", "500"}};
}

inline std::unique_ptr<MockCluster> StartCluster(int brokers) {
  auto mc = MockCluster::Create(brokers);
  EXPECT_TRUE(mc.ok()) << mc.status().ToString();
  return mc.ok() ? std::move(mc).value() : nullptr;
}

inline std::unique_ptr<KafkaProducer> MakeProducer(const MockCluster& mc, Properties extra = {}) {
  ProducerOptions o;
  o.brokers = mc.bootstrap();
  o.properties = FastProducerProps();
  for (auto& p : extra) o.properties.push_back(std::move(p));
  auto p = KafkaProducer::Create(std::move(o));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : nullptr;
}

inline std::unique_ptr<KafkaConsumer> MakeConsumer(const MockCluster& mc, const std::string& group,
                                                   RebalanceHandler on_rebalance = nullptr,
                                                   std::string client_id = "surge") {
  ConsumerOptions o;
  o.brokers = mc.bootstrap();
  o.group = group;
  o.properties = FastConsumerProps();
  o.client_id = std::move(client_id);
  o.on_rebalance = std::move(on_rebalance);
  auto c = KafkaConsumer::Create(std::move(o));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

// Polls until `done()` or the deadline; every record goes to `sink`. Returns done().
inline bool PollUntil(KafkaConsumer& c, const std::function<void(Message&)>& sink,
                      const std::function<bool()>& done, int timeout_ms = kPatienceMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    auto batch = c.Poll(256, 100);
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok()) return false;
    for (auto& m : *batch) sink(m);
  }
  return done();
}

// Waits for a condition that other clients' progress (polled by `step`) makes true.
inline bool WaitFor(const std::function<bool()>& cond, const std::function<void()>& step,
                    int timeout_ms = kPatienceMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!cond() && std::chrono::steady_clock::now() < deadline) step();
  return cond();
}

// A valid post with id "p<i>" (text and author vary with i).
inline Post TestPost(int i) {
  Post p;
  p.id = fmt::format("p{}", i);
  p.ts_ms = 1764669600000 + int64_t{i} * 1000;
  p.user.id = fmt::format("u{}", i % 17);
  p.user.followers = i * 3;
  p.text = fmt::format("第{}条 AI推理革命 #test", i);
  p.likes = i % 5;
  return p;
}

}  // namespace surge::stream::kafka::testing
