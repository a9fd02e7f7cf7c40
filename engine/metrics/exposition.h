// A metrics snapshot as metric families (name, type, help, samples with labels): the one
// description of every exported metric, formatted as Prometheus text (ToPrometheusText) and
// iterated sample by sample by the C ABI (wharf_metrics).
//
// Names follow Prometheus' conventions: the `wharf_` prefix, base units in the name (`_seconds`,
// `_bytes`), `_total` for counters, histograms as `_bucket{le}` (cumulative), `_sum` and `_count`.
// A snapshot that is not live (read from a secondary) has no counters or histograms: only the
// gauges it knows are given.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wharf/metrics.h"

namespace wharf::internal {

struct MetricSample {
  std::string name;  // the family's name, or with a histogram's suffix (_bucket, _sum, _count)
  std::vector<std::pair<std::string, std::string>> labels;  // (name, value), unescaped
  double value = 0;
};

struct MetricFamily {
  std::string name;
  std::string_view type;  // "counter", "gauge", "histogram"
  std::string_view help;
  std::vector<MetricSample> samples;
};

std::vector<MetricFamily> MetricFamilies(const MetricsSnapshot& snapshot);

// `{a="x",b="y"}` with values escaped (backslash, double quote, newline); "" without labels.
std::string FormatLabels(const std::vector<std::pair<std::string, std::string>>& labels);
// A sample value as Prometheus writes it: integers without a fraction, +Inf/-Inf/NaN spelled so.
std::string FormatValue(double value);
std::string PrometheusText(const std::vector<MetricFamily>& families);

}  // namespace wharf::internal
