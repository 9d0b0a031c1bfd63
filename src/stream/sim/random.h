// Deterministic random numbers for the simulator: the same seed gives the same stream on every
// platform and standard library (std::*_distribution results are implementation-defined, so
// none is used). xoshiro256** seeded through splitmix64; distributions by inversion, Box-Muller,
// Knuth/normal-approximation Poisson and Vose alias tables.
//
// Thread safety: none; one Rng per thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace surge::stream::sim {

inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Mixes a seed with a stream number so independent parts of the simulation draw from
// unrelated sequences.
inline uint64_t MixSeed(uint64_t seed, uint64_t stream) {
  uint64_t s = seed ^ (stream * 0xD1B54A32D192ED03ull);
  return SplitMix64(&s);
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { Seed(seed); }
  void Seed(uint64_t seed) {
    uint64_t sm = seed;
    for (auto& x : s_) x = SplitMix64(&sm);
    has_spare_ = false;
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; the tiny bias is irrelevant here).
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  bool Bernoulli(double p) { return Uniform() < p; }

  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = Uniform();
    while (u1 <= 0) u1 = Uniform();
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2 * M_PI * u2);
  }
  // exp(N(mu, sigma^2)).
  double LogNormal(double mu, double sigma) { return std::exp(mu + sigma * Normal()); }
  double Exponential(double mean) {
    double u = Uniform();
    while (u <= 0) u = Uniform();
    return -mean * std::log(u);
  }
  // Poisson(lambda): Knuth's product method below 30, a rounded normal above (the counts here
  // are per-tick post counts, where that approximation is invisible).
  int64_t Poisson(double lambda) {
    if (lambda <= 0) return 0;
    if (lambda < 30) {
      const double limit = std::exp(-lambda);
      double p = Uniform();
      int64_t k = 0;
      while (p > limit) {
        p *= Uniform();
        ++k;
      }
      return k;
    }
    const double x = std::floor(lambda + std::sqrt(lambda) * Normal() + 0.5);
    return x < 0 ? 0 : static_cast<int64_t>(x);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

// Vose's alias table: O(1) draws from a fixed discrete distribution.
class AliasTable {
 public:
  AliasTable() = default;
  // `weights` must be non-negative with a positive sum.
  explicit AliasTable(const std::vector<double>& weights);
  size_t size() const { return prob_.size(); }
  bool empty() const { return prob_.empty(); }
  size_t Draw(Rng& rng) const {
    const size_t i = rng.Below(prob_.size());
    return rng.Uniform() < prob_[i] ? i : alias_[i];
  }

 private:
  std::vector<double> prob_;
  std::vector<uint32_t> alias_;
};

// Weights 1 / (rank + offset)^exponent for ranks 0..n-1 (a Zipf-Mandelbrot law).
std::vector<double> ZipfWeights(size_t n, double exponent, double offset = 1.0);

}  // namespace surge::stream::sim
