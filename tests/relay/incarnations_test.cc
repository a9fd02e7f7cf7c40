// Incarnations::Of at the boundaries of each incarnation, and the {incarnation} placeholder of the
// relay templates (no broker: the options, the expansion, the registration checks).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>

#include "engine/relay/relay_config.h"
#include "test_util.h"
#include "wharf/relay.h"

namespace wharf {
namespace {

constexpr uint64_t kIdMax = std::numeric_limits<uint64_t>::max();

TEST(IncarnationsTest, NeverRestoredIsIncarnationZeroEverywhere) {
  const Incarnations none;
  EXPECT_EQ(none.Of(0), 0u);
  EXPECT_EQ(none.Of(1), 0u);
  EXPECT_EQ(none.Of(kIdMax), 0u);
}

TEST(IncarnationsTest, EachStartBelongsToItsIncarnationAndTheIdBeforeToThePrevious) {
  // Restored at 10 (incarnation 7 from id 11), then restored again at 20 (9 from id 21).
  const Incarnations twice{{{11, 7}, {21, 9}}};
  EXPECT_EQ(twice.Of(0), 0u);
  EXPECT_EQ(twice.Of(1), 0u);
  EXPECT_EQ(twice.Of(10), 0u);
  EXPECT_EQ(twice.Of(11), 7u);
  EXPECT_EQ(twice.Of(20), 7u);
  EXPECT_EQ(twice.Of(21), 9u);
  EXPECT_EQ(twice.Of(kIdMax), 9u);
  // A restore of a database that had no fact yet: every fact is of the new incarnation.
  const Incarnations from_first{{{1, kIdMax}}};
  EXPECT_EQ(from_first.Of(0), 0u);
  EXPECT_EQ(from_first.Of(1), kIdMax);
}

TEST(IncarnationsTest, TemplatesExpandIncarnationAsSixteenLowercaseHexDigits) {
  Fact fact;
  fact.id = 12;
  fact.type = "Order";
  fact.partition = 3;
  EXPECT_EQ(internal::ExpandTemplate("s:{incarnation}:{partition}", fact, 0),
            "s:0000000000000000:3");
  EXPECT_EQ(internal::ExpandTemplate("w.{type}.{incarnation}.{partition}", fact, 0xABCDEF12),
            "w.Order.00000000abcdef12.3");
  EXPECT_EQ(internal::ExpandTemplate("{incarnation}{incarnation}", fact, kIdMax),
            "ffffffffffffffffffffffffffffffff");
  EXPECT_EQ(internal::IncarnationHex(1), "0000000000000001");
}

TEST(IncarnationsTest, TemplatesTakeIncarnationAndKeepThePartitionRule) {
  std::unique_ptr<RelaySink> sink;
  ASSERT_OK(MakeRelaySink("kind=redis_streams;stream=s:{incarnation}:{partition}", &sink));
  EXPECT_OK(sink->Validate("r", Ordering::kPartition));
  ASSERT_OK(MakeRelaySink("kind=nats_jetstream;subject=w.{incarnation}.{partition}", &sink));
  EXPECT_OK(sink->Validate("r", Ordering::kPartition));
  // {incarnation} does not stand for {partition}: partition lanes would interleave.
  for (const char* options : {"kind=redis_streams;stream=s:{incarnation}",
                              "kind=nats_jetstream;subject=w.{incarnation}"}) {
    ASSERT_OK(MakeRelaySink(options, &sink));
    Status s = sink->Validate("r", Ordering::kPartition);
    EXPECT_TRUE(s.IsInvalidArgument()) << options << ": " << s.ToString();
    EXPECT_NE(s.message().find("ordering=global"), std::string::npos) << s.ToString();
    EXPECT_OK(sink->Validate("r", Ordering::kGlobal));
  }
  sink.reset();
  for (const char* options : {"kind=redis_streams;stream=s:{incarnations}:{partition}",
                              "kind=nats_jetstream;subject=w.{Incarnation}.{partition}"}) {
    Status s = MakeRelaySink(options, &sink);
    EXPECT_TRUE(s.IsInvalidArgument()) << options << ": " << s.ToString();
    EXPECT_NE(s.message().find("only {type}, {partition} and {incarnation} may be used"),
              std::string::npos)
        << s.ToString();
    EXPECT_EQ(sink, nullptr);
  }
}

}  // namespace
}  // namespace wharf
