// Metric families and their Prometheus text (engine/metrics/exposition.h): names, types, label
// escaping, cumulative histogram buckets, and what a snapshot that is not live leaves out.
#include "engine/metrics/exposition.h"

#include <gtest/gtest.h>

#include <string>

namespace wharf {
namespace {

using internal::FormatLabels;
using internal::FormatValue;

MetricsSnapshot TwoConsumers() {
  MetricsSnapshot snapshot;
  snapshot.io_backend = "uring";
  snapshot.partitions = 2;
  snapshot.commits.transactions_total = 7;
  snapshot.commits.facts_total = 9;
  snapshot.commits.commit_seconds.upper_bounds = {0.001, 0.01};
  snapshot.commits.commit_seconds.cumulative_counts = {3, 6};
  snapshot.commits.commit_seconds.count = 7;
  snapshot.commits.commit_seconds.sum = 0.5;
  ConsumerMetrics mailer;
  mailer.consumer = "mail\"er\\\n";
  mailer.instance = "a";
  mailer.kind = "subscriber";
  mailer.last_error = "smtp down";
  mailer.last_error_ms = 1'500;
  mailer.partitions = {{0, 4, 2}, {1, 5, 0}};
  mailer.lag_facts = 2;
  snapshot.consumers.push_back(mailer);
  return snapshot;
}

TEST(ExpositionTest, NamesTypesAndCumulativeBuckets) {
  const std::string text = ToPrometheusText(TwoConsumers());
  EXPECT_NE(
      text.find("# TYPE wharf_facts_committed_total counter\nwharf_facts_committed_total 9\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE wharf_commit_duration_seconds histogram\n"
                      "wharf_commit_duration_seconds_bucket{le=\"0.001\"} 3\n"
                      "wharf_commit_duration_seconds_bucket{le=\"0.01\"} 6\n"
                      "wharf_commit_duration_seconds_bucket{le=\"+Inf\"} 7\n"
                      "wharf_commit_duration_seconds_sum 0.5\n"
                      "wharf_commit_duration_seconds_count 7\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("wharf_info{io=\"uring\",partitions=\"2\",live=\"true\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("wharf_consumer_partition_lag_facts{consumer=\"mail\\\"er\\\\\\n\","
                      "runtime=\"a\",partition=\"0\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(",error=\"smtp down\"} 1.5\n"), std::string::npos) << text;
  // Every family has its HELP and TYPE lines, once.
  size_t helps = 0, types = 0;
  for (size_t at = text.find("# HELP "); at != std::string::npos; at = text.find("# HELP ", at + 1))
    ++helps;
  for (size_t at = text.find("# TYPE "); at != std::string::npos; at = text.find("# TYPE ", at + 1))
    ++types;
  EXPECT_EQ(helps, types);
  EXPECT_EQ(helps, internal::MetricFamilies(TwoConsumers()).size());
}

TEST(ExpositionTest, NotLiveGivesOnlyWhatASecondaryKnows) {
  MetricsSnapshot snapshot = TwoConsumers();
  snapshot.live = false;
  const std::string text = ToPrometheusText(snapshot);
  EXPECT_EQ(text.find("wharf_facts_committed_total"), std::string::npos);
  EXPECT_EQ(text.find("wharf_commit_duration_seconds"), std::string::npos);
  EXPECT_EQ(text.find("wharf_consumer_delivered_total"), std::string::npos);
  EXPECT_NE(text.find("wharf_consumer_lag_facts{"), std::string::npos);
  EXPECT_NE(text.find("live=\"false\""), std::string::npos);
}

TEST(ExpositionTest, ValuesAndLabels) {
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatLabels({}), "");
  EXPECT_EQ(FormatLabels({{"a", "x\"y"}, {"b", "\\"}}), "{a=\"x\\\"y\",b=\"\\\\\"}");
}

}  // namespace
}  // namespace wharf
