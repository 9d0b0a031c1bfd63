// `surge calibrate MODEL --texts POSTS.txt --vocab VOCAB -o model.calib`: runs the FP32 model on
// unlabelled posts (or tensors from --inputs) and writes the calibration cache that
// `surge build --precision int8 --calibration model.calib` reads: histograms of every quantised
// layer's input and a held-out slice for the accuracy guard. Prints, per tensor, the threshold
// each calibrator would choose, which is where INT8 accuracy problems show first.
#include "engine/quant/calibrate.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "cli/text_inputs.h"
#include "engine/builder/builder.h"
#include "engine/quant/calibrator.h"

namespace surge::cli {
namespace {

using nlohmann::json;
namespace quant = engine::quant;

struct CalibrateArgs {
  std::string model;
  std::string output;
  std::string texts;
  std::string inputs;
  TextInputOptions text;
  size_t max_texts = 0;
  double holdout = 0.2;
  int threads = 0;
  bool json = false;
};

// Splits `items` so that held-out ones are spread evenly (item i is held out when
// floor((i+1)·f) > floor(i·f)).
template <typename T>
void Split(std::vector<T> items, double f, std::vector<T>* keep, std::vector<T>* held) {
  for (size_t i = 0; i < items.size(); ++i) {
    const bool out = static_cast<int64_t>((i + 1) * f) > static_cast<int64_t>(i * f);
    (out ? held : keep)->push_back(std::move(items[i]));
  }
}

Result<std::vector<engine::TensorMap>> TensorBatches(const std::string& path) {
  SURGE_ASSIGN_OR_RETURN(json j, ReadJson(path));
  if (j.is_object()) j = json::array({j});
  if (!j.is_array()) return InvalidArgumentError("'{}' must hold inputs or a list of them", path);
  std::vector<engine::TensorMap> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& item = j[i];
    const json& in = item.is_object() && item.contains("inputs") ? item["inputs"] : item;
    auto t = TensorsFromJson(in, nullptr);
    if (!t.ok()) return t.status().WithContext(fmt::format("'{}' item {}", path, i));
    out.push_back(std::move(t).value());
  }
  return out;
}

int RunCalibrate(const CalibrateArgs& a) {
  if (a.texts.empty() == a.inputs.empty()) {
    return Fail(InvalidArgumentError("give exactly one of --texts FILE and --inputs FILE.json"));
  }
  if (!(a.holdout >= 0 && a.holdout < 1)) {
    return Fail(InvalidArgumentError("--holdout {} must lie in [0, 1)", a.holdout));
  }
  auto graph = engine::builder::ImportAndOptimize(a.model, {}, nullptr);
  if (!graph.ok()) return Fail(graph.status());
  std::vector<engine::TensorMap> calib, held;
  if (!a.texts.empty()) {
    auto tok = LoadTokenizer(a.text);
    if (!tok.ok()) return Fail(tok.status());
    auto lines = ReadTextLines(a.texts, a.max_texts);
    if (!lines.ok()) return Fail(lines.status());
    std::vector<std::string> keep, out;
    Split(std::move(lines).value(), a.holdout, &keep, &out);
    if (keep.empty()) return Fail(InvalidArgumentError("no text is left for calibration"));
    if (a.holdout > 0 && out.empty()) {
      return Fail(InvalidArgumentError(
          "{} text(s) are too few for a held-out slice of {:.0f}%: give more texts or --holdout 0 "
          "(then build with --no-guard)",
          keep.size(), 100 * a.holdout));
    }
    auto c = TextBatches(*graph, keep, **tok, a.text);
    if (!c.ok()) return Fail(c.status().WithContext("'" + a.texts + "'"));
    auto h = TextBatches(*graph, out, **tok, a.text);
    if (!h.ok()) return Fail(h.status().WithContext("'" + a.texts + "'"));
    calib = std::move(c).value();
    held = std::move(h).value();
  } else {
    auto batches = TensorBatches(a.inputs);
    if (!batches.ok()) return Fail(batches.status());
    if (batches->empty()) {
      return Fail(InvalidArgumentError("'{}' holds no input batch", a.inputs));
    }
    Split(std::move(batches).value(), a.holdout, &calib, &held);
    if (a.holdout > 0 && held.empty()) {
      return Fail(InvalidArgumentError(
          "{} batch(es) are too few for a held-out slice of {:.0f}%: give more or --holdout 0",
          calib.size(), 100 * a.holdout));
    }
  }
  quant::CalibrateOptions co;
  co.num_threads = a.threads;
  auto cache = quant::Calibrate(*graph, calib, std::move(held), a.model, co);
  if (!cache.ok()) return Fail(cache.status());
  Status st = quant::WriteCache(*cache, a.output);
  if (!st.ok()) return Fail(st);

  const quant::CalibratorOptions kinds[] = {*quant::ParseCalibrator("minmax"),
                                            *quant::ParseCalibrator("percentile", 99.99),
                                            *quant::ParseCalibrator("entropy")};
  json tensors = json::array();
  for (const auto& [name, s] : cache->tensors) {
    json t = {{"name", name}, {"values", s.hist.total()}, {"min", s.min}, {"max", s.max}};
    for (const auto& k : kinds) {
      auto th = quant::Threshold(s.hist, k);
      t[quant::CalibratorName(k)] = th.ok() ? json(*th) : json(th.status().message());
    }
    tensors.push_back(std::move(t));
  }
  if (a.json) {
    std::cout << json({{"cache", a.output},
                       {"model_hash", cache->model_hash},
                       {"batches", cache->batches},
                       {"sequences", cache->sequences},
                       {"tokens", cache->tokens},
                       {"holdout_batches", cache->holdout.size()},
                       {"tensors", tensors}})
                     .dump(1)
              << '\n';
    return 0;
  }
  std::cout << fmt::format(
      "wrote {}: {} tensors from {} batches ({} sequences, {} tokens); {} held-out batch(es) for "
      "the accuracy guard\n",
      a.output, cache->tensors.size(), cache->batches, cache->sequences, cache->tokens,
      cache->holdout.size());
  std::cout << fmt::format("{:<64} {:>10} {:>10} {:>12} {:>10}\n", "tensor (|x| thresholds)",
                           "minmax", "min..max", "pct 99.99", "entropy");
  for (const auto& t : tensors) {
    auto num = [](const json& v) {
      return v.is_number() ? fmt::format("{:.4g}", v.get<double>()) : std::string("-");
    };
    std::cout << fmt::format(
        "{:<64} {:>10} {:>10} {:>12} {:>10}\n", t["name"].get<std::string>(), num(t["minmax"]),
        fmt::format("{:.3g}..{:.3g}", t["min"].get<double>(), t["max"].get<double>()),
        num(t["percentile 99.99"]), num(t["entropy"]));
  }
  return 0;
}

std::function<int()> SetupCalibrate(CLI::App& sub) {
  auto a = std::make_shared<CalibrateArgs>();
  sub.add_option("model", a->model, "ONNX file or Hugging Face folder")->required();
  sub.add_option("-o,--output", a->output, "calibration cache to write")->required();
  sub.add_option("--texts", a->texts, "unlabelled posts, one per line");
  AddTextInputOptions(sub, &a->text);
  sub.add_option("--max-texts", a->max_texts, "use at most this many lines (0: all)");
  sub.add_option(
      "--inputs", a->inputs,
      "tensors instead of texts: JSON list of {\"name\": {\"shape\", \"data\"}} batches");
  sub.add_option("--holdout", a->holdout,
                 "fraction held out for the accuracy guard (spread evenly)")
      ->capture_default_str();
  sub.add_option("--threads", a->threads, "threads (0: all cores)");
  sub.add_flag("--json", a->json, "print JSON");
  return [a] { return RunCalibrate(*a); };
}

SURGE_REGISTER_COMMAND(calibrate, "calibrate",
                       "Measure activation ranges on unlabelled texts for INT8/FP8 builds",
                       SetupCalibrate);

}  // namespace
}  // namespace surge::cli
