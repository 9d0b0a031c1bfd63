#include "stream/dedup_window.h"

#include "core/logging.h"

namespace surge::stream {

DedupWindow::DedupWindow(int64_t window_ms, size_t max_entries)
    : window_ms_(window_ms), max_entries_(max_entries) {
  SURGE_CHECK(window_ms > 0 && max_entries > 0, "dedup window needs a positive span and size");
  keys_.reserve(std::min<size_t>(max_entries, 1u << 20));
}

bool DedupWindow::Insert(uint64_t key, int64_t ts_ms) {
  if (!keys_.insert(key).second) return false;
  order_.push_back({key, ts_ms});
  newest_ms_ = std::max(newest_ms_, ts_ms);
  Expire();
  return true;
}

void DedupWindow::Expire() {
  while (!order_.empty()) {
    const Entry& e = order_.front();
    bool full = order_.size() > max_entries_;
    if (!full && e.ts_ms >= newest_ms_ - window_ms_) break;
    if (full) ++evicted_early_;
    keys_.erase(e.key);
    order_.pop_front();
  }
}

void DedupWindow::Serialize(ByteWriter* w) const {
  w->Svarint(window_ms_);
  w->Varint(max_entries_);
  w->Svarint(newest_ms_ == INT64_MIN ? 0 : newest_ms_);
  w->Svarint(evicted_early_);
  w->Varint(order_.size());
  int64_t prev = 0;
  for (const Entry& e : order_) {
    w->U64(e.key);
    w->Svarint(e.ts_ms - prev);
    prev = e.ts_ms;
  }
}

Status DedupWindow::Deserialize(ByteReader* r) {
  int64_t window = r->Svarint();
  uint64_t max_entries = r->Varint();
  int64_t newest = r->Svarint();
  int64_t evicted = r->Svarint();
  size_t n = r->Count(9, "dedup entries");
  std::deque<Entry> order;
  std::unordered_set<uint64_t> keys;
  keys.reserve(n);
  int64_t prev = 0;
  for (size_t i = 0; i < n && r->ok(); ++i) {
    Entry e;
    e.key = r->U64();
    e.ts_ms = prev + r->Svarint();
    prev = e.ts_ms;
    if (!keys.insert(e.key).second) r->Fail("duplicate key in the dedup window");
    order.push_back(e);
  }
  SURGE_RETURN_IF_ERROR(r->status());
  if (window != window_ms_ || max_entries != max_entries_) {
    SURGE_LOG_WARN(
        "restoring a dedup window of {} ms / {} entries into one configured for {} ms / {}; the "
        "configured size applies from now on",
        window, max_entries, window_ms_, max_entries_);
  }
  order_ = std::move(order);
  keys_ = std::move(keys);
  newest_ms_ = n ? newest : INT64_MIN;
  evicted_early_ = evicted;
  Expire();
  return Status::Ok();
}

}  // namespace surge::stream
