// libFuzzer target for the simulator's and evaluator's input parsers. The first byte picks what the
// rest of the input feeds:
//   0: ParseScenario (YAML/JSON on top of the default scenario);
//   1: ParseTruth (truth.json);
//   2: ReadTrends with skip_bad (JSONL trend updates), then Evaluate against a fixed truth.
// Every call must return a Status (never throw, crash or hang); accepted values must be sane.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "stream/eval/eval.h"
#include "stream/eval/truth.h"
#include "stream/sim/scenario.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

const surge::stream::eval::Truth& FixedTruth() {
  static const surge::stream::eval::Truth t = [] {
    surge::stream::eval::Truth x;
    x.bucket_ms = 60000;
    x.events.push_back({"e1", "AI推理革命", {"芯片", "发布会"}, "科技", {}, 60000, 120000, 600000});
    x.spam.push_back({"s1", "奶茶0元领取", {"私信"}, "美食", 0, 300000});
    return x;
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto s = surge::stream::sim::ParseScenario(in, "fuzz.yaml");
      if (s.ok()) {
        Check(s->duration_ms >= 1000 && s->bucket_ms >= 1000 && !s->categories.empty());
        for (const auto& e : s->events) Check(e.onset_ms < s->duration_ms && e.rise_ms >= 1000);
      }
      break;
    }
    case 1: {
      auto t = surge::stream::eval::ParseTruth(in, "fuzz.json");
      if (t.ok()) Check(t->bucket_ms > 0);
      break;
    }
    default: {
      std::istringstream stream{std::string(in)};
      surge::stream::eval::TrendsReadOptions o;
      o.skip_bad = true;
      auto f = surge::stream::eval::ReadTrends(stream, "fuzz.jsonl", o);
      Check(f.ok());
      auto r = surge::stream::eval::Evaluate(FixedTruth(), f->lists);
      Check(r.ok() && r->precision_at_k >= 0 && r->precision_at_k <= 1);
      break;
    }
  }
  return 0;
}
