// `surge kafka-mock`: librdkafka's built-in mock cluster on loopback, for trying the Kafka
// deployment (surge simulate --out kafka://..., surge worker ..., surge trends --source
// kafka://...) on a machine with no Kafka. It speaks the real Kafka protocol but keeps everything
// in memory and ends with the process: a test bed, not a broker. It also keeps only a bounded log
// per partition (a few MB) and deletes the oldest records past it: kafka-mock watches the log
// start offsets of the topics it made and says on stderr when a partition starts dropping them, so
// a consumer short of data can be told why.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "stream/kafka/mock_cluster.h"

namespace surge::cli {
namespace {

std::atomic<bool> g_stop{false};
void OnStop(int) { g_stop.store(true); }

struct KafkaMockArgs {
  int brokers = 1;
  std::vector<std::string> topics;
  double seconds = 0;
};

int RunKafkaMock(const KafkaMockArgs& a) {
  if (a.brokers < 1 || a.brokers > 16) {
    return Fail(InvalidArgumentError("--brokers must be 1..16, got {}", a.brokers));
  }
  auto mc = stream::kafka::MockCluster::Create(a.brokers);
  if (!mc.ok()) return Fail(mc.status());
  struct Watched {
    std::string topic;
    int32_t partition;
    bool full = false;  // its log start has moved past 0 (said once)
  };
  std::vector<Watched> watched;
  for (const std::string& t : a.topics) {
    size_t colon = t.rfind(':');
    std::string name = t.substr(0, colon);
    int partitions = 1;
    if (colon != std::string::npos) {
      char* end = nullptr;
      long n = std::strtol(t.c_str() + colon + 1, &end, 10);
      if (end == t.c_str() + colon + 1 || *end != '\0' || n < 1 || n > 1024) {
        return Fail(InvalidArgumentError(
            "--topic '{}': expected NAME or NAME:PARTITIONS with 1..1024 partitions", t));
      }
      partitions = static_cast<int>(n);
    }
    if (Status st = (*mc)->CreateTopic(name, partitions); !st.ok()) {
      return Fail(st.WithContext(fmt::format("--topic '{}'", t)));
    }
    for (int32_t p = 0; p < partitions; ++p) watched.push_back({name, p});
  }
  struct sigaction sa = {};
  sa.sa_handler = OnStop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::cout << "kafka-mock: bootstrap " << (*mc)->bootstrap() << std::endl;
  auto until = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(static_cast<int64_t>(a.seconds * 1000));
  auto next_check = std::chrono::steady_clock::now();
  while (!g_stop.load() && (a.seconds <= 0 || std::chrono::steady_clock::now() < until)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (std::chrono::steady_clock::now() < next_check) continue;
    next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    for (Watched& w : watched) {
      if (w.full) continue;
      auto marks = (*mc)->Watermarks(w.topic, w.partition, 1000);
      if (!marks.ok() || marks->first <= 0) continue;
      std::cerr << fmt::format(
                       "kafka-mock: note: {}[{}] reached the mock's log bound: its oldest records "
                       "are deleted from now on, as retention would (log now {}..{}); a consumer "
                       "that falls a few MB behind misses records. Pace the producer (surge "
                       "simulate --speed) or use more partitions.",
                       w.topic, w.partition, marks->first, marks->second)
                << std::endl;
      w.full = true;
    }
  }
  return 0;
}

std::function<int()> SetupKafkaMock(CLI::App& sub) {
  auto a = std::make_shared<KafkaMockArgs>();
  sub.add_option("--brokers", a->brokers, "mock brokers")->capture_default_str();
  sub.add_option("--topic", a->topics, "NAME[:PARTITIONS] to create (repeatable)");
  sub.add_option("--seconds", a->seconds, "stop after this long (default: until Ctrl-C)");
  return [a] { return RunKafkaMock(*a); };
}

}  // namespace

SURGE_REGISTER_COMMAND(kafka_mock, "kafka-mock",
                       "librdkafka's in-memory mock Kafka cluster on loopback, to try the Kafka "
                       "deployment without a broker; prints its bootstrap address",
                       SetupKafkaMock);

}  // namespace surge::cli
