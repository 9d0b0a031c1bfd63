// SigniTrend's statistics (Schubert, Weiler, Kriegel, KDD 2014): for every term (or term pair) an
// exponentially weighted moving average of its count per bucket (EWMA) and of the variance
// (EWMVar), kept in a fixed-size hashed table so that memory does not grow with the vocabulary.
//
// Maths (per bucket, x = the weighted count of the bucket that just ended):
//   alpha      = 1 - exp(ln(0.5) / half_life)                 (half_life in buckets)
//   score      = (x - ewma) / (sqrt(var_eff) + beta)         (against the estimate BEFORE x)
//   delta      = x - ewma
//   ewma      += alpha * delta
//   ewmvar     = (1 - alpha) * (ewmvar + alpha * delta^2)
// beta is the noise floor in count units: without it a term's first occurrence would have an
// infinite score. The variance in the score is at least the mean (var_eff = max(ewmvar, ewma)):
// counts are at least as noisy as a Poisson process of that rate, and a variance estimated from
// few buckets (warm-up, a term's first appearances) would otherwise be far too small. While the
// table has seen fewer than 1/alpha buckets, alpha is replaced by max(alpha, 1 / buckets_seen) so
// that the first buckets average instead of starting from zero.
//
// Table: `rows` independent rows of 2^bits cells (count-min style); a key updates one cell per
// row. A cell shared by colliding keys sees their summed counts, which inflates both its x and its
// ewma; the score of a key is the minimum over its rows, the conservative choice SigniTrend makes.
// Memory is rows * 2^bits * 12 bytes, fixed at construction.
//
// Thread safety: none; each detect shard owns its tables.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "stream/bytes.h"

namespace surge::stream {

// alpha for a half-life in buckets (> 0).
double AlphaForHalfLife(double half_life_buckets);

// One EWMA/EWMVar pair.
struct EwmStat {
  float mean = 0;
  float var = 0;

  double Score(double x, double beta) const {
    return (x - mean) / (std::sqrt(std::max(var, mean)) + beta);
  }
  void Update(double x, double alpha) {
    double d = x - mean;
    mean = static_cast<float>(mean + alpha * d);
    var = static_cast<float>((1 - alpha) * (var + alpha * d * d));
  }
};

struct SigniTableOptions {
  int bits = 20;  // 2^bits cells per row
  int rows = 2;   // 1..4
};

class SigniTable {
 public:
  // bits must be 4..30, rows 1..4 (checked).
  explicit SigniTable(SigniTableOptions options = {});

  // Adds `weight` to the key's running count of the current bucket.
  void Add(uint64_t key, float weight);

  struct Estimate {
    double count = 0;  // running count of the current bucket (min over rows)
    double mean = 0;   // ewma of the row that gave the count
    double var = 0;
    double score = 0;  // min over rows of the significance of the running count
  };
  Estimate Get(uint64_t key, double beta) const;

  // Starts the key's history at (mean, var) in every row, for a key that is new to the stream but
  // not to the world (a phrase just learned): cells already holding more keep their values.
  void Seed(uint64_t key, double mean, double var);

  // Closes the bucket: every cell's running count becomes its x, updates ewma/ewmvar with alpha
  // (bias-corrected while warming up, see above) and resets the count.
  void EndBucket(double alpha);
  int64_t buckets_seen() const { return buckets_seen_; }

  size_t memory_bytes() const { return cells_.size() * sizeof(Cell); }
  const SigniTableOptions& options() const { return o_; }

  void Serialize(ByteWriter* w) const;
  // Restores a table serialised with the same bits and rows (InvalidArgument otherwise, naming
  // both).
  Status Deserialize(ByteReader* r);

 private:
  struct Cell {
    EwmStat stat;
    float count = 0;
  };
  size_t Index(uint64_t key, int row) const;

  SigniTableOptions o_;
  size_t mask_;
  std::vector<Cell> cells_;  // rows * 2^bits
  int64_t buckets_seen_ = 0;
};

}  // namespace surge::stream
