// Hashes used across the trend pipeline. Every stage (and every process of a scaled-out pipeline)
// must agree on them: term hashes route records to partitions and index the detector's tables, so
// they are part of the wire contract. HashBytes is XXH3-64 with seed 0; never change it without
// bumping the record codec versions (codec.h).
#pragma once

#include <cstdint>
#include <string_view>

namespace surge::stream {

// XXH3-64 of the bytes (seed 0).
uint64_t HashBytes(std::string_view bytes);

// A cheap invertible 64-bit mixer (splitmix64 finaliser): spreads the bits of an already random-ish
// key, e.g. to derive the second row of a hashed table from a term hash.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Order-independent hash of a term pair (the pair {a, b} equals {b, a}).
inline uint64_t PairHash(uint64_t a, uint64_t b) {
  if (a > b) {
    uint64_t t = a;
    a = b;
    b = t;
  }
  return Mix64(a * 0x9e3779b97f4a7c15ULL ^ Mix64(b + 0x632be59bd9b4e019ULL));
}

// The partition (0 .. partitions-1) a key belongs to. Stable: the same key always goes to the same
// partition for a given partition count.
inline int32_t PartitionOf(uint64_t key, int32_t partitions) {
  return partitions <= 1 ? 0 : static_cast<int32_t>(Mix64(key) % static_cast<uint64_t>(partitions));
}

}  // namespace surge::stream
