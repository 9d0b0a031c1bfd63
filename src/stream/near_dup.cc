#include "stream/near_dup.h"

#include <algorithm>

#include "stream/hash.h"

namespace surge::stream {

namespace {

// kSpread[b] has byte j = bit j of b: adding kSpread[byte] to a word of eight 8-bit counters
// counts the set bits of that byte of a hash, eight at once.
struct SpreadTable {
  uint64_t v[256];
  constexpr SpreadTable() : v() {
    for (int b = 0; b < 256; ++b) {
      uint64_t x = 0;
      for (int j = 0; j < 8; ++j) x |= static_cast<uint64_t>((b >> j) & 1) << (8 * j);
      v[b] = x;
    }
  }
};
constexpr SpreadTable kSpread;

}  // namespace

uint64_t SimHashOfHashes(const uint64_t* hashes, size_t n) {
  // ones[i] = features with bit i set; bit i of the result is set when ones[i] > n / 2.
  uint32_t ones[64] = {};
  for (size_t begin = 0; begin < n; begin += 255) {  // 8-bit counters hold up to 255
    uint64_t acc[8] = {};                            // acc[k] byte j counts bit 8k + j
    const size_t end = std::min(n, begin + 255);
    for (size_t f = begin; f < end; ++f) {
      const uint64_t h = hashes[f];
      for (int k = 0; k < 8; ++k) acc[k] += kSpread.v[(h >> (8 * k)) & 0xFF];
    }
    for (int k = 0; k < 8; ++k) {
      for (int j = 0; j < 8; ++j) ones[8 * k + j] += (acc[k] >> (8 * j)) & 0xFF;
    }
  }
  uint64_t fp = 0;
  for (int i = 0; i < 64; ++i) fp |= static_cast<uint64_t>(2 * ones[i] > n) << i;
  return fp;
}

NearDupIndex::NearDupIndex(int max_distance, size_t capacity, int64_t window_ms)
    : blocks_(max_distance + 1), capacity_(capacity), window_ms_(window_ms) {
  SURGE_CHECK(max_distance >= 0 && max_distance <= 3, "near-duplicate distance {} outside 0..3",
              max_distance);
  SURGE_CHECK(capacity >= 1 && window_ms > 0, "near-duplicate window must be positive");
  int start = 0;
  for (int b = 0; b < blocks_; ++b) {
    int width = 64 / blocks_ + (b < 64 % blocks_ ? 1 : 0);
    shift_[b] = start;
    mask_[b] = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
    start += width;
  }
  ring_.resize(std::min<size_t>(capacity, 1u << 16));
  slots_.resize((static_cast<size_t>(blocks_) << kBucketBits) * kWays);
}

size_t NearDupIndex::Bucket(uint64_t fp, int block) const {
  uint64_t v = (fp >> shift_[block]) & mask_[block];
  size_t bucket = (static_cast<size_t>(block) << kBucketBits) +
                  (Mix64(v + static_cast<uint64_t>(block)) >> (64 - kBucketBits));
  return bucket * kWays;
}

void NearDupIndex::Expire(int64_t now_ms) {
  while (head_ < next_) {
    const Entry& e = ring_[head_ % ring_.size()];
    if (next_ - head_ <= capacity_ && e.ts_ms >= now_ms - window_ms_) break;
    ++head_;
  }
}

void NearDupIndex::Insert(uint64_t fp, int64_t ts_ms, uint32_t copies) {
  if (next_ - head_ >= ring_.size()) {
    if (ring_.size() < capacity_) {
      // Grow the ring, keeping sequence numbers (positions are seq % size).
      std::vector<Entry> bigger(std::min(capacity_, ring_.size() * 2));
      for (uint64_t s = head_; s < next_; ++s) bigger[s % bigger.size()] = ring_[s % ring_.size()];
      ring_ = std::move(bigger);
    } else {
      ++head_;
    }
  }
  uint64_t seq = next_++;
  ring_[seq % ring_.size()] = {fp, ts_ms, copies};
  for (int b = 0; b < blocks_; ++b) {
    Slot* bucket = &slots_[Bucket(fp, b)];
    Slot* victim = bucket;
    for (size_t w = 0; w < kWays; ++w) {
      Slot& e = bucket[w];
      if (e.seq == UINT64_MAX || e.seq < head_) {  // empty or expired
        victim = &e;
        break;
      }
      if (e.seq < victim->seq) victim = &e;
    }
    *victim = {fp, seq};
  }
}

uint32_t NearDupIndex::Observe(uint64_t fp, int64_t ts_ms) {
  Expire(ts_ms);
  const int max_distance = blocks_ - 1;
  uint64_t best = UINT64_MAX;
  int best_d = 65;
  for (int b = 0; b < blocks_; ++b) {
    const Slot* bucket = &slots_[Bucket(fp, b)];
    for (size_t w = 0; w < kWays; ++w) {
      const Slot& e = bucket[w];
      if (e.seq == UINT64_MAX || e.seq < head_) continue;
      int d = __builtin_popcountll(e.fp ^ fp);
      if (d <= max_distance && (d < best_d || (d == best_d && e.seq < best))) {
        best_d = d;
        best = e.seq;
      }
    }
  }
  if (best != UINT64_MAX) return ++ring_[best % ring_.size()].copies;
  Insert(fp, ts_ms, 0);
  return 0;
}

size_t NearDupIndex::memory_bytes() const {
  return ring_.size() * sizeof(Entry) + slots_.size() * sizeof(Slot);
}

void NearDupIndex::Serialize(ByteWriter* w) const {
  w->U8(static_cast<uint8_t>(blocks_ - 1));
  w->Varint(next_ - head_);
  int64_t prev = 0;
  for (uint64_t s = head_; s < next_; ++s) {
    const Entry& e = ring_[s % ring_.size()];
    w->U64(e.fp);
    w->Svarint(e.ts_ms - prev);
    prev = e.ts_ms;
    w->Varint(e.copies);
  }
}

Status NearDupIndex::Deserialize(ByteReader* r) {
  int distance = r->U8();
  size_t n = r->Count(10, "near-duplicate entries");
  SURGE_RETURN_IF_ERROR(r->status());
  if (distance != blocks_ - 1) {
    return InvalidArgumentError("near-duplicate distance {} in the snapshot, {} configured",
                                distance, blocks_ - 1);
  }
  NearDupIndex fresh(blocks_ - 1, capacity_, window_ms_);
  int64_t prev = 0;
  for (size_t i = 0; i < n && r->ok(); ++i) {
    uint64_t fp = r->U64();
    int64_t ts = prev + r->Svarint();
    prev = ts;
    uint32_t copies = static_cast<uint32_t>(r->Varint());
    fresh.Insert(fp, ts, copies);
  }
  SURGE_RETURN_IF_ERROR(r->status());
  *this = std::move(fresh);
  return Status::Ok();
}

}  // namespace surge::stream
