#include "stream/signi_table.h"

#include <algorithm>
#include <limits>

#include "stream/hash.h"

namespace surge::stream {

double AlphaForHalfLife(double half_life_buckets) {
  SURGE_CHECK(half_life_buckets > 0, "half-life must be positive, got {}", half_life_buckets);
  return 1.0 - std::exp(std::log(0.5) / half_life_buckets);
}

SigniTable::SigniTable(SigniTableOptions options) : o_(options) {
  SURGE_CHECK(o_.bits >= 4 && o_.bits <= 30, "table bits {} outside [4, 30]", o_.bits);
  SURGE_CHECK(o_.rows >= 1 && o_.rows <= 4, "table rows {} outside [1, 4]", o_.rows);
  mask_ = (size_t{1} << o_.bits) - 1;
  cells_.resize(static_cast<size_t>(o_.rows) << o_.bits);
}

size_t SigniTable::Index(uint64_t key, int row) const {
  // Row 0 uses the key's low bits, later rows re-mixed keys, so rows collide independently.
  uint64_t h = row == 0 ? key : Mix64(key + static_cast<uint64_t>(row) * 0x9e3779b97f4a7c15ULL);
  return (static_cast<size_t>(row) << o_.bits) + (h & mask_);
}

void SigniTable::Add(uint64_t key, float weight) {
  for (int r = 0; r < o_.rows; ++r) cells_[Index(key, r)].count += weight;
}

SigniTable::Estimate SigniTable::Get(uint64_t key, double beta) const {
  Estimate e;
  e.count = std::numeric_limits<double>::infinity();
  e.score = std::numeric_limits<double>::infinity();
  for (int r = 0; r < o_.rows; ++r) {
    const Cell& c = cells_[Index(key, r)];
    if (c.count < e.count) {
      e.count = c.count;
      e.mean = c.stat.mean;
      e.var = c.stat.var;
    }
    e.score = std::min(e.score, c.stat.Score(c.count, beta));
  }
  return e;
}

void SigniTable::Seed(uint64_t key, double mean, double var) {
  for (int r = 0; r < o_.rows; ++r) {
    Cell& c = cells_[Index(key, r)];
    c.stat.mean = std::max(c.stat.mean, static_cast<float>(mean));
    c.stat.var = std::max(c.stat.var, static_cast<float>(var));
  }
}

void SigniTable::EndBucket(double alpha) {
  ++buckets_seen_;
  double a = std::max(alpha, 1.0 / static_cast<double>(buckets_seen_));
  for (Cell& c : cells_) {
    if (c.count == 0 && c.stat.mean == 0 && c.stat.var == 0) continue;
    c.stat.Update(c.count, a);
    // Flush denormal-sized leftovers of long-gone terms to zero so their cells become free again.
    if (c.stat.mean < 1e-6f && c.stat.var < 1e-6f) c.stat = EwmStat{};
    c.count = 0;
  }
}

void SigniTable::Serialize(ByteWriter* w) const {
  w->U8(static_cast<uint8_t>(o_.bits));
  w->U8(static_cast<uint8_t>(o_.rows));
  w->Svarint(buckets_seen_);
  // Runs of empty cells are common: (skip, stored) varint pairs followed by the stored cells.
  size_t i = 0;
  const size_t n = cells_.size();
  while (i < n) {
    size_t skip = 0;
    while (i + skip < n && cells_[i + skip].count == 0 && cells_[i + skip].stat.mean == 0 &&
           cells_[i + skip].stat.var == 0) {
      ++skip;
    }
    size_t j = i + skip;
    size_t stored = 0;
    while (j + stored < n && !(cells_[j + stored].count == 0 && cells_[j + stored].stat.mean == 0 &&
                               cells_[j + stored].stat.var == 0)) {
      ++stored;
    }
    w->Varint(skip);
    w->Varint(stored);
    for (size_t k = 0; k < stored; ++k) {
      const Cell& c = cells_[j + k];
      w->F32(c.stat.mean);
      w->F32(c.stat.var);
      w->F32(c.count);
    }
    i = j + stored;
  }
}

Status SigniTable::Deserialize(ByteReader* r) {
  int bits = r->U8();
  int rows = r->U8();
  int64_t seen = r->Svarint();
  SURGE_RETURN_IF_ERROR(r->status());
  if (bits != o_.bits || rows != o_.rows) {
    return InvalidArgumentError(
        "snapshot table has {} rows of 2^{} cells but this detector is configured for {} rows of "
        "2^{}; restore with the same table options",
        rows, bits, o_.rows, o_.bits);
  }
  std::vector<Cell> cells(cells_.size());
  size_t i = 0;
  while (i < cells.size() && r->ok()) {
    size_t skip = r->Varint();
    size_t stored = r->Varint();
    if (skip > cells.size() - i || stored > cells.size() - i - skip) {
      r->Fail("table cell run past the end of the table");
      break;
    }
    i += skip;
    for (size_t k = 0; k < stored; ++k, ++i) {
      cells[i].stat.mean = r->F32();
      cells[i].stat.var = r->F32();
      cells[i].count = r->F32();
    }
  }
  SURGE_RETURN_IF_ERROR(r->status());
  cells_ = std::move(cells);
  buckets_seen_ = seen;
  return Status::Ok();
}

}  // namespace surge::stream
