#include "bench/zipf_keys.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace wharf::bench {

const ZipfKeys& ZipfKeys::Skewed() {
  static const ZipfKeys keys;
  return keys;
}

ZipfKeys::ZipfKeys() : cumulative_(kZipfKeyCount) {
  double total = 0;
  for (int i = 0; i < kZipfKeyCount; ++i) total += std::pow(i + 1, -kZipfExponent);
  double sum = 0;
  for (int i = 0; i < kZipfKeyCount; ++i) {
    sum += std::pow(i + 1, -kZipfExponent) / total;
    cumulative_[i] = sum;
  }
  cumulative_.back() = 1.0;  // no draw may fall past the last key through rounding
}

int ZipfKeys::Draw(uint64_t random) const {
  // 53 random bits as a double in [0, 1).
  const double u = static_cast<double>(random >> 11) * 0x1.0p-53;
  const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
  assert(it != cumulative_.end());
  return static_cast<int>(it - cumulative_.begin());
}

double ZipfKeys::Probability(int key_index) const {
  assert(key_index >= 0 && key_index < kZipfKeyCount);
  return key_index == 0 ? cumulative_[0] : cumulative_[key_index] - cumulative_[key_index - 1];
}

}  // namespace wharf::bench
