// The engine's option strings (ParseEngineOptions, wharf/options.h): every key sets its field at
// its bounds, bad values and unknown keys are refused with InvalidArgument naming the key, a
// refused string changes nothing, and the item syntax (';', '=', whitespace, empty items).
#include "wharf/options.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "test_util.h"

namespace wharf {
namespace {

// Every field the parser can set, as text: two options compare equal when this does.
std::string Describe(const EngineOptions& o) {
  return "partitions=" + std::to_string(o.partitions) +
         ";ordering=" + (o.ordering ? ToString(*o.ordering) : "<stored>") +
         ";durability=" + ToString(o.durability) + ";io=" + ToString(o.io) +
         ";queue_capacity=" + std::to_string(o.queue_capacity) +
         ";when_full=" + ToString(o.when_full) +
         ";group_facts_max=" + std::to_string(o.group_facts_max) +
         ";buffered_sync_ms=" + std::to_string(o.buffered_sync_ms) +
         ";create_if_missing=" + (o.create_if_missing ? "true" : "false") +
         ";tail_cache_facts=" + std::to_string(o.tail_cache_facts) +
         ";memtable_bytes=" + std::to_string(o.memtable_bytes) +
         ";block_cache_bytes=" + std::to_string(o.block_cache_bytes) +
         ";wal_prefill_bytes=" + std::to_string(o.wal_prefill_bytes) +
         ";retention_interval_ms=" + std::to_string(o.retention_interval_ms) +
         ";retention_max_bytes=" + std::to_string(o.retention_max_bytes) +
         ";retention_max_age_ms=" + std::to_string(o.retention_max_age_ms) +
         ";admin_socket=" + o.admin_socket + ";metrics_listen=" + o.metrics_listen +
         ";metrics_textfile=" + o.metrics_textfile +
         ";metrics_interval_ms=" + std::to_string(o.metrics_interval_ms);
}

// Parses `text` into default options and returns what it made of them.
std::string Parsed(const std::string& text) {
  EngineOptions options;
  Status s = ParseEngineOptions(text, &options);
  EXPECT_OK(s) << text;
  return Describe(options);
}

// Expects `text` to be refused with InvalidArgument whose message names `key`, leaving the options
// exactly as they were.
void ExpectRefused(const std::string& text, const std::string& key) {
  EngineOptions options;
  options.partitions = 7;
  const std::string before = Describe(options);
  Status s = ParseEngineOptions(text, &options);
  EXPECT_TRUE(s.IsInvalidArgument()) << text << ": " << s.ToString();
  EXPECT_NE(s.message().find("'" + key + "'"), std::string::npos) << text << ": " << s.ToString();
  EXPECT_EQ(Describe(options), before) << text;
}

// Applying Describe's own output to default options gives back the same options: the integer
// keys below appear there with their default values, so this checks each key reaches its field.
TEST(EngineOptionsParse, DefaultsRoundTripThroughTheirText) {
  EngineOptions defaults;
  defaults.ordering = Ordering::kPartition;
  const std::string text = Describe(defaults);
  EngineOptions parsed;
  parsed.partitions = 9;
  ASSERT_OK(ParseEngineOptions(text, &parsed));
  EXPECT_EQ(Describe(parsed), text);
}

TEST(EngineOptionsParse, EveryIntegerKeyAtItsBounds) {
  struct Case {
    std::string key;
    uint64_t min, max;
  };
  const std::vector<Case> cases = {
      {"partitions", 0, kPartitionsMax},
      {"queue_capacity", 1, 1u << 24},
      {"group_facts_max", 1, 1u << 20},
      {"buffered_sync_ms", 1, 3'600'000},
      {"tail_cache_facts", 0, 1u << 24},
      {"memtable_bytes", 1u << 20, uint64_t{1} << 36},
      {"block_cache_bytes", 1u << 20, uint64_t{1} << 40},
      {"wal_prefill_bytes", 0, uint64_t{1} << 36},
      {"retention_interval_ms", 0, 86'400'000},
      {"retention_max_bytes", 0, uint64_t{1} << 50},
      {"retention_max_age_ms", 0, uint64_t{1} << 50},
      {"metrics_interval_ms", 100, 86'400'000},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    for (uint64_t value : {c.min, c.max}) {
      const std::string item = c.key + "=" + std::to_string(value);
      EXPECT_NE(Parsed(item).find(item), std::string::npos) << Parsed(item);
    }
    if (c.min > 0) ExpectRefused(c.key + "=" + std::to_string(c.min - 1), c.key);
    ExpectRefused(c.key + "=" + std::to_string(c.max + 1), c.key);
    ExpectRefused(c.key + "=-1", c.key);
    ExpectRefused(c.key + "=", c.key);
    ExpectRefused(c.key + "=12abc", c.key);
    ExpectRefused(c.key + "=0x10", c.key);
    ExpectRefused(c.key + "=1.5", c.key);
    ExpectRefused(c.key + "=99999999999999999999999", c.key);
  }
}

TEST(EngineOptionsParse, EveryEnumKeyAndItsNames) {
  EXPECT_NE(Parsed("durability=buffered").find("durability=buffered"), std::string::npos);
  EXPECT_NE(Parsed("durability=sync").find("durability=sync"), std::string::npos);
  EXPECT_NE(Parsed("io=uring").find("io=uring"), std::string::npos);
  EXPECT_NE(Parsed("io=posix").find("io=posix"), std::string::npos);
  EXPECT_NE(Parsed("io=auto").find("io=auto"), std::string::npos);
  EXPECT_NE(Parsed("when_full=error").find("when_full=error"), std::string::npos);
  EXPECT_NE(Parsed("when_full=block").find("when_full=block"), std::string::npos);
  EXPECT_NE(Parsed("ordering=global").find("ordering=global"), std::string::npos);
  EXPECT_NE(Parsed("ordering=none").find("ordering=none"), std::string::npos);
  EXPECT_NE(Parsed("ordering=partition").find("ordering=partition"), std::string::npos);
  EXPECT_NE(Parsed("").find("ordering=<stored>"), std::string::npos);  // absent: the stored one
  for (const char* value : {"false", "0"}) {
    EXPECT_NE(Parsed(std::string("create_if_missing=") + value).find("create_if_missing=false"),
              std::string::npos);
  }
  for (const char* value : {"true", "1"}) {
    EngineOptions options;
    options.create_if_missing = false;
    ASSERT_OK(ParseEngineOptions(std::string("create_if_missing=") + value, &options));
    EXPECT_TRUE(options.create_if_missing) << value;
  }
  // Names are exact: no other case, no abbreviation, no number for an enum.
  for (const char* bad : {"SYNC", "syn", "1", ""}) {
    ExpectRefused(std::string("durability=") + bad, "durability");
  }
  for (const char* bad : {"io_uring", "Posix", ""}) ExpectRefused(std::string("io=") + bad, "io");
  for (const char* bad : {"wait", "Error"}) {
    ExpectRefused(std::string("when_full=") + bad, "when_full");
  }
  for (const char* bad : {"partitioned", "GLOBAL"}) {
    ExpectRefused(std::string("ordering=") + bad, "ordering");
  }
  for (const char* bad : {"yes", "TRUE", "2"}) {
    ExpectRefused(std::string("create_if_missing=") + bad, "create_if_missing");
  }
}

// A refused value names what is allowed, so the caller can fix it without the documentation.
TEST(EngineOptionsParse, AdminSocketIsOnOffOrAPath) {
  EXPECT_NE(Parsed("").find("admin_socket=on"), std::string::npos);
  EXPECT_NE(Parsed("admin_socket=off").find("admin_socket=off"), std::string::npos);
  EXPECT_NE(Parsed("admin_socket=/run/x.sock").find("admin_socket=/run/x.sock"), std::string::npos);
  ExpectRefused("admin_socket=", "admin_socket");
}

// metrics_listen is empty (off) or HOST:PORT; metrics_textfile empty (off) or a path.
TEST(EngineOptionsParse, MetricsListenIsEmptyOrHostPort) {
  EXPECT_NE(Parsed("").find("metrics_listen=;"), std::string::npos);
  for (const char* good : {"127.0.0.1:9464", "0.0.0.0:0", "localhost:65535", "[::1]:9464"}) {
    const std::string item = std::string("metrics_listen=") + good;
    EXPECT_NE(Parsed(item).find(item + ";"), std::string::npos) << item;
  }
  for (const char* bad : {"9464", "localhost", ":9464", "host:", "host:65536", "host:-1", "host:9x",
                          "::1:9464", "[::1]", "[::1:9464", "a b:1"}) {
    ExpectRefused(std::string("metrics_listen=") + bad, "metrics_listen");
  }
  EXPECT_NE(Parsed("metrics_textfile=/var/lib/node/wharf.prom")
                .find("metrics_textfile=/var/lib/node/wharf.prom;"),
            std::string::npos);
  EXPECT_NE(Parsed("").find("metrics_interval_ms=15000"), std::string::npos);
}

TEST(EngineOptionsParse, RefusalsSayWhatIsAllowed) {
  EngineOptions options;
  Status s = ParseEngineOptions("io=fast", &options);
  EXPECT_NE(s.message().find("auto | uring | posix"), std::string::npos) << s.ToString();
  s = ParseEngineOptions("partitions=5000", &options);
  EXPECT_NE(s.message().find("[0, 4096]"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("'5000'"), std::string::npos) << s.ToString();
}

TEST(EngineOptionsParse, UnknownKeysAreRefusedByName) {
  ExpectRefused("partition=4", "partition");
  ExpectRefused("Partitions=4", "Partitions");
  ExpectRefused("workers=2", "workers");  // a runtime option is not an engine option
  EngineOptions options;
  Status s = ParseEngineOptions("colour=blue", &options);
  EXPECT_NE(s.message().find("unknown engine option"), std::string::npos) << s.ToString();
}

TEST(EngineOptionsParse, ItemSyntax) {
  // Whitespace around keys and values, empty items and a trailing ';' are ignored.
  EXPECT_EQ(Parsed(" partitions = 3 ;\tio=posix\t;;"), Parsed("partitions=3;io=posix"));
  EXPECT_EQ(Parsed(""), Describe(EngineOptions()));
  EXPECT_EQ(Parsed(";;  ;"), Describe(EngineOptions()));
  // A later item overrides an earlier one.
  EXPECT_EQ(Parsed("partitions=3;partitions=5"), Parsed("partitions=5"));
  // An item without '=' is refused, naming the item.
  ExpectRefused("partitions", "partitions");
  ExpectRefused("partitions=3;durability", "durability");
  // Whitespace inside a value is part of the value.
  ExpectRefused("partitions=1 2", "partitions");
  // '=' inside a value is part of the value.
  ExpectRefused("io=posix=1", "io");
}

// Options parse all or nothing: a bad item after good ones leaves every field as it was, and
// unnamed fields keep the caller's values.
TEST(EngineOptionsParse, AllOrNothingAndUnnamedFieldsKept) {
  ExpectRefused("partitions=3;io=posix;queue_capacity=0", "queue_capacity");
  EngineOptions options;
  options.queue_capacity = 17;
  options.ordering = Ordering::kNone;
  ASSERT_OK(ParseEngineOptions("partitions=2", &options));
  EXPECT_EQ(options.partitions, 2u);
  EXPECT_EQ(options.queue_capacity, 17u);
  EXPECT_EQ(options.ordering, Ordering::kNone);
}

// `config=FILE` loads a declarative file; one that cannot be read is refused, naming the file.
TEST(EngineOptionsParse, ConfigFileThatCannotBeRead) {
  wharf::testing::TempDir dir;
  const std::string missing = dir.path() + "/missing.yaml";
  EngineOptions options;
  options.partitions = 7;
  const std::string before = Describe(options);
  Status s = ParseEngineOptions("config=" + missing, &options);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find(missing), std::string::npos) << s.ToString();
  EXPECT_EQ(Describe(options), before);
}

TEST(EngineOptionsParse, EnumNamesRoundTrip) {
  for (Durability v : {Durability::kSync, Durability::kBuffered}) {
    EngineOptions o;
    ASSERT_OK(ParseEngineOptions(std::string("durability=") + ToString(v), &o));
    EXPECT_EQ(o.durability, v);
  }
  for (IoBackend v : {IoBackend::kAuto, IoBackend::kUring, IoBackend::kPosix}) {
    EngineOptions o;
    ASSERT_OK(ParseEngineOptions(std::string("io=") + ToString(v), &o));
    EXPECT_EQ(o.io, v);
  }
  for (WhenFull v : {WhenFull::kBlock, WhenFull::kError}) {
    EngineOptions o;
    ASSERT_OK(ParseEngineOptions(std::string("when_full=") + ToString(v), &o));
    EXPECT_EQ(o.when_full, v);
  }
  for (Ordering v : {Ordering::kPartition, Ordering::kGlobal, Ordering::kNone}) {
    EngineOptions o;
    ASSERT_OK(ParseEngineOptions(std::string("ordering=") + ToString(v), &o));
    EXPECT_EQ(o.ordering, v);
  }
}

}  // namespace
}  // namespace wharf
