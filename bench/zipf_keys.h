// W2-skewed's partition keys (bench/README.md): kZipfKeyCount keys, W1's "customer-0000000" ...
// "customer-0009999", the key with index i drawn with probability proportional to 1 / (i + 1)^s,
// s = kZipfExponent — a hot tenant, a busy customer, a long tail. With the engine's 16
// partitions the fullest one holds 25.9 % of the facts (the hottest key alone 15.1 %); the
// runner checks that share before it loads anything.
#pragma once

#include <cstdint>
#include <vector>

namespace wharf::bench {

inline constexpr int kZipfKeyCount = 10000;
inline constexpr double kZipfExponent = 1.1;

// Immutable after construction; thread-safe.
class ZipfKeys {
 public:
  // The distribution above, built once.
  static const ZipfKeys& Skewed();

  // The key index in [0, kZipfKeyCount) drawn for a uniformly random 64-bit number (inverse of
  // the cumulative distribution: a binary search over kZipfKeyCount values).
  int Draw(uint64_t random) const;
  // The probability that Draw returns `key_index`.
  double Probability(int key_index) const;

 private:
  ZipfKeys();

  std::vector<double> cumulative_;  // by key index: P(index <= i), the last one exactly 1
};

}  // namespace wharf::bench
