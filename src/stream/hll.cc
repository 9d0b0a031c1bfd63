#include "stream/hll.h"

#include <cmath>

#include "stream/hash.h"

namespace surge::stream {

HyperLogLog::HyperLogLog(int precision) : precision_(precision) {
  SURGE_CHECK(precision >= kMinPrecision && precision <= kMaxPrecision,
              "HyperLogLog precision {} outside [{}, {}]", precision, kMinPrecision, kMaxPrecision);
  registers_.assign(size_t{1} << precision, 0);
}

void HyperLogLog::Add(uint64_t hash) {
  uint64_t h = Mix64(hash);
  size_t index = h >> (64 - precision_);
  // Rank of the first set bit of the remaining 64 - p bits (1-based); all zero -> 64 - p + 1.
  uint64_t rest = (h << precision_) | (uint64_t{1} << (precision_ - 1));
  uint8_t rank = static_cast<uint8_t>(__builtin_clzll(rest) + 1);
  uint8_t& reg = registers_[index];
  if (rank > reg) {
    if (reg == 0) ++nonzero_;
    reg = rank;
  }
}

double HyperLogLog::Estimate() const {
  const double m = static_cast<double>(registers_.size());
  double alpha;
  switch (precision_) {
    case 4:
      alpha = 0.673;
      break;
    case 5:
      alpha = 0.697;
      break;
    case 6:
      alpha = 0.709;
      break;
    default:
      alpha = 0.7213 / (1.0 + 1.079 / m);
  }
  double sum = 0;
  for (uint8_t r : registers_) sum += std::ldexp(1.0, -r);
  double e = alpha * m * m / sum;
  const uint32_t zeros = static_cast<uint32_t>(registers_.size()) - nonzero_;
  if (e <= 2.5 * m && zeros > 0) e = m * std::log(m / zeros);  // linear counting
  return e;
}

Status HyperLogLog::Merge(const HyperLogLog& other) {
  if (other.precision_ != precision_) {
    return InvalidArgumentError("cannot merge a HyperLogLog of precision {} into one of {}",
                                other.precision_, precision_);
  }
  nonzero_ = 0;
  for (size_t i = 0; i < registers_.size(); ++i) {
    registers_[i] = std::max(registers_[i], other.registers_[i]);
    nonzero_ += registers_[i] != 0;
  }
  return Status::Ok();
}

void HyperLogLog::Clear() {
  std::fill(registers_.begin(), registers_.end(), 0);
  nonzero_ = 0;
}

// Sparse when mostly empty (the common case for a term seen by few authors): the non-zero
// registers as (index delta, value) varint pairs; dense otherwise.
void HyperLogLog::Serialize(ByteWriter* w) const {
  w->U8(static_cast<uint8_t>(precision_));
  if (nonzero_ * 3 < registers_.size()) {
    w->U8(1);
    w->Varint(nonzero_);
    size_t prev = 0;
    for (size_t i = 0; i < registers_.size(); ++i) {
      if (registers_[i] == 0) continue;
      w->Varint(i - prev);
      w->U8(registers_[i]);
      prev = i;
    }
  } else {
    w->U8(0);
    w->Raw(registers_.data(), registers_.size());
  }
}

Result<HyperLogLog> HyperLogLog::Deserialize(ByteReader* r) {
  int p = r->U8();
  uint8_t sparse = r->U8();
  SURGE_RETURN_IF_ERROR(r->status());
  if (p < kMinPrecision || p > kMaxPrecision) {
    r->Fail(
        fmt::format("HyperLogLog precision {} outside [{}, {}]", p, kMinPrecision, kMaxPrecision));
    return r->status();
  }
  HyperLogLog h(p);
  const size_t m = h.registers_.size();
  if (sparse == 1) {
    size_t n = r->Count(2, "HyperLogLog registers");
    size_t index = 0;
    for (size_t i = 0; i < n && r->ok(); ++i) {
      index += r->Varint();
      uint8_t v = r->U8();
      if (index >= m || v == 0 || v > 64 - p + 1) {
        r->Fail("HyperLogLog register out of range");
        break;
      }
      if (h.registers_[index] == 0) ++h.nonzero_;
      h.registers_[index] = v;
    }
  } else if (sparse == 0) {
    r->Raw(h.registers_.data(), m);
    for (uint8_t v : h.registers_) {
      if (v > 64 - p + 1) r->Fail("HyperLogLog register out of range");
      h.nonzero_ += v != 0;
    }
  } else {
    r->Fail("unknown HyperLogLog encoding");
  }
  SURGE_RETURN_IF_ERROR(r->status());
  return h;
}

}  // namespace surge::stream
