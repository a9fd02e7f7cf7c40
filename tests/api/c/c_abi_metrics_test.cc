// The C ABI's metrics (wharf_metrics, wharf_metrics_text): every sample of the snapshot with its
// name, labels and value; the text is ToPrometheusText's; bad arguments are named.
#include <map>

#include "c_abi_fixture.h"

namespace wharf::cabi_test {
namespace {

struct Samples {
  std::map<std::string, double> by_key;  // name + labels -> value
  std::string text;                      // the samples as Prometheus sample lines
};

void Collect(void* ctx, const char* name, const char* labels, double value) {
  auto* samples = static_cast<Samples*>(ctx);
  samples->by_key[std::string(name) + labels] = value;
  char number[64];
  std::snprintf(number, sizeof(number), "%.17g", value);
  samples->text += std::string(name) + labels + " " + number + "\n";
}

using CAbiMetricsTest = CAbiTest;

TEST_F(CAbiMetricsTest, SamplesAndTextOfTheEngine) {
  for (int i = 0; i < 4; ++i) Commit("A", "k" + std::to_string(i), "payload");
  Samples samples;
  ASSERT_WHARF_OK(wharf_metrics(engine_, Collect, &samples));
  ASSERT_TRUE(samples.by_key.count("wharf_durable_lsn")) << samples.text;
  EXPECT_EQ(samples.by_key["wharf_durable_lsn"], 4.0);
  EXPECT_EQ(samples.by_key["wharf_last_lsn"], 4.0);
  // A histogram comes as its buckets (labelled le), _sum and _count.
  bool bucket = false;
  for (const auto& [key, value] : samples.by_key) {
    bucket = bucket || key.rfind("wharf_commit_duration_seconds_bucket{le=\"", 0) == 0;
  }
  EXPECT_TRUE(bucket) << samples.text;
  EXPECT_TRUE(samples.by_key.count("wharf_commit_duration_seconds_count")) << samples.text;

  char* text = nullptr;
  ASSERT_WHARF_OK(wharf_metrics_text(engine_, &text));
  ASSERT_NE(text, nullptr);
  const std::string body = text;
  wharf_free(text);
  EXPECT_NE(body.find("# TYPE wharf_durable_lsn gauge\nwharf_durable_lsn 4\n"), std::string::npos)
      << body;
  // Every sample of the callback is a sample line of the text (same names, labels, order).
  size_t samples_in_text = 0;
  for (size_t at = 0; at < body.size();) {
    const size_t end = body.find('\n', at);
    if (body[at] != '#') ++samples_in_text;
    at = end + 1;
  }
  EXPECT_EQ(samples_in_text, std::count(samples.text.begin(), samples.text.end(), '\n'));
}

TEST_F(CAbiMetricsTest, BadArgumentsAreNamed) {
  Samples samples;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_metrics(nullptr, Collect, &samples));
  EXPECT_NE(LastError().find("engine"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_metrics(engine_, nullptr, &samples));
  EXPECT_NE(LastError().find("fn is NULL"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_metrics_text(engine_, nullptr));
  EXPECT_NE(LastError().find("text"), std::string::npos) << LastError();
  char* text = nullptr;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_metrics_text(nullptr, &text));
  EXPECT_EQ(text, nullptr);
  EXPECT_TRUE(samples.by_key.empty());
}

}  // namespace
}  // namespace wharf::cabi_test
