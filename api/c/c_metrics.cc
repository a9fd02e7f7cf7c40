// The C ABI's metrics (wharf.h, METRICS): the samples of engine/metrics/exposition's families,
// one callback each, and the Prometheus text.
#include <cstdlib>
#include <cstring>

#include "api/c/c_common.h"
#include "engine/metrics/exposition.h"
#include "wharf.h"
#include "wharf/metrics.h"

using namespace wharf;
using namespace wharf::capi;

wharf_status wharf_metrics(wharf_engine* engine, wharf_metric_fn fn, void* ctx) {
  return Guard("wharf_metrics", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is NULL");
    if (!s.ok()) return s;
    MetricsSnapshot snapshot;
    s = ReadMetrics(*state->engine, &snapshot);
    if (!s.ok()) return s;
    const std::vector<internal::MetricFamily> families = internal::MetricFamilies(snapshot);
    CallbackScope scope;
    for (const internal::MetricFamily& family : families) {
      for (const internal::MetricSample& sample : family.samples) {
        const std::string labels = internal::FormatLabels(sample.labels);
        fn(ctx, sample.name.c_str(), labels.c_str(), sample.value);
      }
    }
    return Status::OK();
  });
}

wharf_status wharf_metrics_text(wharf_engine* engine, char** text) {
  return Guard("wharf_metrics_text", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckOut(text, "text");
    if (!s.ok()) return s;
    MetricsSnapshot snapshot;
    s = ReadMetrics(*state->engine, &snapshot);
    if (!s.ok()) return s;
    const std::string result = ToPrometheusText(snapshot);
    char* copy = static_cast<char*>(std::malloc(result.size() + 1));
    if (copy == nullptr) return Status::Internal("out of memory");
    std::memcpy(copy, result.c_str(), result.size() + 1);
    *text = copy;
    return Status::OK();
  });
}
