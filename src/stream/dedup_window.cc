#include "stream/dedup_window.h"

#include <algorithm>
#include <vector>

#include "core/logging.h"

namespace surge::stream {

DedupWindow::DedupWindow(int64_t window_ms, size_t max_entries)
    : window_ms_(window_ms), max_entries_(std::max<size_t>(max_entries, 2)) {
  SURGE_CHECK(window_ms > 0 && max_entries > 0, "dedup window needs a positive span and size");
}

void DedupWindow::Rotate() {
  prev_ = std::move(cur_);
  cur_ = FlatMap64<char>();
  cur_start_ms_ = INT64_MIN;
}

bool DedupWindow::Insert(uint64_t key, int64_t ts_ms) {
  if (prev_.Find(key) || cur_.Find(key)) return false;
  if (cur_start_ms_ == INT64_MIN) cur_start_ms_ = ts_ms;
  if (ts_ms - cur_start_ms_ > window_ms_) {
    Rotate();
    cur_start_ms_ = ts_ms;
  } else if (cur_.size() >= max_entries_ / 2) {
    ++evicted_early_;
    Rotate();
    cur_start_ms_ = ts_ms;
  }
  cur_.Insert(key, 1);
  return true;
}

namespace {

void WriteKeys(const FlatMap64<char>& m, ByteWriter* w) {
  std::vector<uint64_t> keys;
  keys.reserve(m.size());
  m.ForEach([&](uint64_t k, char) { keys.push_back(k); });
  std::sort(keys.begin(), keys.end());  // equal states, equal bytes
  w->Varint(keys.size());
  for (uint64_t k : keys) w->U64(k);
}

Status ReadKeys(ByteReader* r, FlatMap64<char>* m) {
  size_t n = r->Count(8, "dedup keys");
  for (size_t i = 0; i < n && r->ok(); ++i) {
    if (!m->Insert(r->U64(), 1).second) r->Fail("duplicate key in the dedup window");
  }
  return r->status();
}

}  // namespace

void DedupWindow::Serialize(ByteWriter* w) const {
  w->Svarint(window_ms_);
  w->Varint(max_entries_);
  w->Svarint(cur_start_ms_ == INT64_MIN ? 0 : cur_start_ms_);
  w->U8(cur_start_ms_ == INT64_MIN ? 0 : 1);
  w->Svarint(evicted_early_);
  WriteKeys(prev_, w);
  WriteKeys(cur_, w);
}

Status DedupWindow::Deserialize(ByteReader* r) {
  int64_t window = r->Svarint();
  uint64_t max_entries = r->Varint();
  int64_t start = r->Svarint();
  bool started = r->U8() != 0;
  int64_t evicted = r->Svarint();
  FlatMap64<char> prev, cur;
  SURGE_RETURN_IF_ERROR(ReadKeys(r, &prev));
  SURGE_RETURN_IF_ERROR(ReadKeys(r, &cur));
  if (window != window_ms_ || max_entries != max_entries_) {
    SURGE_LOG_WARN(
        "restoring a dedup window of {} ms / {} entries into one configured for {} ms / {}; the "
        "configured size applies from now on",
        window, max_entries, window_ms_, max_entries_);
  }
  prev_ = std::move(prev);
  cur_ = std::move(cur);
  cur_start_ms_ = started ? start : INT64_MIN;
  evicted_early_ = evicted;
  return Status::Ok();
}

}  // namespace surge::stream
