#include "serve/model.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "core/logging.h"
#include "core/mmap_file.h"
#include "engine/builder/builder.h"
#include "serve/model_config.h"
#include "text/bert_tokenizer.h"

namespace surge::serve {
namespace fs = std::filesystem;
namespace {

int64_t NsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
}

uint64_t NowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string ShapeString(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

template <typename Dims>
std::string DimsString(const Dims& dims, bool batched) {
  std::string out = "[";
  bool first = true;
  if (batched) {
    out += "-1";
    first = false;
  }
  for (int64_t d : dims) {
    out += (first ? "" : ",") + std::to_string(d);
    first = false;
  }
  return out + "]";
}

// Streaming xxh64 over a file or, for a folder, over every regular file's relative name and bytes
// in name order.
Result<uint64_t> HashModel(const std::string& path) {
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (auto& e : fs::recursive_directory_iterator(path, ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  std::vector<char> buf(1 << 20);
  for (const auto& f : files) {
    std::string rel = fs::relative(f, path, ec).string();
    XXH64_update(st, rel.data(), rel.size());
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      XXH64_freeState(st);
      return NotFoundError("cannot read model file '{}'", f.string());
    }
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      XXH64_update(st, buf.data(), static_cast<size_t>(in.gcount()));
    }
  }
  uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  return h;
}

bool IsHfFolder(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) && fs::exists(p / "config.json", ec);
}

}  // namespace

Result<std::string> FindModelFile(const std::string& version_dir,
                                  const inference::ModelConfig& config) {
  fs::path dir(version_dir);
  std::error_code ec;
  if (!config.default_model_filename().empty()) {
    fs::path p = dir / config.default_model_filename();
    if (fs::exists(p, ec)) return p.string();
    return NotFoundError("model file '{}' (default_model_filename) not found", p.string());
  }
  for (const char* name : {"model.plan", "model.onnx"}) {
    if (fs::exists(dir / name, ec)) return (dir / name).string();
  }
  std::vector<fs::path> onnx;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".onnx") onnx.push_back(e.path());
  }
  std::sort(onnx.begin(), onnx.end());
  if (!onnx.empty()) return onnx.front().string();
  if (IsHfFolder(dir)) return dir.string();
  if (IsHfFolder(dir / "model")) return (dir / "model").string();
  return NotFoundError(
      "no model in '{}': expected model.plan, model.onnx (or another *.onnx), or "
      "a Hugging Face folder with config.json",
      version_dir);
}

Result<std::shared_ptr<const engine::Engine>> LoadOrBuildEngine(const std::string& model_path,
                                                                const engine::BuilderConfig& bc,
                                                                const std::string& cache_dir,
                                                                bool* cache_hit) {
  if (cache_hit) *cache_hit = false;
  engine::EngineOptions eo;
  eo.num_threads = bc.num_threads;
  eo.memory_budget_bytes = bc.memory_budget_bytes;
  if (fs::path(model_path).extension() == ".plan") return engine::Engine::Load(model_path, eo);

  engine::Backend* backend = engine::FindBackend(bc.backend);
  if (backend == nullptr) {
    std::string names;
    for (const auto& n : engine::BackendNames()) names += (names.empty() ? "" : ", ") + n;
    return InvalidArgumentError("backend '{}' is not built in (available: {})", bc.backend, names);
  }
  SURGE_ASSIGN_OR_RETURN(uint64_t model_hash, HashModel(model_path));
  std::string key = fmt::format("{:016x}|{}|{}|{}|{}|{}|{}", model_hash, bc.backend,
                                backend->DeviceArch(), engine::PrecisionName(bc.precision),
                                bc.profile.ToString(), bc.padding_free, bc.memory_budget_bytes);
  uint64_t key_hash = XXH64(key.data(), key.size(), 0);
  std::string stem = fs::path(model_path).stem().string();
  if (stem.empty()) stem = "model";
  fs::path cached;
  if (!cache_dir.empty()) {
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    cached = fs::path(cache_dir) / fmt::format("{}-{:016x}.plan", stem, key_hash);
    if (fs::exists(cached, ec)) {
      auto e = engine::Engine::Load(cached.string(), eo);
      if (e.ok()) {
        if (cache_hit) *cache_hit = true;
        SURGE_LOG_INFO("serve: reusing cached plan {} for {}", cached.string(), model_path);
        return e;
      }
      SURGE_LOG_WARN("serve: cached plan {} is unusable ({}); rebuilding", cached.string(),
                     e.status().ToString());
    }
  }
  engine::builder::BuildReport report;
  SURGE_ASSIGN_OR_RETURN(std::string plan, engine::builder::Build(model_path, bc, &report));
  SURGE_LOG_INFO("serve: built {} with backend {} in {:.0f} ms", model_path, bc.backend,
                 report.total_ms);
  if (!cached.empty()) {
    fs::path tmp = cached;
    tmp += fmt::format(".tmp{}", std::hash<std::thread::id>{}(std::this_thread::get_id()));
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(plan.data(), static_cast<std::streamsize>(plan.size()));
    }
    std::error_code ec;
    fs::rename(tmp, cached, ec);
    if (ec) SURGE_LOG_WARN("serve: cannot cache plan at {}: {}", cached.string(), ec.message());
  }
  return engine::Engine::LoadFromMemory(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(plan.data()), plan.size()), eo);
}

Result<std::shared_ptr<ModelVersion>> ModelVersion::Load(const std::string& model_dir,
                                                         int64_t version,
                                                         inference::ModelConfig config,
                                                         const LoadOptions& options) {
  auto t0 = Clock::now();
  std::shared_ptr<ModelVersion> mv(new ModelVersion());
  mv->model_dir_ = model_dir;
  mv->version_ = version;
  mv->version_str_ = std::to_string(version);
  std::string vdir = (fs::path(model_dir) / mv->version_str_).string();
  SURGE_ASSIGN_OR_RETURN(std::string model_path, FindModelFile(vdir, config));

  // Builder settings from the config.
  engine::BuilderConfig bc;
  bool want_gpu = false;
  for (const auto& g : config.instance_group()) {
    want_gpu |= g.kind() == inference::ModelInstanceGroup::KIND_GPU;
  }
  bool any_cpu = false;
  for (const auto& g : config.instance_group()) {
    any_cpu |= g.kind() == inference::ModelInstanceGroup::KIND_CPU;
  }
  // KIND_GPU asks for the GPU (an error without one); no kind (KIND_AUTO) takes it where the CUDA
  // backend is built in and a GPU is present, else the CPU.
  const engine::Backend* cuda = engine::FindBackend("cuda");
  if (!options.backend.empty()) {
    bc.backend = options.backend;
  } else if (want_gpu || (!any_cpu && cuda != nullptr && cuda->DeviceAvailable().ok())) {
    bc.backend = "cuda";
  } else {
    bc.backend = "cpu";
  }
  std::string precision = ConfigParameter(config, "precision");
  if (!precision.empty()) {
    SURGE_ASSIGN_OR_RETURN(bc.precision, engine::ParsePrecision(precision));
  } else {
    bc.precision = engine::DefaultPrecision(bc.backend);
  }
  std::string profiles = ConfigParameter(config, "profiles");
  if (profiles.empty()) profiles = ConfigParameter(config, "profile");
  if (!profiles.empty()) {
    SURGE_ASSIGN_OR_RETURN(bc.profile, engine::Profile::Parse(profiles));
  }
  std::string budget = ConfigParameter(config, "memory_budget_bytes");
  if (!budget.empty()) bc.memory_budget_bytes = std::stoull(budget);
  std::string threads = ConfigParameter(config, "num_threads");
  if (!threads.empty()) bc.num_threads = std::atoi(threads.c_str());

  bool cache_hit = false;
  SURGE_ASSIGN_OR_RETURN(mv->engine_,
                         LoadOrBuildEngine(model_path, bc, options.plan_cache_dir, &cache_hit));
  const engine::Engine& eng = *mv->engine_;
  if (config.name().empty()) config.set_name(fs::path(model_dir).filename().string());
  SURGE_RETURN_IF_ERROR(AutoCompleteConfig(eng, options.default_max_batch_size, &config));

  // Raw text in: a tokenizer named by the config.
  std::string tok = ConfigParameter(config, "tokenizer");
  if (!tok.empty()) {
    fs::path p = fs::path(model_dir) / tok;
    if (!fs::exists(p)) p = fs::path(vdir) / tok;
    Result<std::unique_ptr<text::BertTokenizer>> t =
        p.extension() == ".json" ? text::BertTokenizer::FromTokenizerJson(p.string())
                                 : text::BertTokenizer::FromVocabFile(p.string());
    if (!t.ok()) return t.status().WithContext(fmt::format("model '{}' tokenizer", config.name()));
    mv->tokenizer_ = std::move(t).value();
    mv->text_input_ = ConfigParameter(config, "text_input");
    if (mv->text_input_.empty()) mv->text_input_ = "TEXT";
    std::string ml = ConfigParameter(config, "max_sequence_length");
    mv->tokenizer_max_length_ = ml.empty() ? 0 : std::atoi(ml.c_str());
    if (mv->tokenizer_max_length_ <= 0) {
      mv->tokenizer_max_length_ = 128;
      if (const auto* ip = eng.profile().Find("input_ids"); ip && ip->max.size() >= 2) {
        mv->tokenizer_max_length_ = static_cast<int>(ip->max[1]);
      }
    }
    bool has_text = false;
    for (auto& in : *config.mutable_input()) {
      if (in.name() == "input_ids" || in.name() == "attention_mask" ||
          in.name() == "token_type_ids") {
        in.set_optional(true);
      }
      has_text |= in.name() == mv->text_input_;
    }
    if (!has_text) {
      auto* in = config.add_input();
      in->set_name(mv->text_input_);
      in->set_data_type(inference::TYPE_STRING);
      in->add_dims(1);
      in->set_optional(true);
    }
    std::string labels = ConfigParameter(config, "labels");
    if (!labels.empty() && config.output_size() > 0 && config.output(0).label_filename().empty()) {
      config.mutable_output(0)->set_label_filename(labels);
    }
  }
  // Labels out.
  for (const auto& out : config.output()) {
    if (out.label_filename().empty()) continue;
    fs::path p = fs::path(model_dir) / out.label_filename();
    std::ifstream in(p);
    if (!in) {
      return NotFoundError("model '{}': label file '{}' for output '{}' not found", config.name(),
                           p.string(), out.name());
    }
    std::vector<std::string> lines;
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      lines.push_back(line);
    }
    mv->labels_[out.name()] = std::move(lines);
  }
  mv->config_ = std::move(config);

  BatcherOptions bo = BatcherOptionsFromConfig(mv->config_);
  // Length-aware batching: dim 1 of integer token inputs of an encoder (one with an attention
  // mask), or of inputs marked allow_ragged_batch, may differ between requests of one batch.
  bool encoder = false;
  for (const auto& t : eng.inputs()) encoder |= t.name == "attention_mask";
  std::vector<engine::ir::Dim> seq_dims;
  if (bo.max_batch_size > 0) {
    for (const auto& in : mv->config_.input()) {
      auto it = std::find_if(eng.inputs().begin(), eng.inputs().end(),
                             [&](const engine::TensorInfo& t) { return t.name == in.name(); });
      if (it == eng.inputs().end() || it->shape.size() < 2 || it->shape[1].IsStatic()) continue;
      bool integer = it->dtype == DType::kInt64 || it->dtype == DType::kInt32;
      if (in.allow_ragged_batch() || (encoder && integer)) {
        bo.ragged_inputs.insert(in.name());
        seq_dims.push_back(it->shape[1]);
      }
    }
    for (const auto& t : eng.outputs()) {
      if (t.shape.size() < 2 || t.shape[1].IsStatic()) continue;
      for (const auto& d : seq_dims) {
        if (t.shape[1] == d) bo.ragged_outputs.insert(t.name);
      }
    }
  }
  for (int i = 0; i < bo.instance_count; ++i) {
    SURGE_ASSIGN_OR_RETURN(auto ctx, eng.CreateContext());
    mv->contexts_.push_back(std::move(ctx));
  }
  SURGE_RETURN_IF_ERROR(mv->Warmup().WithContext(
      fmt::format("model '{}' version {} warm-up", mv->config_.name(), version)));
  ModelVersion* self = mv.get();
  mv->batcher_ = std::make_unique<DynamicBatcher>(
      bo,
      [self](int instance, const engine::TensorMap& in) {
        return self->contexts_[instance]->Run(in);
      },
      [self](const ExecutionStats& es) {
        if (!es.ok) return;
        self->stats_.AddExecution(es.batch_size, es.compute_input_ns, es.compute_infer_ns,
                                  es.compute_output_ns);
      });
  SURGE_LOG_INFO(
      "serve: model '{}' version {} ready ({} instance(s), backend {}, max_batch_size "
      "{}, plan {}) in {:.0f} ms",
      mv->config_.name(), version, bo.instance_count, bc.backend, mv->config_.max_batch_size(),
      cache_hit ? "from cache" : "built or loaded", NsSince(t0) / 1e6);
  return mv;
}

ModelVersion::~ModelVersion() { Shutdown(); }

void ModelVersion::Shutdown() {
  if (batcher_) batcher_->Shutdown();
}

Status ModelVersion::Warmup() {
  const bool batched = config_.max_batch_size() > 0;
  std::vector<engine::TensorMap> samples;
  std::vector<uint32_t> counts;
  std::mt19937 rng(7);
  auto make = [&](DType dt, const Shape& shape, bool zero, bool random) {
    Tensor t(dt, shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      switch (dt) {
        case DType::kInt64:
          t.data_as<int64_t>()[i] = zero ? 0 : (random ? rng() % 2 : 1);
          break;
        case DType::kInt32:
          t.data_as<int32_t>()[i] = zero ? 0 : (random ? rng() % 2 : 1);
          break;
        case DType::kFloat32:
          t.data_as<float>()[i] = zero ? 0.f : static_cast<float>(rng() % 1000) / 1000.f;
          break;
        default:
          break;  // zero-filled
      }
    }
    return t;
  };
  for (const auto& w : config_.model_warmup()) {
    engine::TensorMap m;
    for (const auto& [name, in] : w.inputs()) {
      if (in.data_type() == inference::TYPE_STRING) continue;
      SURGE_ASSIGN_OR_RETURN(DType dt, ConfigTypeToDType(in.data_type()));
      Shape shape;
      if (batched) shape.push_back(std::max<uint32_t>(1, w.batch_size()));
      for (int64_t d : in.dims()) shape.push_back(d);
      if (!in.input_data_file().empty()) {
        SURGE_ASSIGN_OR_RETURN(
            std::string bytes,
            ReadFileToString((fs::path(model_dir_) / "warmup" / in.input_data_file()).string()));
        Tensor t(dt, shape);
        if (bytes.size() != t.nbytes()) {
          return InvalidArgumentError("warm-up file '{}' has {} bytes, input '{}' needs {}",
                                      in.input_data_file(), bytes.size(), name, t.nbytes());
        }
        std::memcpy(t.data(), bytes.data(), bytes.size());
        m.emplace(name, std::move(t));
      } else {
        m.emplace(name, make(dt, shape, in.zero_data(), in.random_data()));
      }
    }
    samples.push_back(std::move(m));
    counts.push_back(std::max<uint32_t>(1, w.count()));
  }
  if (samples.empty()) {
    // Default warm-up: batch 1, variable dims 8 (clamped to the profile), ones.
    engine::TensorMap m;
    for (const auto& t : engine_->inputs()) {
      Shape shape;
      for (size_t d = 0; d < t.shape.size(); ++d) {
        int64_t v = t.shape[d].IsStatic() ? t.shape[d].StaticValue() : (d == 0 ? 1 : 8);
        if (const auto* ip = engine_->profile().Find(t.name); ip && d < ip->max.size()) {
          v = std::clamp<int64_t>(v, ip->min[d], ip->max[d]);
        }
        shape.push_back(v);
      }
      m.emplace(t.name, make(t.dtype, shape, false, false));
    }
    samples.push_back(std::move(m));
    counts.push_back(1);
  }
  // Warm-up runs on a thread that ends with it. The CPU backend's OpenMP runtime keeps a team of
  // worker threads for every thread that ran parallel work; an idle team left behind on the
  // loading thread counts against the cores, and libgomp then puts every team's workers to sleep
  // between parallel regions instead of letting them spin (the served engine ran 1.4x slower).
  Status status;
  std::thread warm([&] {
    for (auto& ctx : contexts_) {
      for (size_t s = 0; s < samples.size(); ++s) {
        for (uint32_t c = 0; c < counts[s]; ++c) {
          auto r = ctx->Run(samples[s]);
          if (!r.ok()) {
            status = r.status();
            return;
          }
        }
      }
    }
  });
  warm.join();
  return status;
}

Status ModelVersion::Tokenize(const InferTensor& text, engine::TensorMap* inputs) const {
  std::vector<std::string_view> texts(text.strings.begin(), text.strings.end());
  if (texts.empty()) return InvalidArgumentError("input '{}' holds no text", text.name);
  if (config_.max_batch_size() > 0 &&
      static_cast<int64_t>(texts.size()) > config_.max_batch_size()) {
    return InvalidArgumentError("{} texts exceed max_batch_size {} of model '{}'", texts.size(),
                                config_.max_batch_size(), name());
  }
  text::BatchOptions bo;
  bo.max_length = tokenizer_max_length_;
  bo.padding = text::Padding::kLongest;
  SURGE_ASSIGN_OR_RETURN(auto encs, tokenizer_->EncodeBatch(texts, bo));
  int64_t seq = encs.empty() ? 0 : static_cast<int64_t>(encs[0].size());
  int64_t b = static_cast<int64_t>(encs.size());
  for (const auto& info : engine_->inputs()) {
    const std::vector<int32_t> text::Encoding::*field = nullptr;
    if (info.name == "input_ids") field = &text::Encoding::ids;
    if (info.name == "attention_mask") field = &text::Encoding::attention_mask;
    if (info.name == "token_type_ids") field = &text::Encoding::type_ids;
    if (field == nullptr) {
      if (!inputs->count(info.name)) {
        return InvalidArgumentError(
            "model '{}' input '{}' is not produced by the tokenizer and "
            "was not given",
            name(), info.name);
      }
      continue;
    }
    Shape shape = config_.max_batch_size() > 0 ? Shape{b, seq} : Shape{seq};
    if (config_.max_batch_size() == 0 && b != 1) {
      return InvalidArgumentError("model '{}' does not batch: send one text", name());
    }
    Tensor t(info.dtype == DType::kInt32 ? DType::kInt32 : DType::kInt64, shape);
    for (int64_t r = 0; r < b; ++r) {
      const auto& v = encs[r].*field;
      for (int64_t c = 0; c < seq; ++c) {
        if (t.dtype() == DType::kInt32) {
          t.data_as<int32_t>()[r * seq + c] = v[c];
        } else {
          t.data_as<int64_t>()[r * seq + c] = v[c];
        }
      }
    }
    (*inputs)[info.name] = std::move(t);
  }
  return Status::Ok();
}

Status ModelVersion::Validate(const InferRequest& r, engine::TensorMap* inputs) const {
  const bool batched = config_.max_batch_size() > 0;
  const InferTensor* text = nullptr;
  int64_t batch = -1;
  for (const auto& t : r.inputs) {
    auto it = std::find_if(config_.input().begin(), config_.input().end(),
                           [&](const inference::ModelInput& in) { return in.name() == t.name; });
    if (it == config_.input().end()) {
      std::string names;
      for (const auto& in : config_.input()) names += (names.empty() ? "" : ", ") + in.name();
      return InvalidArgumentError("unexpected inference input '{}' for model '{}' (inputs: {})",
                                  t.name, name(), names);
    }
    std::string_view want = ConfigTypeToDatatype(it->data_type());
    if (t.datatype != want) {
      return InvalidArgumentError(
          "inference input '{}' data-type is '{}', but model '{}' expects "
          "'{}'",
          t.name, t.datatype, name(), want);
    }
    // Shape against the config's dims (-1 matches anything); BYTES text may drop its trailing 1.
    bool is_text = tokenizer_ && t.name == text_input_;
    size_t want_rank = it->dims_size() + (batched ? 1 : 0);
    bool ok = t.shape.size() == want_rank;
    if (ok) {
      for (int d = 0; d < it->dims_size(); ++d) {
        int64_t want_d = it->dims(d);
        if (want_d >= 0 && t.shape[d + (batched ? 1 : 0)] != want_d) ok = false;
      }
    }
    if (!ok && is_text && batched && t.shape.size() == 1) ok = true;
    if (!ok) {
      return InvalidArgumentError(
          "unexpected shape for input '{}' for model '{}'. Expected {}, "
          "got {}",
          t.name, name(), DimsString(it->dims(), batched), ShapeString(t.shape));
    }
    if (batched) {
      if (t.shape[0] < 1 || t.shape[0] > config_.max_batch_size()) {
        return InvalidArgumentError(
            "inference request batch-size {} for input '{}' is outside "
            "[1, max_batch_size = {}] of model '{}'",
            t.shape[0], t.name, config_.max_batch_size(), name());
      }
      if (batch >= 0 && t.shape[0] != batch) {
        return InvalidArgumentError("input '{}' has batch size {} but another input has {}", t.name,
                                    t.shape[0], batch);
      }
      batch = t.shape[0];
    }
    if (is_text) {
      text = &t;
      continue;
    }
    if (t.is_bytes()) {
      return InvalidArgumentError("input '{}' of model '{}' is BYTES, which the engine cannot take",
                                  t.name, name());
    }
    SURGE_RETURN_IF_ERROR(engine_->profile().Check(t.name, t.shape));
    inputs->emplace(t.name, t.tensor);
  }
  if (text) SURGE_RETURN_IF_ERROR(Tokenize(*text, inputs));
  for (const auto& in : config_.input()) {
    if (in.optional() || inputs->count(in.name()) || (text && in.name() == text_input_)) continue;
    return InvalidArgumentError(
        "expected {} inputs but got {} inputs for model '{}': input '{}' "
        "is missing",
        config_.input_size(), r.inputs.size(), name(), in.name());
  }
  for (const auto& e : engine_->inputs()) {
    if (!inputs->count(e.name)) {
      return InvalidArgumentError("model '{}' needs input '{}'", name(), e.name);
    }
  }
  for (const auto& o : r.outputs) {
    bool found = std::any_of(config_.output().begin(), config_.output().end(),
                             [&](const inference::ModelOutput& m) { return m.name() == o.name; });
    if (!found) {
      return InvalidArgumentError("unexpected inference output '{}' for model '{}'", o.name,
                                  name());
    }
  }
  return Status::Ok();
}

Result<InferResponse> ModelVersion::MakeResponse(const InferRequest& r,
                                                 engine::TensorMap outputs) const {
  InferResponse resp;
  resp.model_name = name();
  resp.model_version = version_str_;
  resp.id = r.id;
  auto emit = [&](const std::string& out_name, const RequestedOutput* ro) -> Status {
    auto it = outputs.find(out_name);
    if (it == outputs.end())
      return InternalError("model '{}' produced no output '{}'", name(), out_name);
    Tensor& t = it->second;
    InferTensor o;
    o.name = out_name;
    bool binary = ro ? ro->binary : r.binary_output;
    if (ro && ro->classification > 0) {
      // Classification extension: top-k of each batch row as "score:index[:label]".
      Tensor f = t.dtype() == DType::kFloat32 ? t : t.ToFloat32();
      const bool batched = config_.max_batch_size() > 0 && f.rank() >= 1;
      int64_t rows = batched ? f.dim(0) : 1;
      int64_t n = rows > 0 ? f.numel() / rows : 0;
      int64_t k = std::min<int64_t>(ro->classification, n);
      auto lab = labels_.find(out_name);
      for (int64_t row = 0; row < rows; ++row) {
        const float* p = f.data_as<float>() + row * n;
        std::vector<int64_t> idx(n);
        for (int64_t i = 0; i < n; ++i) idx[i] = i;
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                          [&](int64_t a, int64_t b) { return p[a] > p[b]; });
        for (int64_t i = 0; i < k; ++i) {
          std::string s = fmt::format("{:.6f}:{}", p[idx[i]], idx[i]);
          if (lab != labels_.end() && idx[i] < static_cast<int64_t>(lab->second.size())) {
            s += ":" + lab->second[idx[i]];
          }
          o.strings.push_back(std::move(s));
        }
      }
      o.datatype = "BYTES";
      o.shape = batched ? Shape{rows, k} : Shape{k};
    } else {
      o.datatype = std::string(DatatypeName(t.dtype()));
      o.shape = t.shape();
      o.tensor = std::move(t);
    }
    resp.outputs.push_back(std::move(o));
    resp.binary.push_back(binary);
    return Status::Ok();
  };
  if (r.outputs.empty()) {
    for (const auto& out : config_.output()) SURGE_RETURN_IF_ERROR(emit(out.name(), nullptr));
  } else {
    for (const auto& ro : r.outputs) SURGE_RETURN_IF_ERROR(emit(ro.name, &ro));
  }
  return resp;
}

void ModelVersion::Submit(InferRequest request, InferCallback done, const Retry& retry) {
  engine::TensorMap inputs;
  Status st = Validate(request, &inputs);
  if (!st.ok()) {
    stats_.AddFailure(FailureReason::kOther, NsSince(request.received));
    done(std::move(st));
    return;
  }
  int64_t batch = 1;
  if (config_.max_batch_size() > 0 && !inputs.empty()) batch = inputs.begin()->second.dim(0);
  Work work;
  work.inputs = std::move(inputs);
  work.priority = request.priority;
  work.timeout_us = request.timeout_us;
  work.cancelled = request.cancelled;
  auto req = std::make_shared<InferRequest>(std::move(request));
  work.done = [this, req, done, batch](Result<engine::TensorMap> out, const WorkTiming& t) {
    int64_t total_ns = NsSince(req->received);
    if (!out.ok()) {
      StatusCode c = out.status().code();
      FailureReason reason = c == StatusCode::kCancelled          ? FailureReason::kCanceled
                             : c == StatusCode::kDeadlineExceeded ? FailureReason::kRejected
                                                                  : FailureReason::kBackend;
      stats_.AddFailure(reason, total_ns);
      done(out.status());
      return;
    }
    auto resp = MakeResponse(*req, std::move(out).value());
    if (!resp.ok()) {
      stats_.AddFailure(FailureReason::kBackend, total_ns);
      done(resp.status());
      return;
    }
    total_ns = NsSince(req->received);
    stats_.AddSuccess(total_ns, t.queue_ns, t.compute_input_ns, t.compute_infer_ns,
                      t.compute_output_ns, static_cast<uint64_t>(batch), NowMs());
    stats_.request_us.Observe(total_ns / 1e3);
    stats_.queue_us.Observe(t.queue_ns / 1e3);
    stats_.compute_infer_us.Observe(t.compute_infer_ns / 1e3);
    done(std::move(resp));
  };
  Status es = batcher_->Enqueue(std::move(work));
  if (es.code() == StatusCode::kFailedPrecondition && retry) {
    retry(std::move(*req), std::move(done));
    return;
  }
  if (!es.ok()) {
    stats_.AddFailure(
        es.code() == StatusCode::kUnavailable ? FailureReason::kRejected : FailureReason::kOther,
        NsSince(req->received));
    done(std::move(es));
  }
}

}  // namespace surge::serve
