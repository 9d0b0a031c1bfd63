#include "serve/scheduler.h"

#include <algorithm>
#include <cstring>

#include "core/logging.h"

namespace surge::serve {
namespace {

int64_t NsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
}

// Requests can share a batch when every input has the same dtype, rank and dims beyond the batch
// dimension (dim 1 excepted for ragged inputs).
std::string Signature(const engine::TensorMap& inputs,
                      const std::set<std::string, std::less<>>& ragged) {
  std::string sig;
  for (const auto& [name, t] : inputs) {
    sig += name;
    sig += ':';
    sig += std::to_string(static_cast<int>(t.dtype()));
    bool r = ragged.count(name) > 0;
    for (size_t d = 1; d < t.rank(); ++d) {
      sig += ',';
      sig += (r && d == 1) ? std::string("*") : std::to_string(t.dim(d));
    }
    sig += ';';
  }
  return sig;
}

}  // namespace

struct DynamicBatcher::Item {
  Work work;
  std::string signature;
  int64_t batch = 1;
  int64_t seq = 0;  // dim 1 of the first ragged input, 0 when none
  Clock::time_point enqueued;
  Clock::time_point deadline = Clock::time_point::max();
  bool delay_on_timeout = false;
};

struct DynamicBatcher::Answer {
  ItemPtr item;
  Result<engine::TensorMap> result;
  WorkTiming timing;
};

DynamicBatcher::DynamicBatcher(BatcherOptions options, Executor executor,
                               std::function<void(const ExecutionStats&)> on_execution)
    : options_(std::move(options)),
      executor_(std::move(executor)),
      on_execution_(std::move(on_execution)) {
  size_t levels = std::max<uint32_t>(1, options_.priority_levels);
  levels_.resize(levels + 1);
  level_counts_.assign(levels + 1, 0);
  int n = std::max(1, options_.instance_count);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
  reaper_ = std::thread([this] { ReaperLoop(); });
  answerer_ = std::thread([this] { AnswerLoop(); });
}

DynamicBatcher::~DynamicBatcher() { Shutdown(); }

const QueuePolicy& DynamicBatcher::PolicyFor(uint32_t level) const {
  auto it = options_.priority_policy.find(level);
  return it != options_.priority_policy.end() ? it->second : options_.default_policy;
}

size_t DynamicBatcher::LevelIndex(int64_t priority) const {
  uint32_t levels = std::max<uint32_t>(1, options_.priority_levels);
  int64_t p = priority;
  if (p <= 0) p = options_.default_priority_level > 0 ? options_.default_priority_level : levels;
  return static_cast<size_t>(std::min<int64_t>(p, levels) - 1);
}

Status DynamicBatcher::Enqueue(Work work) {
  uint32_t levels = std::max<uint32_t>(1, options_.priority_levels);
  if (work.priority < 0 || (options_.priority_levels > 0 && work.priority > levels)) {
    return InvalidArgumentError(
        "priority {} is out of range: the model has {} priority level(s) "
        "(1 is the highest, 0 the default)",
        work.priority, levels);
  }
  auto item = std::make_unique<Item>();
  item->signature = Signature(work.inputs, options_.ragged_inputs);
  if (options_.max_batch_size > 0) {
    int64_t batch = -1;
    for (const auto& [name, t] : work.inputs) {
      if (t.rank() == 0) {
        return InvalidArgumentError("input '{}' has no batch dimension (max_batch_size is {})",
                                    name, options_.max_batch_size);
      }
      if (batch >= 0 && t.dim(0) != batch) {
        return InvalidArgumentError("input '{}' has batch size {} but another input has {}", name,
                                    t.dim(0), batch);
      }
      batch = t.dim(0);
      if (item->seq == 0 && options_.ragged_inputs.count(name) && t.rank() >= 2) {
        item->seq = t.dim(1);
      }
    }
    item->batch = std::max<int64_t>(batch, 1);
    if (batch < 1 || batch > options_.max_batch_size) {
      return InvalidArgumentError("batch size {} is outside [1, max_batch_size = {}]", batch,
                                  options_.max_batch_size);
    }
  }
  size_t level = LevelIndex(work.priority);
  const QueuePolicy& policy = PolicyFor(static_cast<uint32_t>(level + 1));
  uint64_t timeout = policy.default_timeout_us;
  if (work.timeout_us > 0) {
    // A request may set a timeout when the policy has none, and lower (never raise) the policy's
    // when allow_timeout_override is on.
    if (timeout == 0) {
      timeout = work.timeout_us;
    } else if (policy.allow_timeout_override && work.timeout_us < timeout) {
      timeout = work.timeout_us;
    }
  }
  item->enqueued = Clock::now();
  if (timeout > 0) item->deadline = item->enqueued + std::chrono::microseconds(timeout);
  item->delay_on_timeout = policy.delay_on_timeout;
  item->work = std::move(work);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return FailedPreconditionError("the model version is being unloaded; retry");
    if (policy.max_queue_size > 0 && level_counts_[level] >= policy.max_queue_size) {
      return UnavailableError(
          "exceeds maximum queue size: {} request(s) already queued at "
          "priority level {} (max_queue_size {})",
          level_counts_[level], level + 1, policy.max_queue_size);
    }
    bool has_deadline = item->deadline != Clock::time_point::max();
    levels_[level].push_back(std::move(item));
    ++level_counts_[level];
    ++pending_;
    if (has_deadline) reaper_cv_.notify_one();
  }
  cv_.notify_one();
  return Status::Ok();
}

void DynamicBatcher::Poke() {
  cv_.notify_all();
  reaper_cv_.notify_all();
}

void DynamicBatcher::ReaperLoop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!reaper_stop_) {
    std::vector<ItemPtr> rejected, cancelled;
    Clock::time_point earliest = PurgeLocked(Clock::now(), &rejected, &cancelled);
    if (!rejected.empty() || !cancelled.empty()) {
      lk.unlock();
      WorkTiming none;
      for (auto& item : rejected) {
        item->work.done(Status(StatusCode::kDeadlineExceeded,
                               "request timeout expired while queued (queue policy REJECT)"),
                        none);
      }
      for (auto& item : cancelled) {
        item->work.done(Status(StatusCode::kCancelled, "request cancelled by the client"), none);
      }
      lk.lock();
      continue;
    }
    if (earliest == Clock::time_point::max()) {
      reaper_cv_.wait(lk);
    } else {
      reaper_cv_.wait_until(lk, earliest);
    }
  }
}

void DynamicBatcher::Shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  workers_.clear();
  {
    std::lock_guard<std::mutex> lk(mu_);
    reaper_stop_ = true;
  }
  reaper_cv_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  {
    std::lock_guard<std::mutex> lk(answer_mu_);
    answer_stop_ = true;
  }
  answer_cv_.notify_all();
  if (answerer_.joinable()) answerer_.join();
}

void DynamicBatcher::Deliver(std::vector<Answer> answers) {
  {
    std::lock_guard<std::mutex> lk(answer_mu_);
    for (auto& a : answers) answers_.push_back(std::move(a));
  }
  answer_cv_.notify_one();
}

void DynamicBatcher::AnswerLoop() {
  std::unique_lock<std::mutex> lk(answer_mu_);
  for (;;) {
    answer_cv_.wait(lk, [this] { return answer_stop_ || !answers_.empty(); });
    if (answers_.empty()) return;
    std::vector<Answer> ready;
    ready.swap(answers_);
    lk.unlock();
    for (auto& a : ready) a.item->work.done(std::move(a.result), a.timing);
    ready.clear();
    lk.lock();
  }
}

size_t DynamicBatcher::pending() const {
  std::lock_guard<std::mutex> lk(mu_);
  return pending_;
}

size_t DynamicBatcher::inflight() const {
  std::lock_guard<std::mutex> lk(mu_);
  return inflight_;
}

Clock::time_point DynamicBatcher::PurgeLocked(Clock::time_point now, std::vector<ItemPtr>* rejected,
                                              std::vector<ItemPtr>* cancelled) {
  Clock::time_point earliest = Clock::time_point::max();
  size_t delayed = levels_.size() - 1;
  for (size_t l = 0; l < delayed; ++l) {
    auto& q = levels_[l];
    for (auto it = q.begin(); it != q.end();) {
      Item& item = **it;
      if (item.work.cancelled && item.work.cancelled->load(std::memory_order_relaxed)) {
        cancelled->push_back(std::move(*it));
        it = q.erase(it);
        --level_counts_[l];
        --pending_;
        continue;
      }
      if (item.deadline <= now) {
        if (item.delay_on_timeout) {
          item.deadline = Clock::time_point::max();
          levels_[delayed].push_back(std::move(*it));
          ++level_counts_[delayed];
        } else {
          rejected->push_back(std::move(*it));
          --pending_;
        }
        it = q.erase(it);
        --level_counts_[l];
        continue;
      }
      earliest = std::min(earliest, item.deadline);
      ++it;
    }
  }
  auto& dq = levels_[delayed];
  for (auto it = dq.begin(); it != dq.end();) {
    if ((*it)->work.cancelled && (*it)->work.cancelled->load(std::memory_order_relaxed)) {
      cancelled->push_back(std::move(*it));
      it = dq.erase(it);
      --level_counts_[delayed];
      --pending_;
    } else {
      ++it;
    }
  }
  return earliest;
}

bool DynamicBatcher::FormBatchLocked(Clock::time_point now, std::vector<ItemPtr>* batch,
                                     Clock::time_point* wake) {
  // The anchor: oldest request of the highest non-empty level (timed-out DELAY requests last).
  Item* anchor = nullptr;
  for (auto& q : levels_) {
    if (!q.empty()) {
      anchor = q.front().get();
      break;
    }
  }
  if (anchor == nullptr) return false;

  // Without a batch dimension every request runs alone.
  if (options_.max_batch_size <= 0) {
    for (size_t l = 0; l < levels_.size(); ++l) {
      if (!levels_[l].empty()) {
        batch->push_back(std::move(levels_[l].front()));
        levels_[l].pop_front();
        --level_counts_[l];
        --pending_;
        return true;
      }
    }
    return false;
  }

  const int64_t max_batch = options_.max_batch_size;
  struct Pick {
    size_t level;
    size_t index;
  };
  std::vector<Pick> picks;
  int64_t total = 0;
  int64_t real_tokens = 0;
  int64_t max_seq = 0;
  for (size_t l = 0; l < levels_.size() && total < max_batch; ++l) {
    auto& q = levels_[l];
    for (size_t i = 0; i < q.size() && total < max_batch; ++i) {
      Item& c = *q[i];
      if (c.signature != anchor->signature) continue;
      if (total + c.batch > max_batch) continue;
      if (anchor->seq > 0 && c.seq > 0 && !picks.empty()) {
        int64_t new_max = std::max(max_seq, c.seq);
        int64_t new_real = real_tokens + c.batch * c.seq;
        int64_t padded = (total + c.batch) * new_max;
        if (padded > 0 &&
            static_cast<double>(padded - new_real) > options_.max_padding_fraction * padded) {
          continue;
        }
      }
      picks.push_back({l, i});
      total += c.batch;
      real_tokens += c.batch * c.seq;
      max_seq = std::max(max_seq, c.seq);
    }
  }

  // How much of the candidate set to send now.
  int64_t send = 0;
  bool go = false;
  if (total >= max_batch) {
    send = max_batch;
    go = true;
  } else if (!options_.preferred_batch_sizes.empty()) {
    int best = 0;
    for (int p : options_.preferred_batch_sizes) {
      if (p <= total && p > best) best = p;
    }
    if (best > 0) {
      send = best;
      go = true;
    }
  }
  Clock::time_point due = anchor->enqueued + std::chrono::microseconds(options_.max_queue_delay_us);
  if (!go && (options_.max_queue_delay_us == 0 || now >= due || stopping_)) {
    send = total;
    go = true;
  }
  if (!go) {
    *wake = due;
    return false;
  }
  // Take picks in order while they fit in `send` (the anchor always goes).
  std::vector<std::vector<size_t>> taken(levels_.size());
  int64_t sent = 0;
  for (const Pick& p : picks) {
    Item& c = *levels_[p.level][p.index];
    if (sent > 0 && sent + c.batch > send) continue;
    taken[p.level].push_back(p.index);
    sent += c.batch;
    if (sent >= send) break;
  }
  for (size_t l = 0; l < levels_.size(); ++l) {
    if (taken[l].empty()) continue;
    auto& q = levels_[l];
    for (size_t idx : taken[l]) batch->push_back(std::move(q[idx]));
    q.erase(std::remove(q.begin(), q.end(), nullptr), q.end());
    level_counts_[l] -= taken[l].size();
    pending_ -= taken[l].size();
  }
  return true;
}

void DynamicBatcher::WorkerLoop(int instance) {
  for (;;) {
    std::vector<ItemPtr> batch, rejected, cancelled;
    {
      std::unique_lock<std::mutex> lk(mu_);
      for (;;) {
        Clock::time_point now = Clock::now();
        Clock::time_point earliest = PurgeLocked(now, &rejected, &cancelled);
        if (!rejected.empty() || !cancelled.empty()) break;  // answer them outside the lock
        Clock::time_point wake = Clock::time_point::max();
        if (FormBatchLocked(now, &batch, &wake)) {
          ++inflight_;
          break;
        }
        if (pending_ == 0 && stopping_) return;
        wake = std::min(wake, earliest);
        if (wake == Clock::time_point::max()) {
          cv_.wait(lk);
        } else {
          cv_.wait_until(lk, wake);
        }
      }
    }
    WorkTiming none;
    for (auto& item : rejected) {
      item->work.done(Status(StatusCode::kDeadlineExceeded,
                             "request timeout expired while queued (queue policy REJECT)"),
                      none);
    }
    for (auto& item : cancelled) {
      item->work.done(Status(StatusCode::kCancelled, "request cancelled by the client"), none);
    }
    if (!batch.empty()) {
      RunBatch(instance, batch);
      std::lock_guard<std::mutex> lk(mu_);
      --inflight_;
    }
  }
}

void DynamicBatcher::RunBatch(int instance, std::vector<ItemPtr>& batch) {
  auto start = Clock::now();
  ExecutionStats es;
  es.batch_size = 0;
  for (auto& item : batch) es.batch_size += static_cast<int>(item->batch);
  auto queue_ns = [&](const Item& item) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(start - item.enqueued).count();
  };

  auto fail_all = [&](const Status& s) {
    es.ok = false;
    if (on_execution_) on_execution_(es);
    std::vector<Answer> answers;
    for (auto& item : batch) {
      WorkTiming t;
      t.batch_size = es.batch_size;
      t.queue_ns = queue_ns(*item);
      answers.push_back({std::move(item), s, t});
    }
    Deliver(std::move(answers));
  };

  // Single request: no copies on the way in.
  engine::TensorMap merged;
  const engine::TensorMap* inputs = &batch[0]->work.inputs;
  if (batch.size() > 1) {
    std::vector<const engine::TensorMap*> parts;
    parts.reserve(batch.size());
    for (auto& item : batch) parts.push_back(&item->work.inputs);
    auto m = ConcatInputs(parts, options_.ragged_inputs);
    if (!m.ok()) return fail_all(m.status());
    merged = std::move(m).value();
    inputs = &merged;
  }
  auto t1 = Clock::now();
  es.compute_input_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - start).count();
  Result<engine::TensorMap> out = executor_(instance, *inputs);
  auto t2 = Clock::now();
  es.compute_infer_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t2 - t1).count();
  if (!out.ok()) {
    // One bad request (an out-of-range token id, say) must not fail the others it was batched
    // with: run each alone so that only the culprit gets the error.
    if (batch.size() > 1) {
      es.ok = false;
      if (on_execution_) on_execution_(es);
      for (auto& item : batch) {
        std::vector<ItemPtr> one;
        one.push_back(std::move(item));
        RunBatch(instance, one);
      }
      return;
    }
    return fail_all(out.status());
  }

  // Split (and copy, since outputs may view instance memory) per request; the callbacks run on
  // the answer thread while this instance goes on to its next batch.
  std::vector<engine::TensorMap> results(batch.size());
  int64_t row = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    Item& item = *batch[i];
    for (const auto& [name, t] : *out) {
      if (options_.max_batch_size <= 0) {
        results[i].emplace(name, t.Clone());
        continue;
      }
      int64_t seq = options_.ragged_outputs.count(name) ? item.seq : 0;
      results[i].emplace(name, SliceRows(t, row, item.batch, seq));
    }
    row += item.batch;
  }
  es.compute_output_ns = NsSince(t2);
  if (on_execution_) on_execution_(es);
  WorkTiming timing;
  timing.batch_size = es.batch_size;
  timing.compute_input_ns = es.compute_input_ns;
  timing.compute_infer_ns = es.compute_infer_ns;
  timing.compute_output_ns = es.compute_output_ns;
  std::vector<Answer> answers;
  answers.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    timing.queue_ns = queue_ns(*batch[i]);
    answers.push_back({std::move(batch[i]), std::move(results[i]), timing});
  }
  Deliver(std::move(answers));
}

Result<engine::TensorMap> ConcatInputs(const std::vector<const engine::TensorMap*>& parts,
                                       const std::set<std::string, std::less<>>& ragged) {
  engine::TensorMap out;
  if (parts.empty()) return out;
  for (const auto& [name, first] : *parts[0]) {
    bool is_ragged = ragged.count(name) > 0 && first.rank() >= 2;
    int64_t rows = 0;
    int64_t max_seq = is_ragged ? 0 : (first.rank() >= 2 ? first.dim(1) : 0);
    for (const auto* p : parts) {
      auto it = p->find(name);
      if (it == p->end()) return InternalError("batch member lacks input '{}'", name);
      const Tensor& t = it->second;
      if (t.dtype() != first.dtype() || t.rank() != first.rank()) {
        return InternalError("batch members disagree on input '{}'", name);
      }
      rows += t.dim(0);
      if (is_ragged) max_seq = std::max(max_seq, t.dim(1));
    }
    Shape shape = first.shape();
    shape[0] = rows;
    if (is_ragged) shape[1] = max_seq;
    Tensor merged(first.dtype(), shape);  // zero-filled: padding is 0
    auto* dst = static_cast<uint8_t*>(merged.data());
    size_t elem = DTypeSize(first.dtype());
    int64_t inner = 1;
    for (size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
    size_t dst_row = static_cast<size_t>(shape.size() >= 2 ? shape[1] * inner : 1) * elem;
    for (const auto* p : parts) {
      const Tensor& t = p->find(name)->second;
      const auto* src = static_cast<const uint8_t*>(t.data());
      if (!is_ragged) {
        std::memcpy(dst, src, t.nbytes());
        dst += t.nbytes();
        continue;
      }
      size_t src_row = static_cast<size_t>(t.dim(1) * inner) * elem;
      for (int64_t r = 0; r < t.dim(0); ++r) {
        std::memcpy(dst, src + r * src_row, src_row);
        dst += dst_row;
      }
    }
    out.emplace(name, std::move(merged));
  }
  return out;
}

Tensor SliceRows(const Tensor& t, int64_t row, int64_t rows, int64_t seq) {
  if (t.rank() == 0) return t.Clone();
  Shape shape = t.shape();
  size_t elem = DTypeSize(t.dtype());
  int64_t inner = 1;
  for (size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
  bool cut = seq > 0 && shape.size() >= 2 && shape[1] > seq;
  size_t src_row = static_cast<size_t>(shape.size() >= 2 ? shape[1] * inner : 1) * elem;
  shape[0] = rows;
  if (cut) shape[1] = seq;
  Tensor out(t.dtype(), shape);
  const auto* src = static_cast<const uint8_t*>(t.data()) + row * src_row;
  auto* dst = static_cast<uint8_t*>(out.data());
  if (!cut) {
    std::memcpy(dst, src, rows * src_row);
    return out;
  }
  size_t dst_row = static_cast<size_t>(seq * inner) * elem;
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * dst_row, src + r * src_row, dst_row);
  return out;
}

}  // namespace surge::serve
