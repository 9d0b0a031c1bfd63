#include "stream/sketch.h"

#include <algorithm>

#include "stream/hash.h"

namespace surge::stream {

CountSketch::CountSketch(int bits, int rows) : bits_(bits), rows_(rows) {
  SURGE_CHECK(bits >= 4 && bits <= 28 && rows >= 1 && rows <= 4, "sketch {} bits x {} rows", bits,
              rows);
  cells_.assign(static_cast<size_t>(rows) << bits, 0);
}

size_t CountSketch::Index(uint64_t key, int row) const {
  uint64_t h = Mix64(key ^ (0x51ed270b27f1c1a5ULL * static_cast<uint64_t>(row + 1)));
  return (static_cast<size_t>(row) << bits_) + (h >> (64 - bits_));
}

uint32_t CountSketch::Increment(uint64_t key) {
  uint32_t est = UINT32_MAX;
  for (int r = 0; r < rows_; ++r) {
    uint16_t& c = cells_[Index(key, r)];
    if (c < UINT16_MAX) ++c;
    est = std::min<uint32_t>(est, c);
  }
  return est;
}

uint32_t CountSketch::Estimate(uint64_t key) const {
  uint32_t est = UINT32_MAX;
  for (int r = 0; r < rows_; ++r) est = std::min<uint32_t>(est, cells_[Index(key, r)]);
  return est;
}

void CountSketch::Clear() { std::fill(cells_.begin(), cells_.end(), 0); }

void CountSketch::Halve() {
  for (uint16_t& c : cells_) c >>= 1;
}

void CountSketch::Serialize(ByteWriter* w) const {
  w->U8(static_cast<uint8_t>(bits_));
  w->U8(static_cast<uint8_t>(rows_));
  // Mostly zeros: (zero run, value) varint pairs.
  size_t i = 0;
  std::string body;
  ByteWriter b(&body);
  size_t pairs = 0;
  while (i < cells_.size()) {
    size_t run = 0;
    while (i + run < cells_.size() && cells_[i + run] == 0) ++run;
    if (i + run == cells_.size()) break;
    b.Varint(run);
    b.Varint(cells_[i + run]);
    ++pairs;
    i += run + 1;
  }
  w->Varint(pairs);
  w->Raw(body.data(), body.size());
}

Status CountSketch::Deserialize(ByteReader* r) {
  int bits = r->U8();
  int rows = r->U8();
  SURGE_RETURN_IF_ERROR(r->status());
  if (bits != bits_ || rows != rows_) {
    return InvalidArgumentError("sketch of {} rows x 2^{} in the snapshot, {} x 2^{} configured",
                                rows, bits, rows_, bits_);
  }
  std::vector<uint16_t> cells(cells_.size(), 0);
  size_t n = r->Count(2, "sketch cells");
  size_t i = 0;
  for (size_t k = 0; k < n && r->ok(); ++k) {
    i += r->Varint();
    uint64_t v = r->Varint();
    if (i >= cells.size() || v > UINT16_MAX) {
      r->Fail("sketch cell out of range");
      break;
    }
    cells[i++] = static_cast<uint16_t>(v);
  }
  SURGE_RETURN_IF_ERROR(r->status());
  cells_ = std::move(cells);
  return Status::Ok();
}

}  // namespace surge::stream
