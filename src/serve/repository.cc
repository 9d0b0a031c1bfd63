#include "serve/repository.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/logging.h"
#include "core/mmap_file.h"
#include "serve/model_config.h"

namespace surge::serve {
namespace fs = std::filesystem;

Result<ModelControlMode> ParseModelControlMode(std::string_view s) {
  if (s == "none") return ModelControlMode::kNone;
  if (s == "poll") return ModelControlMode::kPoll;
  if (s == "explicit") return ModelControlMode::kExplicit;
  return InvalidArgumentError("--model-control-mode '{}' is not one of none, poll, explicit", s);
}

Status ValidateModelName(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255) {
    return InvalidArgumentError("invalid model name '{}'", name);
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) {
      return InvalidArgumentError(
          "invalid model name '{}': only letters, digits, '_', '-' and '.' "
          "are allowed",
          name);
    }
  }
  return Status::Ok();
}

ModelRepository::ModelRepository(RepositoryOptions options) : options_(std::move(options)) {}

ModelRepository::~ModelRepository() { Stop(); }

Result<std::string> ModelRepository::ModelDir(const std::string& name) const {
  SURGE_RETURN_IF_ERROR(ValidateModelName(name));
  std::error_code ec;
  for (const auto& p : options_.paths) {
    fs::path d = fs::path(p) / name;
    if (fs::is_directory(d, ec)) return d.string();
  }
  return NotFoundError("failed to load '{}': model not found in any model repository", name);
}

std::vector<std::string> ModelRepository::ScanModelNames() const {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& p : options_.paths) {
    for (auto& e : fs::directory_iterator(p, ec)) {
      std::string n = e.path().filename().string();
      if (e.is_directory() && !n.empty() && n[0] != '.' && ValidateModelName(n).ok()) {
        names.insert(n);
      }
    }
  }
  return {names.begin(), names.end()};
}

std::string ModelRepository::Fingerprint(const std::string& dir) const {
  std::vector<std::string> parts;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it.depth() > 3) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    auto t = fs::last_write_time(it->path(), ec).time_since_epoch().count();
    parts.push_back(
        fmt::format("{}:{}:{}", fs::relative(it->path(), dir, ec).string(), it->file_size(ec), t));
  }
  std::sort(parts.begin(), parts.end());
  std::string fp;
  for (auto& p : parts) fp += p + ";";
  return fp;
}

Status ModelRepository::Start() {
  std::vector<std::string> names;
  if (options_.mode == ModelControlMode::kExplicit) {
    for (const auto& m : options_.startup_models) {
      if (m == "*") {
        names = ScanModelNames();
        break;
      }
      names.push_back(m);
    }
  } else {
    names = ScanModelNames();
  }
  Status first;
  for (const auto& n : names) {
    Status s = Load(n);
    if (!s.ok()) {
      SURGE_LOG_ERROR("serve: {}", s.ToString());
      if (first.ok()) first = s;
    }
  }
  if (options_.mode == ModelControlMode::kPoll) {
    poller_ = std::thread([this] { PollLoop(); });
  }
  if (options_.exit_on_error && !first.ok()) return first;
  return Status::Ok();
}

void ModelRepository::Stop() {
  stop_ = true;
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  std::vector<std::shared_ptr<ModelVersion>> all;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [name, e] : entries_) {
      for (auto& [v, mv] : e.versions) all.push_back(mv);
      e.versions.clear();
    }
  }
  Retire(std::move(all));
}

void ModelRepository::PollLoop() {
  std::unique_lock<std::mutex> lk(poll_mu_);
  while (!stop_) {
    poll_cv_.wait_for(lk, std::chrono::seconds(std::max(1, options_.poll_secs)));
    if (stop_) break;
    lk.unlock();
    PollOnce();
    lk.lock();
  }
}

void ModelRepository::PollOnce() {
  std::vector<std::string> names = ScanModelNames();
  std::set<std::string> present(names.begin(), names.end());
  for (const auto& n : names) {
    auto dir = ModelDir(n);
    if (!dir.ok()) continue;
    std::string fp = Fingerprint(*dir);
    bool changed;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = entries_.find(n);
      changed = it == entries_.end() || it->second.fingerprint != fp;
    }
    if (changed) {
      SURGE_LOG_INFO("serve: poll: model '{}' changed; loading", n);
      Status s = Load(n);
      if (!s.ok()) SURGE_LOG_ERROR("serve: poll: {}", s.ToString());
    }
  }
  std::vector<std::string> gone;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [n, e] : entries_) {
      if (!present.count(n) && !e.versions.empty()) gone.push_back(n);
    }
  }
  for (const auto& n : gone) {
    SURGE_LOG_INFO("serve: poll: model '{}' removed; unloading", n);
    (void)Unload(n);
  }
}

Status ModelRepository::CheckControlAllowed() const {
  if (options_.mode != ModelControlMode::kExplicit) {
    return Status(StatusCode::kUnavailable,
                  "explicit model load / unload is not allowed if polling is enabled or the model "
                  "control mode is none (start with --model-control-mode=explicit)");
  }
  return Status::Ok();
}

Status ModelRepository::Load(const std::string& name, const std::string& config_json) {
  SURGE_RETURN_IF_ERROR(ValidateModelName(name));
  std::lock_guard<std::mutex> load_lock(load_mu_);
  auto fail = [&](Status s) {
    std::lock_guard<std::mutex> lk(mu_);
    Entry& e = entries_[name];
    e.reason = s.message();
    if (e.versions.empty()) e.state = "UNAVAILABLE";
    return s;
  };
  auto dir_r = ModelDir(name);
  if (!dir_r.ok()) return fail(dir_r.status());
  std::string dir = *dir_r;
  std::string fingerprint = Fingerprint(dir);

  inference::ModelConfig config;
  fs::path pbtxt = fs::path(dir) / "config.pbtxt";
  std::error_code ec;
  if (!config_json.empty()) {
    auto c = ConfigFromJson(config_json);
    if (!c.ok()) return fail(c.status());
    config = std::move(c).value();
  } else if (fs::exists(pbtxt, ec)) {
    auto text = ReadFileToString(pbtxt.string());
    if (!text.ok()) return fail(text.status());
    std::vector<std::string> warnings;
    auto c = ParseModelConfig(*text, pbtxt.string(), &warnings);
    if (!c.ok()) return fail(c.status());
    for (const auto& w : warnings) SURGE_LOG_WARN("serve: {}", w);
    config = std::move(c).value();
  }
  if (!config.name().empty() && config.name() != name) {
    return fail(
        InvalidArgumentError("model '{}': config.pbtxt names it '{}'; the name must match "
                             "the folder",
                             name, config.name()));
  }
  config.set_name(name);
  if (Status s = ValidateConfig(config); !s.ok()) return fail(s);

  // Versions on disk: numeric folder names not starting with '0'.
  std::vector<int64_t> on_disk;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string();
    if (!e.is_directory() || n.empty() || n[0] == '0' || n.size() > 18) continue;
    if (!std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    on_disk.push_back(std::stoll(n));
  }
  std::sort(on_disk.begin(), on_disk.end());
  std::vector<int64_t> wanted;
  const auto& vp = config.version_policy();
  if (vp.has_all()) {
    wanted = on_disk;
  } else if (vp.has_specific()) {
    for (int64_t v : vp.specific().versions()) {
      if (!std::binary_search(on_disk.begin(), on_disk.end(), v)) {
        return fail(NotFoundError("model '{}': version {} named by version_policy is not in {}",
                                  name, v, dir));
      }
      wanted.push_back(v);
    }
  } else {
    size_t n = vp.has_latest() && vp.latest().num_versions() > 0 ? vp.latest().num_versions() : 1;
    for (size_t i = on_disk.size() > n ? on_disk.size() - n : 0; i < on_disk.size(); ++i) {
      wanted.push_back(on_disk[i]);
    }
  }
  if (wanted.empty()) {
    return fail(
        NotFoundError("model '{}': no version folder (numeric, e.g. '1') in {}", name, dir));
  }

  {
    std::lock_guard<std::mutex> lk(mu_);
    Entry& e = entries_[name];
    e.dir = dir;
    if (e.versions.empty()) e.state = "LOADING";
  }
  std::map<int64_t, std::shared_ptr<ModelVersion>> fresh;
  for (int64_t v : wanted) {
    auto mv = ModelVersion::Load(dir, v, config, options_.load);
    if (!mv.ok()) {
      std::vector<std::shared_ptr<ModelVersion>> discard;
      for (auto& [k, m] : fresh) discard.push_back(m);
      Retire(std::move(discard));
      Status s = mv.status().WithContext(fmt::format("failed to load '{}' version {}", name, v));
      {
        std::lock_guard<std::mutex> lk(mu_);
        entries_[name].fingerprint = fingerprint;  // poll mode waits for the next change
      }
      return fail(s);
    }
    fresh.emplace(v, std::move(mv).value());
  }
  std::vector<std::shared_ptr<ModelVersion>> old;
  {
    std::lock_guard<std::mutex> lk(mu_);
    Entry& e = entries_[name];
    for (auto& [v, m] : e.versions) old.push_back(m);
    e.versions = std::move(fresh);
    e.state = "READY";
    e.reason.clear();
    e.fingerprint = fingerprint;
  }
  if (!old.empty())
    SURGE_LOG_INFO("serve: model '{}' switched; draining {} old version(s)", name, old.size());
  Retire(std::move(old));
  return Status::Ok();
}

Status ModelRepository::Unload(const std::string& name) {
  SURGE_RETURN_IF_ERROR(ValidateModelName(name));
  std::lock_guard<std::mutex> load_lock(load_mu_);
  std::vector<std::shared_ptr<ModelVersion>> old;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      return NotFoundError("failed to unload '{}': model is not loaded", name);
    }
    for (auto& [v, m] : it->second.versions) old.push_back(m);
    it->second.versions.clear();
    it->second.state = "UNAVAILABLE";
    it->second.reason = "unloaded";
    it->second.fingerprint.clear();
  }
  Retire(std::move(old));
  SURGE_LOG_INFO("serve: model '{}' unloaded", name);
  return Status::Ok();
}

void ModelRepository::Retire(std::vector<std::shared_ptr<ModelVersion>> old) {
  // Drain first (queued requests finish on the old version), then drop our references; a caller
  // still inside Submit holds its own and frees the version when it returns.
  for (auto& m : old) m->Shutdown();
  old.clear();
}

Result<std::shared_ptr<ModelVersion>> ModelRepository::Find(std::string_view name,
                                                            std::string_view version) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.versions.empty()) {
    return NotFoundError("Request for unknown model: '{}' is not found", name);
  }
  auto& versions = it->second.versions;
  if (version.empty() || version == "-1") return versions.rbegin()->second;
  int64_t v = 0;
  for (char c : version) {
    if (c < '0' || c > '9' || v > (int64_t{1} << 50)) {
      return InvalidArgumentError("model '{}': version '{}' is not a number", name, version);
    }
    v = v * 10 + (c - '0');
  }
  auto vit = versions.find(v);
  if (vit == versions.end()) {
    return NotFoundError("Request for unknown model: '{}' version {} is not found", name, v);
  }
  return vit->second;
}

std::vector<std::shared_ptr<ModelVersion>> ModelRepository::Versions(std::string_view name) {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::shared_ptr<ModelVersion>> out;
  auto it = entries_.find(name);
  if (it != entries_.end()) {
    for (auto& [v, m] : it->second.versions) out.push_back(m);
  }
  return out;
}

std::vector<std::shared_ptr<ModelVersion>> ModelRepository::AllVersions() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::shared_ptr<ModelVersion>> out;
  for (auto& [n, e] : entries_) {
    for (auto& [v, m] : e.versions) out.push_back(m);
  }
  return out;
}

void ModelRepository::Infer(InferRequest request, InferCallback done) {
  auto v = Find(request.model_name, request.model_version);
  if (!v.ok()) {
    done(v.status());
    return;
  }
  (*v)->Submit(std::move(request), std::move(done),
               [this](InferRequest r, InferCallback d) { Infer(std::move(r), std::move(d)); });
}

std::vector<ModelIndexEntry> ModelRepository::Index(bool ready_only) {
  std::vector<std::string> names = ScanModelNames();
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& [n, e] : entries_) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  std::vector<ModelIndexEntry> out;
  for (const auto& n : names) {
    auto it = entries_.find(n);
    if (it == entries_.end()) {
      if (!ready_only) out.push_back({n, "", "", ""});
      continue;
    }
    const Entry& e = it->second;
    if (!e.versions.empty()) {
      for (auto& [v, m] : e.versions) out.push_back({n, std::to_string(v), "READY", ""});
    } else if (!ready_only) {
      out.push_back({n, "", e.state, e.reason});
    }
  }
  return out;
}

bool ModelRepository::Ready() {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& [n, e] : entries_) {
    if (e.versions.empty() && e.reason != "unloaded") return false;
  }
  return true;
}

void ModelRepository::Poke(std::string_view name) {
  for (auto& v : Versions(name)) v->Poke();
}

}  // namespace surge::serve
