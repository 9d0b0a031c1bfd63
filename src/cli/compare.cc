// `surge compare PLAN --reference REF.json` checks a plan against stored reference outputs (the
// fixture format: a list of {"inputs": {..}, "outputs": {..}}); `surge compare PLAN --against
// OTHER_PLAN [--inputs FILE]` checks two plans against each other. Per output: max abs error, max
// rel error, cosine similarity, top-1 agreement. Exits non-zero when an element is outside
// atol + rtol*|expected| or a top-1 differs.
//
// Quantised plans: `surge compare model.int8.plan --against model.fp32.plan --texts posts.txt
// --vocab vocab.txt --min-cosine 0.999 --max-top1-drop 0.5%` tokenises the posts, reports the
// agreement the accuracy guard measures (row-wise cosine and top-1 on real tokens, see
// engine/quant/agreement.h) and passes or fails on that budget instead of the element tolerance.
#include <cmath>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/engine_io.h"
#include "cli/text_inputs.h"
#include "engine/quant/agreement.h"
#include "engine/runtime/engine.h"

namespace surge::cli {
namespace {

using nlohmann::json;

struct CompareArgs {
  std::string plan;
  std::string reference;
  std::string against;
  std::string inputs;
  double atol = 1e-5;
  double rtol = 1e-4;
  bool json = false;
  std::string texts;
  TextInputOptions text;
  double min_cosine = -2;          // unset
  std::string max_top1_drop_text;  // "0.5%" or "0.005"
  double max_top1_drop = -1;       // unset
  std::string top1_outputs;
};

// "fp8 (27 of 49 quantisable layers fp8, 19 int8, 3 fp16)" for a plan's header line: the
// build's precision first, then the others the accuracy guard moved layers to.
std::string PrecisionSummary(const engine::Engine& e) {
  const auto& b = e.plan_config().builder;
  std::string s(engine::PrecisionName(b.precision));
  if (!b.quant.layers.empty()) {
    std::map<engine::Precision, int> at;
    for (const auto& [name, l] : b.quant.layers) ++at[l.precision];
    s += fmt::format(" ({} of {} quantisable layers {}", at[b.precision], b.quant.layers.size(),
                     engine::PrecisionName(b.precision));
    for (const auto& [p, n] : at) {
      if (p != b.precision && n > 0) s += fmt::format(", {} {}", n, engine::PrecisionName(p));
    }
    s += ")";
  }
  return s;
}

struct Stats {
  int cases = 0;
  int64_t elements = 0;
  int64_t out_of_tolerance = 0;
  double max_abs = 0;
  double max_rel = 0;
  double dot = 0, norm_a = 0, norm_b = 0;
  int64_t rows = 0;
  int64_t top1_agree = 0;
  std::string shape_error;
};

struct Case {
  engine::TensorMap inputs;
  engine::TensorMap expected;  // empty when comparing against another plan
};

void Accumulate(const Tensor& actual_in, const Tensor& expected_in, double atol, double rtol,
                Stats* s) {
  ++s->cases;
  if (actual_in.shape() != expected_in.shape()) {
    s->shape_error = fmt::format("shape {} but expected {}", ShapeToString(actual_in.shape()),
                                 ShapeToString(expected_in.shape()));
    return;
  }
  Tensor a = actual_in.ToFloat32();
  Tensor b = expected_in.ToFloat32();
  auto av = a.span<float>();
  auto bv = b.span<float>();
  for (size_t i = 0; i < av.size(); ++i) {
    const double x = av[i], y = bv[i];
    const double err = std::abs(x - y);
    if (!(err <= atol + rtol * std::abs(y))) ++s->out_of_tolerance;  // NaN counts as out
    s->max_abs = std::max(s->max_abs, std::isnan(err) ? INFINITY : err);
    s->max_rel = std::max(s->max_rel, err / std::max(std::abs(y), 1e-6));
    s->dot += x * y;
    s->norm_a += x * x;
    s->norm_b += y * y;
  }
  s->elements += static_cast<int64_t>(av.size());
  const int64_t cols = a.rank() ? a.shape().back() : 1;
  if (cols > 1) {
    for (int64_t r = 0; r < static_cast<int64_t>(av.size()) / cols; ++r) {
      auto row_a = av.subspan(r * cols, cols);
      auto row_b = bv.subspan(r * cols, cols);
      s->top1_agree += std::max_element(row_a.begin(), row_a.end()) - row_a.begin() ==
                       std::max_element(row_b.begin(), row_b.end()) - row_b.begin();
      ++s->rows;
    }
  }
}

Result<std::vector<Case>> ReferenceCases(const std::string& path, const engine::Engine& engine) {
  SURGE_ASSIGN_OR_RETURN(json j, ReadJson(path));
  if (j.is_object()) j = json::array({j});
  if (!j.is_array() || j.empty()) {
    return InvalidArgumentError("'{}' must be a list of {{\"inputs\": .., \"outputs\": ..}}", path);
  }
  std::vector<Case> cases;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& c = j[i];
    if (!c.is_object() || !c.contains("inputs") || !c.contains("outputs")) {
      return InvalidArgumentError("'{}' case {} has no \"inputs\" and \"outputs\"", path, i);
    }
    Case k;
    auto in = TensorsFromJson(c["inputs"], &engine);
    if (!in.ok()) return in.status().WithContext(fmt::format("'{}' case {}", path, i));
    auto out = TensorsFromJson(c["outputs"], nullptr);
    if (!out.ok()) return out.status().WithContext(fmt::format("'{}' case {} outputs", path, i));
    k.inputs = std::move(in).value();
    k.expected = std::move(out).value();
    cases.push_back(std::move(k));
  }
  return cases;
}

Result<std::vector<Case>> InputCases(const CompareArgs& a, const engine::Engine& engine) {
  std::vector<Case> cases;
  if (!a.texts.empty()) {
    SURGE_ASSIGN_OR_RETURN(auto tok, LoadTokenizer(a.text));
    SURGE_ASSIGN_OR_RETURN(auto lines, ReadTextLines(a.texts));
    auto batches = TextBatches(engine.graph(), lines, *tok, a.text);
    if (!batches.ok()) return batches.status().WithContext("'" + a.texts + "'");
    for (auto& b : *batches) cases.push_back({std::move(b), {}});
    return cases;
  }
  if (!a.inputs.empty()) {
    SURGE_ASSIGN_OR_RETURN(json j, ReadJson(a.inputs));
    if (j.is_object()) j = json::array({j});
    if (!j.is_array()) return InvalidArgumentError("'{}' must hold inputs or a list", a.inputs);
    for (const auto& item : j) {
      const json& in = item.is_object() && item.contains("inputs") ? item["inputs"] : item;
      SURGE_ASSIGN_OR_RETURN(auto tensors, TensorsFromJson(in, &engine));
      cases.push_back({std::move(tensors), {}});
    }
    return cases;
  }
  // Synthetic inputs at a few small shapes inside the profile, with padding.
  const std::pair<int64_t, int64_t> shapes[] = {{1, 7}, {2, 16}, {4, 32}};
  uint64_t seed = 1;
  for (auto [batch, seq] : shapes) {
    SyntheticOptions so{batch, seq, true, seed++};
    SURGE_ASSIGN_OR_RETURN(auto resolved, ResolveShapes(engine, so, {}));
    SURGE_ASSIGN_OR_RETURN(auto tensors, SyntheticInputs(engine, resolved, so));
    if (!engine.PrepareInputs(tensors, nullptr).ok()) continue;  // outside this plan's profile
    cases.push_back({std::move(tensors), {}});
  }
  if (cases.empty()) {
    return InvalidArgumentError("no synthetic shape fits the plan's profile; pass --inputs");
  }
  return cases;
}

int RunCompare(CompareArgs a) {
  if (!a.max_top1_drop_text.empty()) {
    auto f = ParseFraction(a.max_top1_drop_text, "--max-top1-drop");
    if (!f.ok()) return Fail(f.status());
    a.max_top1_drop = *f;
  }
  if (a.reference.empty() == a.against.empty()) {
    return Fail(InvalidArgumentError("give exactly one of --reference REF.json or --against PLAN"));
  }
  if (!(a.atol >= 0) || !(a.rtol >= 0)) {
    return Fail(InvalidArgumentError("--atol and --rtol must be >= 0"));
  }
  if (!a.texts.empty() && (a.against.empty() || !a.inputs.empty())) {
    return Fail(InvalidArgumentError("--texts gives the inputs for --against PLAN (not --inputs)"));
  }
  const bool budget = a.min_cosine != -2 || a.max_top1_drop != -1;
  if (budget && !(a.min_cosine == -2 || (a.min_cosine >= -1 && a.min_cosine <= 1))) {
    return Fail(InvalidArgumentError("--min-cosine {} must lie in [-1, 1]", a.min_cosine));
  }
  if (budget && !(a.max_top1_drop == -1 || (a.max_top1_drop >= 0 && a.max_top1_drop <= 1))) {
    return Fail(
        InvalidArgumentError("--max-top1-drop {} must be a fraction in [0, 1]", a.max_top1_drop));
  }
  engine::quant::AgreementMeter meter(SplitCommaList(a.top1_outputs));
  std::string agreement_error;
  auto engine = engine::Engine::Load(a.plan);
  if (!engine.ok()) return Fail(engine.status());
  std::shared_ptr<const engine::Engine> other;
  if (!a.against.empty()) {
    auto o = engine::Engine::Load(a.against);
    if (!o.ok()) return Fail(o.status());
    other = *o;
  }
  auto cases = other ? InputCases(a, **engine) : ReferenceCases(a.reference, **engine);
  if (!cases.ok()) return Fail(cases.status());

  auto ctx = (*engine)->CreateContext();
  if (!ctx.ok()) return Fail(ctx.status());
  std::unique_ptr<engine::ExecutionContext> other_ctx;
  if (other) {
    auto c = other->CreateContext();
    if (!c.ok()) return Fail(c.status());
    other_ctx = std::move(c).value();
  }
  std::map<std::string, Stats> stats;
  for (size_t i = 0; i < cases->size(); ++i) {
    Case& c = (*cases)[i];
    auto out = (*ctx)->Run(c.inputs);
    if (!out.ok()) return Fail(out.status().WithContext(fmt::format("case {}", i)));
    if (other_ctx) {
      auto ref = other_ctx->Run(c.inputs);
      if (!ref.ok())
        return Fail(ref.status().WithContext(fmt::format("case {} on {}", i, a.against)));
      for (auto& [name, t] : *ref) c.expected[name] = t.Clone();
    }
    for (const auto& [name, expected] : c.expected) {
      auto it = out->find(name);
      if (it == out->end()) {
        return Fail(InvalidArgumentError("the plan has no output '{}' to compare", name));
      }
      Accumulate(it->second, expected, a.atol, a.rtol, &stats[name]);
    }
    // Shape mismatches are reported per output below; the agreement needs matching shapes.
    Status ms = meter.Add(c.inputs, c.expected, *out);
    if (!ms.ok() && agreement_error.empty()) {
      agreement_error = fmt::format("case {}: {}", i, ms.message());
    }
  }

  bool pass = true;
  const engine::quant::Agreement& agreement = meter.result();
  const double top1_drop = 1 - agreement.top1_agreement();
  const bool budget_ok = (a.min_cosine == -2 || agreement.cosine() >= a.min_cosine) &&
                         (a.max_top1_drop == -1 || top1_drop <= a.max_top1_drop + 1e-12);
  json report = json::object();
  for (const auto& [name, s] : stats) {
    const double cosine = s.norm_a > 0 && s.norm_b > 0
                              ? s.dot / std::sqrt(s.norm_a) / std::sqrt(s.norm_b)
                              : (s.norm_a == s.norm_b ? 1.0 : 0.0);
    const bool ok =
        s.shape_error.empty() && (budget || (s.out_of_tolerance == 0 && s.top1_agree == s.rows));
    pass = pass && ok;
    report[name] = {{"cases", s.cases},
                    {"elements", s.elements},
                    {"max_abs_err", s.max_abs},
                    {"max_rel_err", s.max_rel},
                    {"cosine", cosine},
                    {"out_of_tolerance", s.out_of_tolerance},
                    {"top1_agree", s.top1_agree},
                    {"top1_rows", s.rows},
                    {"pass", ok}};
    if (!s.shape_error.empty()) report[name]["shape_error"] = s.shape_error;
  }
  if (budget) pass = pass && budget_ok && agreement_error.empty();
  json agree = {{"cosine", agreement.cosine()},
                {"cosine_stderr", agreement.cosine_stderr()},
                {"top1_agreement", agreement.top1_agreement()},
                {"top1_rows", agreement.top1_rows()},
                {"top1_drop", top1_drop}};
  json per_output = json::object();
  for (const auto& o : agreement.outputs) {
    per_output[o.name] = {{"rows", o.rows},
                          {"mean_cosine", o.mean_cosine()},
                          {"min_cosine", o.cosine_min},
                          {"mean_cosine_stderr", o.mean_cosine_stderr()},
                          {"top1", o.top1},
                          {"top1_agreement", o.top1_agreement()}};
  }
  agree["outputs"] = per_output;
  if (!agreement_error.empty()) agree["error"] = agreement_error;
  if (a.json) {
    json j = {{"outputs", report},  {"atol", a.atol},
              {"rtol", a.rtol},     {"pass", pass},
              {"agreement", agree}, {"plan_precision", PrecisionSummary(**engine)}};
    if (other) j["against_precision"] = PrecisionSummary(*other);
    if (budget) {
      j["budget"] = {
          {"min_cosine", a.min_cosine}, {"max_top1_drop", a.max_top1_drop}, {"pass", budget_ok}};
    }
    std::cout << j.dump(1) << '\n';
  } else {
    std::cout << "plan: " << PrecisionSummary(**engine);
    if (other) std::cout << "; against: " << PrecisionSummary(*other);
    std::cout << '\n';
    std::cout << fmt::format("{} case(s), tolerance |a-b| <= {} + {}*|b|\n", cases->size(), a.atol,
                             a.rtol);
    for (const auto& [name, r] : report.items()) {
      std::cout << fmt::format(
          "{:<20} max_abs {:.3e}  max_rel {:.3e}  cosine {:.8f}  top1 {}/{}  {}{}\n", name,
          r["max_abs_err"].get<double>(), r["max_rel_err"].get<double>(), r["cosine"].get<double>(),
          r["top1_agree"].get<int64_t>(), r["top1_rows"].get<int64_t>(),
          r["pass"].get<bool>() ? "PASS" : "FAIL",
          r.contains("shape_error") ? " (" + r["shape_error"].get<std::string>() + ")" : "");
    }
  }
  if (!a.json) {
    if (!agreement_error.empty())
      std::cout << "agreement: not measured (" << agreement_error << ")\n";
    std::cout << "agreement (row-wise, padding excluded): " << agreement.Summary()
              << fmt::format(", top-1 drop {:.2f}%", 100 * top1_drop);
    if (agreement.min_rows() >= 2) {
      std::cout << fmt::format(" (cosine standard error {:.2g} over {} rows)",
                               agreement.cosine_stderr(), agreement.min_rows());
    }
    if (budget) {
      std::cout << (budget_ok ? "  within budget" : "  OUTSIDE budget") << " (";
      if (a.min_cosine != -2) std::cout << "cosine >= " << a.min_cosine;
      if (a.min_cosine != -2 && a.max_top1_drop != -1) std::cout << ", ";
      if (a.max_top1_drop != -1) {
        std::cout << fmt::format("top-1 drop <= {:.2f}%", 100 * a.max_top1_drop);
      }
      std::cout << ")";
    }
    std::cout << '\n';
  }
  if (!pass) {
    std::cerr << (budget ? "compare: agreement outside the budget\n"
                         : "compare: outputs differ beyond tolerance\n");
  }
  return pass ? 0 : 1;
}

std::function<int()> SetupCompare(CLI::App& sub) {
  auto a = std::make_shared<CompareArgs>();
  sub.add_option("plan", a->plan, "plan file")->required();
  sub.add_option("--reference", a->reference,
                 "reference JSON: a list of {\"inputs\": {..}, \"outputs\": {..}}");
  sub.add_option("--against", a->against, "another plan to compare with");
  sub.add_option("--inputs", a->inputs, "inputs for --against (JSON; default: synthetic)");
  sub.add_option("--atol", a->atol, "absolute tolerance")->capture_default_str();
  sub.add_option("--rtol", a->rtol, "relative tolerance")->capture_default_str();
  sub.add_flag("--json", a->json, "print JSON");
  sub.add_option("--texts", a->texts, "inputs for --against from posts, one per line");
  AddTextInputOptions(sub, &a->text);
  sub.add_option("--min-cosine", a->min_cosine,
                 "pass when the row-wise cosine is at least this (replaces --atol/--rtol)");
  sub.add_option(
      "--max-top1-drop", a->max_top1_drop_text,
      "pass when top-1 disagreement with the other plan is at most this (0.5% or 0.005)");
  sub.add_option("--top1-outputs", a->top1_outputs,
                 "outputs whose argmax counts (comma-separated; default: names with 'logit')");
  return [a] { return RunCompare(*a); };
}

SURGE_REGISTER_COMMAND(compare, "compare",
                       "Check a plan's outputs against reference outputs or another plan",
                       SetupCompare);

}  // namespace
}  // namespace surge::cli
