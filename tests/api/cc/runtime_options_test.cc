// The runtime's option strings (ParseRuntimeOptions and ValidateRuntimeOptions, wharf/runtime.h):
// every key sets its field, bad values, unknown keys and inconsistent results are refused with
// InvalidArgument naming the key, and a refused string changes nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "test_util.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

// Every field the parser can set, as text: two options compare equal when this does.
std::string Describe(const RuntimeOptions& o) {
  return "instance=" + o.instance + ";workers=" + std::to_string(o.workers) + ";assignment=" +
         (o.assignment == Assignment::kConsistentHash ? "consistent_hash" : "round_robin") +
         ";max_depth=" + std::to_string(o.max_depth) + ";lease_ms=" + std::to_string(o.lease_ms) +
         ";renew_ms=" + std::to_string(o.renew_ms) +
         ";cursor_persist_ms=" + std::to_string(o.cursor_persist_ms) +
         ";backoff_initial_ms=" + std::to_string(o.backoff_initial_ms) +
         ";backoff_max_ms=" + std::to_string(o.backoff_max_ms) +
         ";timer_tick_ms=" + std::to_string(o.timer_tick_ms);
}

RuntimeOptions Parsed(const std::string& text) {
  RuntimeOptions options;
  EXPECT_OK(ParseRuntimeOptions(text, &options)) << text;
  return options;
}

// Expects `text` to be refused with InvalidArgument whose message names `key`, leaving the options
// exactly as they were.
void ExpectRefused(const std::string& text, const std::string& key) {
  RuntimeOptions options;
  options.instance = "before";
  const std::string before = Describe(options);
  Status s = ParseRuntimeOptions(text, &options);
  EXPECT_TRUE(s.IsInvalidArgument()) << text << ": " << s.ToString();
  EXPECT_NE(s.message().find(key), std::string::npos) << text << ": " << s.ToString();
  EXPECT_EQ(Describe(options), before) << text;
}

TEST(RuntimeOptionsParse, DefaultsRoundTripThroughTheirText) {
  RuntimeOptions defaults;
  defaults.instance = "i-1";
  const std::string text = Describe(defaults);
  EXPECT_EQ(Describe(Parsed(text)), text);
}

TEST(RuntimeOptionsParse, EveryKeySetsItsField) {
  EXPECT_EQ(Parsed("instance=node-7").instance, "node-7");
  EXPECT_EQ(Parsed("workers=0").workers, 0u);
  EXPECT_EQ(Parsed("workers=false").workers, 0u);  // the API-only instance
  EXPECT_EQ(Parsed("workers=1024").workers, kWorkersMax);
  EXPECT_EQ(Parsed("assignment=round_robin").assignment, Assignment::kRoundRobin);
  EXPECT_EQ(Parsed("assignment=round_robin;assignment=consistent_hash").assignment,
            Assignment::kConsistentHash);
  EXPECT_EQ(Parsed("max_depth=1").max_depth, 1u);
  EXPECT_EQ(Parsed("lease_ms=4294967295").lease_ms, UINT32_MAX);
  EXPECT_EQ(Parsed("renew_ms=1").renew_ms, 1u);
  EXPECT_EQ(Parsed("cursor_persist_ms=7").cursor_persist_ms, 7u);
  EXPECT_EQ(Parsed("backoff_initial_ms=3").backoff_initial_ms, 3u);
  EXPECT_EQ(Parsed("backoff_max_ms=99999").backoff_max_ms, 99999u);
  EXPECT_EQ(Parsed("timer_tick_ms=1").timer_tick_ms, 1u);
  // Several at once, with whitespace and empty items.
  RuntimeOptions o = Parsed(" instance = a ; workers=3;;lease_ms=100;renew_ms=50 ;");
  EXPECT_EQ(o.instance, "a");
  EXPECT_EQ(o.workers, 3u);
  EXPECT_EQ(o.lease_ms, 100u);
  EXPECT_EQ(o.renew_ms, 50u);
}

TEST(RuntimeOptionsParse, BadValuesAreRefusedByKey) {
  ExpectRefused("instance=", "instance");
  ExpectRefused("workers=1025", "workers");
  ExpectRefused("workers=true", "workers");
  ExpectRefused("workers=-1", "workers");
  ExpectRefused("assignment=random", "assignment");
  ExpectRefused("assignment=", "assignment");
  for (const std::string key : {"max_depth", "lease_ms", "renew_ms", "cursor_persist_ms",
                                "backoff_initial_ms", "backoff_max_ms", "timer_tick_ms"}) {
    SCOPED_TRACE(key);
    ExpectRefused(key + "=0", key);  // every one of them is at least 1
    ExpectRefused(key + "=", key);
    ExpectRefused(key + "=ten", key);
    ExpectRefused(key + "=10ms", key);
    ExpectRefused(key + "=-5", key);
    ExpectRefused(key + "=4294967296", key);  // above uint32
  }
  ExpectRefused("lease_ms", "lease_ms");  // no '='
}

TEST(RuntimeOptionsParse, UnknownKeysAreRefusedByName) {
  ExpectRefused("worker=2", "'worker'");
  ExpectRefused("partitions=4", "'partitions'");  // an engine option is not a runtime option
  RuntimeOptions options;
  Status s = ParseRuntimeOptions("colour=blue", &options);
  EXPECT_NE(s.message().find("unknown runtime option"), std::string::npos) << s.ToString();
}

// The parsed result is validated as a whole: each rule refused, naming the keys and values, and
// nothing applied.
TEST(RuntimeOptionsParse, InconsistentResultsAreRefused) {
  ExpectRefused("lease_ms=100;renew_ms=100", "renew_ms (100) must be shorter than lease_ms (100)");
  ExpectRefused("renew_ms=40000", "renew_ms (40000)");  // against the default lease_ms (30000)
  ExpectRefused("backoff_initial_ms=11;backoff_max_ms=10",
                "backoff_initial_ms (11) must not be above backoff_max_ms (10)");
  // The rules hold on the result, not on each item: lowering both in either order is fine.
  EXPECT_EQ(Parsed("renew_ms=5;lease_ms=10").lease_ms, 10u);
  EXPECT_EQ(Parsed("backoff_max_ms=20;backoff_initial_ms=20").backoff_initial_ms, 20u);
  // All or nothing: good items before a bad one are not applied.
  ExpectRefused("instance=x;workers=4;timer_tick_ms=0", "timer_tick_ms");
}

TEST(RuntimeOptionsValidate, EachRuleOnItsOwn) {
  EXPECT_OK(ValidateRuntimeOptions(RuntimeOptions()));
  struct Case {
    std::string name;
    void (*change)(RuntimeOptions*);
  };
  const std::vector<Case> cases = {
      {"workers", [](RuntimeOptions* o) { o->workers = kWorkersMax + 1; }},
      {"lease_ms", [](RuntimeOptions* o) { o->lease_ms = 0; }},
      {"renew_ms", [](RuntimeOptions* o) { o->renew_ms = 0; }},
      {"cursor_persist_ms", [](RuntimeOptions* o) { o->cursor_persist_ms = 0; }},
      {"backoff_initial_ms", [](RuntimeOptions* o) { o->backoff_initial_ms = 0; }},
      {"backoff_max_ms", [](RuntimeOptions* o) { o->backoff_max_ms = 0; }},
      {"timer_tick_ms", [](RuntimeOptions* o) { o->timer_tick_ms = 0; }},
      {"renew_ms", [](RuntimeOptions* o) { o->renew_ms = o->lease_ms; }},
      {"backoff_initial_ms", [](RuntimeOptions* o) { o->backoff_initial_ms = 6000; }},
  };
  for (const Case& c : cases) {
    RuntimeOptions options;
    c.change(&options);
    Status s = ValidateRuntimeOptions(options);
    EXPECT_TRUE(s.IsInvalidArgument()) << c.name << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.name), std::string::npos) << s.ToString();
  }
  RuntimeOptions edge;
  edge.workers = kWorkersMax;
  edge.renew_ms = edge.lease_ms - 1;
  edge.backoff_initial_ms = edge.backoff_max_ms;
  EXPECT_OK(ValidateRuntimeOptions(edge));
}

// `config=FILE` loads a declarative file; one that cannot be read is refused, naming the file.
TEST(RuntimeOptionsParse, ConfigFileThatCannotBeRead) {
  wharf::testing::TempDir dir;
  const std::string missing = dir.path() + "/missing.yaml";
  RuntimeOptions options;
  Status s = ParseRuntimeOptions("config=" + missing, &options);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find(missing), std::string::npos) << s.ToString();
  EXPECT_EQ(Describe(options), Describe(RuntimeOptions()));
}

TEST(RuntimeOptionsParse, ConsumerKindNames) {
  EXPECT_STREQ(ToString(ConsumerKind::kProjection), "projection");
  EXPECT_STREQ(ToString(ConsumerKind::kReaction), "reaction");
  EXPECT_STREQ(ToString(ConsumerKind::kSubscriber), "subscriber");
  EXPECT_STREQ(ToString(ConsumerKind::kTap), "tap");
}

}  // namespace
}  // namespace wharf
