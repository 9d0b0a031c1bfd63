// `surge eval`: scores trends files (and the raw-frequency baseline) against a simulator's ground
// truth: precision@k, recall, detection delay, spam surfaced, duplicate rate. The rules are in
// stream/eval/eval.h and docs/stream-sim.md.
#include "stream/eval/eval.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"
#include "stream/eval/frequency_baseline.h"
#include "stream/eval/truth.h"
#include "stream/post.h"
#include "stream/sim/scenario.h"
#include "stream/sim/sink.h"
#include "text/keywords.h"
#include "text/segmenter.h"

namespace surge::cli {
namespace {

namespace ev = stream::eval;

struct EvalArgs {
  std::string truth = "truth.json";
  std::string trends = "trends.jsonl";
  bool trends_given = false;
  std::vector<std::string> compare;
  std::string baseline;
  std::string posts = "posts.jsonl";
  std::string write_baseline;
  std::string json;
  std::string bucket;
  int k = 10;
  int grace = 2;
  int max_terms = 6;
  bool skip_bad = false;
};

struct Run {
  std::string name;
  std::string source;
  int64_t skipped = 0;
  std::vector<std::string> errors;
  ev::EvalReport report;
};

int Fail(const Status& st) {
  std::cerr << "error: " << st.message() << '\n';
  return st.code() == StatusCode::kNotFound ? 1 : 2;
}

// The frequency baseline over a posts file, as hot lists.
Result<ev::TrendsFile> FrequencyTrends(const EvalArgs& a, int64_t bucket_ms) {
  SURGE_ASSIGN_OR_RETURN(auto seg, text::Segmenter::Create());
  SURGE_ASSIGN_OR_RETURN(auto kw, text::KeywordExtractor::Create(seg.get()));
  ev::FrequencyBaselineOptions o;
  o.k = a.k;
  o.bucket_ms = bucket_ms;
  SURGE_ASSIGN_OR_RETURN(auto base, ev::FrequencyBaseline::Create(seg.get(), kw.get(), o));
  std::ifstream in(a.posts, std::ios::binary);
  if (!in) return NotFoundError("posts file '{}': cannot open it", a.posts);
  stream::PostParser parser;
  stream::Post post;
  std::vector<stream::TrendUpdate> updates;
  ev::TrendsFile f;
  SURGE_RETURN_IF_ERROR(
      ev::ReadJsonlLines(in, a.posts, a.skip_bad, &f, [&](std::string_view line) -> Status {
        SURGE_RETURN_IF_ERROR(parser.ParseInto(line, &post));
        base->Add(post, &updates);
        return Status::Ok();
      }));
  base->Finish(&updates);
  if (!a.write_baseline.empty()) {
    SURGE_ASSIGN_OR_RETURN(auto w, stream::sim::JsonlWriter::Open(a.write_baseline));
    for (const auto& t : updates) SURGE_RETURN_IF_ERROR(w->WriteLine(stream::TrendToJson(t)));
    SURGE_RETURN_IF_ERROR(w->Close());
  }
  f.lists = ev::CutIntoLists(std::move(updates));
  return f;
}

int RunEval(const EvalArgs& a) {
  if (!a.baseline.empty() && a.baseline != "frequency") {
    std::cerr << "error: --baseline must be 'frequency', not '" << a.baseline << "'\n";
    return 2;
  }
  auto truth = ev::LoadTruth(a.truth);
  if (!truth.ok()) return Fail(truth.status());
  ev::EvalOptions o;
  o.k = a.k;
  o.grace_buckets = a.grace;
  o.max_terms = a.max_terms;
  if (!a.bucket.empty()) {
    auto b = stream::sim::ParseDuration(a.bucket);
    if (!b.ok() || *b <= 0) {
      std::cerr << "error: --bucket '" << a.bucket << "' is not a positive duration (\"1m\")\n";
      return 2;
    }
    o.bucket_ms = *b;
  }
  const int64_t bucket_ms = o.bucket_ms > 0 ? o.bucket_ms : truth->bucket_ms;

  std::vector<std::pair<std::string, std::string>> files;  // name, path
  if (!a.compare.empty()) {
    for (const auto& c : a.compare) files.emplace_back(std::filesystem::path(c).filename(), c);
  } else if (a.trends_given || a.baseline.empty()) {
    files.emplace_back(std::filesystem::path(a.trends).filename(), a.trends);
  }
  std::vector<Run> runs;
  ev::TrendsReadOptions ro;
  ro.skip_bad = a.skip_bad;
  auto add_run = [&](std::string name, std::string source, const ev::TrendsFile& f) -> Status {
    SURGE_ASSIGN_OR_RETURN(ev::EvalReport rep, ev::Evaluate(*truth, f.lists, o));
    runs.push_back(
        {std::move(name), std::move(source), f.skipped_lines, f.first_errors, std::move(rep)});
    return Status::Ok();
  };
  if (!a.baseline.empty()) {
    auto f = FrequencyTrends(a, bucket_ms);
    if (!f.ok()) return Fail(f.status());
    if (Status st = add_run("frequency", a.posts, *f); !st.ok()) return Fail(st);
  }
  for (const auto& [name, path] : files) {
    auto f = ev::LoadTrends(path, ro);
    if (!f.ok()) return Fail(f.status());
    if (Status st = add_run(name, path, *f); !st.ok()) return Fail(st);
  }
  std::vector<std::pair<std::string, ev::EvalReport>> table;
  for (const auto& r : runs) table.emplace_back(r.name, r.report);
  // With --json - the JSON owns stdout and the table goes to stderr.
  (a.json == "-" ? std::cerr : std::cout) << ev::FormatReports(table);
  for (const auto& r : runs) {
    if (r.skipped == 0) continue;
    std::cerr << fmt::format("note: {}: skipped {} malformed line(s); first: {}\n", r.source,
                             r.skipped, r.errors.empty() ? "" : r.errors.front());
  }
  if (!a.json.empty()) {
    std::string out = fmt::format("{{\"truth\":{},\"runs\":[", nlohmann::json(a.truth).dump());
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& r = runs[i];
      out += fmt::format("{}{{\"name\":{},\"source\":{},\"skipped_lines\":{},\"report\":{}}}",
                         i ? "," : "", nlohmann::json(r.name).dump(),
                         nlohmann::json(r.source).dump(), r.skipped, ev::ReportToJson(r.report));
    }
    out += "]}\n";
    if (Status st = stream::sim::WriteTextFile(a.json, out); !st.ok()) return Fail(st);
  }
  return 0;
}

std::function<int()> SetupEval(CLI::App& sub) {
  auto a = std::make_shared<EvalArgs>();
  sub.add_option("--truth", a->truth, "ground truth from surge simulate (default truth.json)");
  auto* trends =
      sub.add_option("--trends", a->trends, "trend updates, JSONL (default trends.jsonl)");
  sub.add_option("--compare", a->compare, "several trends files side by side (a.jsonl,b.jsonl)")
      ->delimiter(',');
  sub.add_option("--baseline", a->baseline,
                 "also evaluate a baseline computed from --posts: frequency");
  sub.add_option("--posts", a->posts, "posts for --baseline (default posts.jsonl)");
  sub.add_option("--write-baseline", a->write_baseline, "write the baseline's trend updates");
  sub.add_option("--k", a->k, "hot-list length scored (default 10)")->check(CLI::PositiveNumber);
  sub.add_option("--grace-buckets", a->grace,
                 "buckets after an event's end it may still be listed (default 2)")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--max-terms", a->max_terms, "topic terms used for matching (default 6)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--bucket", a->bucket, "bucket width, e.g. 1m (default: the truth's)");
  sub.add_option("--json", a->json,
                 "write the reports as JSON ('-' = stdout, the table then goes to stderr)");
  sub.add_flag("--skip-bad", a->skip_bad, "count and skip malformed lines instead of failing");
  return [a, trends] {
    a->trends_given = trends->count() > 0;
    return RunEval(*a);
  };
}

}  // namespace

SURGE_REGISTER_COMMAND(eval, "eval",
                       "Score trend updates against a simulator's ground truth (and baselines)",
                       SetupEval);

}  // namespace surge::cli
