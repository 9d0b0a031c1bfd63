// FlatMap64<V>: an open-addressing hash map from 64-bit keys (already hashes) to small values, for
// the per-post hot paths of detect (post-id dedup, new-word keys) where std::unordered_map's node
// allocations and pointer chasing showed up in profiles. Linear probing over a power-of-two table
// that doubles at 50 % load; no erase (callers drop whole maps with Clear()). Key 0 is stored in
// a side slot.
//
// Thread safety: none.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "stream/hash.h"

namespace surge::stream {

template <typename V>
class FlatMap64 {
 public:
  explicit FlatMap64(size_t initial = 1024) { Reset(initial); }

  // The value of `key`, or null.
  V* Find(uint64_t key) {
    if (key == 0) return has_zero_ ? &zero_ : nullptr;
    size_t i = Slot(key);
    while (slots_[i].first != 0) {
      if (slots_[i].first == key) return &slots_[i].second;
      i = (i + 1) & mask_;
    }
    return nullptr;
  }
  const V* Find(uint64_t key) const { return const_cast<FlatMap64*>(this)->Find(key); }

  // Inserts (key, value) when absent; returns the stored value and whether it was inserted.
  std::pair<V*, bool> Insert(uint64_t key, V value) {
    if (key == 0) {
      if (has_zero_) return {&zero_, false};
      has_zero_ = true;
      zero_ = value;
      ++size_;
      return {&zero_, true};
    }
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    size_t i = Slot(key);
    while (slots_[i].first != 0) {
      if (slots_[i].first == key) return {&slots_[i].second, false};
      i = (i + 1) & mask_;
    }
    slots_[i] = {key, value};
    ++size_;
    return {&slots_[i].second, true};
  }

  size_t size() const { return size_; }
  size_t memory_bytes() const { return slots_.size() * sizeof(slots_[0]); }
  void Clear() { Reset(1024); }

  template <typename F>
  void ForEach(F&& f) const {
    if (has_zero_) f(uint64_t{0}, zero_);
    for (const auto& s : slots_) {
      if (s.first != 0) f(s.first, s.second);
    }
  }

 private:
  size_t Slot(uint64_t key) const { return Mix64(key) & mask_; }
  void Reset(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, {0, V{}});
    mask_ = cap - 1;
    size_ = 0;
    has_zero_ = false;
  }
  void Grow() {
    std::vector<std::pair<uint64_t, V>> old = std::move(slots_);
    slots_.assign(old.size() * 2, {0, V{}});
    mask_ = slots_.size() - 1;
    for (const auto& s : old) {
      if (s.first == 0) continue;
      size_t i = Slot(s.first);
      while (slots_[i].first != 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<std::pair<uint64_t, V>> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  bool has_zero_ = false;
  V zero_{};
};

}  // namespace surge::stream
