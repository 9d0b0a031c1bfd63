#include "stream/sim_source.h"

#include <string>
#include <vector>

#include "stream/sim/generator.h"
#include "stream/sim/scenario.h"

namespace surge::stream {
namespace {

class SimGenerator final : public PostGenerator {
 public:
  explicit SimGenerator(std::unique_ptr<sim::Generator> g) : gen_(std::move(g)) {}

  Result<size_t> Next(std::vector<Post>* out, size_t max) override {
    size_t n = 0;
    while (n < max) {
      if (next_ == batch_.size()) {
        if (done_) break;
        batch_.clear();
        next_ = 0;
        done_ = !gen_->NextBatch(&batch_);
        continue;
      }
      out->push_back(std::move(batch_[next_++].post));
      ++n;
    }
    return n;
  }

 private:
  std::unique_ptr<sim::Generator> gen_;
  std::vector<sim::SimPost> batch_;
  size_t next_ = 0;
  bool done_ = false;
};

}  // namespace

Result<std::unique_ptr<PostSource>> OpenSimSource(std::string_view spec) {
  std::string_view rest =
      spec.substr(spec.find(':') == std::string_view::npos ? spec.size() : spec.find(':') + 1);
  sim::Scenario scenario;
  if (rest.empty()) {
    SURGE_ASSIGN_OR_RETURN(scenario, sim::DefaultScenario());
  } else {
    SURGE_ASSIGN_OR_RETURN(scenario, sim::LoadScenario(std::string(rest)));
  }
  std::string name = "sim:" + scenario.name;
  SURGE_ASSIGN_OR_RETURN(auto gen, sim::Generator::Create(scenario));
  return std::unique_ptr<PostSource>(
      std::make_unique<PostGeneratorSource>(std::make_unique<SimGenerator>(std::move(gen)), name));
}

}  // namespace surge::stream
