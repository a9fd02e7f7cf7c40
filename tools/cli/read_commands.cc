// Read-only commands: stat, cursor list/get, tail, dead list, lease list. They read a secondary
// instance (wharf/inspect.h) and never take the database's lock.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <optional>
#include <thread>

#include "engine/wire/schema.h"
#include "tools/cli/commands.h"
#include "tools/cli/output.h"
#include "tools/cli/replication_view.h"
#include "tools/cli/suggest.h"
#include "wharf/inspect.h"

namespace wharf::cli {

namespace {

constexpr uint64_t kTailDefaultLimit = 10;
constexpr size_t kTailChunkFacts = 256;
constexpr auto kFollowInterval = std::chrono::milliseconds(100);

int OpenInspector(const Context& context, std::unique_ptr<Inspector>* inspector) {
  Status s = Inspector::Open(context.db, inspector);
  if (s.ok()) return kExitOk;
  // The inspector's messages name the path.
  return Fail(kExitCannotOpen, s.message());
}

int DataError(const Status& status) { return Fail(kExitError, status.ToString()); }

void PrintJson(const wire::JsonWriter& json) { Print(json.str() + "\n"); }

std::string Age(int64_t oldest_commit_ms, int64_t now_ms) {
  if (oldest_commit_ms == 0) return "-";
  return std::to_string(std::max<int64_t>(0, now_ms - oldest_commit_ms));
}

// A consumer's stat, every field under the admin socket's name (engine/wire/schema.h).
void ConsumerJson(wire::JsonWriter& json, const ConsumerStat& report) {
  wire::WriteObject(json, report);
}

std::string LastLoss(const ConsumerStat& report) {
  if (report.lost_fact_count == 0) return "-";
  return FormatTimeMs(static_cast<int64_t>(report.lost_last_ms));
}

Table ConsumerTable(const std::vector<ConsumerStat>& reports, int64_t now_ms) {
  Table table({"CONSUMER", "CURSORS", "MIN_ID", "MAX_ID", "LAG_FACTS", "BEHIND_FACTS",
               "OLDEST_AGE_MS", "LOST_FACTS", "LAST_LOSS"},
              {false, true, true, true, true, true, true, true, false});
  for (const ConsumerStat& report : reports) {
    table.Add({report.consumer, std::to_string(report.cursor_count),
               std::to_string(report.fact_id_min), std::to_string(report.fact_id_max),
               std::to_string(report.lag_facts), std::to_string(report.facts_behind),
               Age(report.oldest_commit_ms, now_ms), std::to_string(report.lost_fact_count),
               LastLoss(report)});
  }
  return table;
}

// Consumers stuck on a fact they keep failing: which, how often, since when, and why.
Table RetryTable(const std::vector<ConsumerStat>& reports, int64_t now_ms) {
  Table table({"CONSUMER", "PARTITION", "RETRYING_FACT", "ATTEMPTS", "SINCE", "FOR_MS",
               "LAST_ERROR_AT", "LAST_ERROR"},
              {false, true, true, true, false, true, false, false});
  for (const ConsumerStat& report : reports) {
    if (!report.retrying) continue;
    table.Add({report.consumer, std::to_string(report.retrying_partition),
               std::to_string(report.retrying_fact_id), std::to_string(report.retrying_attempt),
               FormatTimeMs(report.retrying_since_ms),
               std::to_string(std::max<int64_t>(0, now_ms - report.retrying_since_ms)),
               FormatTimeMs(report.last_error_ms), Display(report.last_error, 120)});
  }
  return table;
}

// Per-partition rows of every consumer: partitions with a cursor or with a backlog.
Table LaneTable(const std::vector<ConsumerStat>& reports, int64_t now_ms) {
  Table table(
      {"CONSUMER", "PARTITION", "CURSOR", "EPOCH", "LAG_FACTS", "BEHIND_FACTS", "OLDEST_AGE_MS"},
      {false, true, true, true, true, true, true});
  for (const ConsumerStat& report : reports) {
    for (const ConsumerPartitionStat& lane : report.partitions) {
      if (!lane.has_cursor && lane.facts_behind == 0) continue;
      table.Add({report.consumer, std::to_string(lane.partition),
                 lane.has_cursor ? std::to_string(lane.fact_id) : "-",
                 lane.has_cursor ? std::to_string(lane.epoch) : "-", std::to_string(lane.lag_facts),
                 std::to_string(lane.facts_behind), Age(lane.oldest_commit_ms, now_ms)});
    }
  }
  return table;
}

const char* OrderingName(Ordering ordering) { return ToString(ordering); }

// Leases and instance heartbeats as stored, with the database's current open epoch: a record
// written under an earlier open is void (its writer is gone), like an expired one.
struct LeaseView {
  std::vector<LeaseInfo> leases;
  std::vector<InstanceInfo> instances;
  uint64_t open_epoch = 0;  // 0: unknown (every epoch counts as current)
};

Status ReadLeases(Inspector& inspector, LeaseView* view) {
  Status s = inspector.Leases(&view->leases, &view->instances);
  if (s.ok()) s = inspector.OpenEpoch(&view->open_epoch);
  return s;
}

bool Current(uint64_t record_epoch, int64_t expires_at_ms, const LeaseView& view, int64_t now_ms) {
  return expires_at_ms > now_ms && (view.open_epoch == 0 || record_epoch == view.open_epoch);
}

// "held" (an owner, not expired), "expired" (an owner, but past its expiry or granted under an
// earlier open: free to take), "released" (no owner).
const char* LeaseState(const LeaseInfo& lease, const LeaseView& view, int64_t now_ms) {
  if (lease.owner.empty()) return "released";
  return Current(lease.open_epoch, lease.expires_at_ms, view, now_ms) ? "held" : "expired";
}

bool InstanceAlive(const InstanceInfo& instance, const LeaseView& view, int64_t now_ms) {
  return Current(instance.open_epoch, instance.expires_at_ms, view, now_ms);
}

// "leases": [...], "instances": [...]
void LeasesJson(wire::JsonWriter& json, const LeaseView& view, int64_t now_ms) {
  json.Key("leases").BeginArray();
  for (const auto& lease : view.leases) {
    json.BeginObject();
    wire::WriteFields(json, lease);
    json.Key("state").String(LeaseState(lease, view, now_ms)).EndObject();
  }
  json.EndArray().Key("instances").BeginArray();
  for (const auto& instance : view.instances) {
    json.BeginObject().Key("instance").String(instance.instance);
    json.Key("expires_at_ms").Int(instance.expires_at_ms);
    json.Key("open_epoch").Uint(instance.open_epoch);
    json.Key("alive").Bool(InstanceAlive(instance, view, now_ms)).EndObject();
  }
  json.EndArray();
}

// The lease table and the instance table (each only when it has rows).
std::string LeaseTables(const LeaseView& view, int64_t now_ms) {
  std::string out;
  if (!view.leases.empty()) {
    Table table({"CONSUMER", "OWNER", "EPOCH", "EXPIRES", "STATE"},
                {false, false, true, false, false});
    for (const auto& lease : view.leases) {
      table.Add({Display(lease.consumer), lease.owner.empty() ? "-" : Display(lease.owner),
                 std::to_string(lease.epoch), FormatTimeMs(lease.expires_at_ms),
                 LeaseState(lease, view, now_ms)});
    }
    out += table.Render();
  }
  if (!view.instances.empty()) {
    Table table({"INSTANCE", "EXPIRES", "ALIVE"});
    for (const auto& instance : view.instances) {
      table.Add({Display(instance.instance), FormatTimeMs(instance.expires_at_ms),
                 InstanceAlive(instance, view, now_ms) ? "yes" : "no"});
    }
    out += (out.empty() ? "" : "\n") + table.Render();
  }
  return out;
}

}  // namespace

int Fail(int code, const std::string& message) {
  std::string line = "wharf: " + message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::fprintf(stderr, "%s\n", line.c_str());
  return code;
}

void Warn(const std::string& message) { Fail(0, "warning: " + message); }

int FailIfUnavailable(const Context& context, const Status& status) {
  if (status.IsBusy()) {
    // The engine's message says why (its connection limit) and to try again.
    return Fail(kExitTryAgain, "the engine holding " + context.db +
                                   " is busy: " + status.message() + " (nothing was changed)");
  }
  if (status.IsIOError() && status.subcode() == Status::SubCode::kTimedOut) {
    return Fail(kExitTryAgain, status.message());  // names the socket, the process, what to check
  }
  return 0;
}

namespace {

// Everything `wharf stat` shows, read in one catch-up of the secondary: the stat snapshot the
// engine's ReadStat also computes (wharf/admin.h), the declared types, leases and instances.
struct StatData {
  StatSnapshot snapshot;
  std::vector<std::string> types;
  LeaseView lease_view;
  int64_t now_ms = 0;
  // From the engine holding the database, when one answers (only it knows replication).
  std::optional<ReplicationMetrics> replication;
};

Status ReadStatData(Inspector& inspector, StatData* data) {
  Status s = inspector.Stat(&data->snapshot);
  if (s.ok()) s = inspector.DeclaredTypes(&data->types);
  if (s.ok()) s = ReadLeases(inspector, &data->lease_view);
  if (!s.ok()) return s;
  data->now_ms = NowMs();
  return Status::OK();
}

// The stat snapshot with every field under the admin socket's name (engine/wire/schema.h, as the
// socket's stat reply has them), and besides them (docs/cli.md): the database's shape, its
// declared types, leases and instances, and replication (null when no engine answered: only the
// running engine knows it).
void PrintStatJson(const Context& context, const Inspector& inspector, const StatData& data) {
  wire::JsonWriter json;
  json.BeginObject().Key("path").String(context.db);
  json.Key("format_version").Uint(inspector.format_version());
  json.Key("partition_count").Uint(inspector.partitions());
  json.Key("ordering").String(OrderingName(inspector.ordering()));
  json.Key("declared_types").BeginArray();
  for (const std::string& type : data.types) json.String(type);
  json.EndArray();
  // Every field of the snapshot. A secondary sees what the engine wrote, which may be ahead of
  // what it acknowledged as durable (a sync in flight): durable_lsn_known is false there.
  wire::WriteFields(json, data.snapshot);
  json.Key("lease_count").Uint(data.lease_view.leases.size());
  LeasesJson(json, data.lease_view, data.now_ms);
  json.Key("replication");
  if (data.replication) {
    wire::WriteObject(json, *data.replication);
  } else {
    json.Null();
  }
  PrintJson(json.EndObject());
}

// "2026-01-01T00:00:00.000Z ok: backup 3 in /backups, point 1234, 1.5 MiB", or what failed.
std::string LastBackupText(const LastBackup& last) {
  if (!last.exists) return "none";
  if (!last.ok) {
    return fmt::format("{} FAILED (into {}): {}", FormatTimeMs(last.finished_ms), last.target,
                       Display(last.error));
  }
  return fmt::format("{} ok: backup {} in {}, point (last fact id) {}, {}",
                     FormatTimeMs(last.finished_ms), last.info.id, last.target,
                     last.info.last_fact_id, FormatBytes(last.info.size_bytes));
}

std::string StatSummary(const Context& context, const Inspector& inspector, const StatData& data) {
  const LeaseView& lease_view = data.lease_view;
  const StatSnapshot& snapshot = data.snapshot;
  Table summary({"", ""});
  summary.Add({"database", context.db});
  summary.Add({"format version", std::to_string(inspector.format_version())});
  // 0 (never restored) is the common case: shown only when a restore started one.
  if (snapshot.incarnation != 0) {
    summary.Add({"incarnation", std::to_string(snapshot.incarnation)});
  }
  summary.Add({"partitions", fmt::format("{} (ordering {})", inspector.partitions(),
                                         OrderingName(inspector.ordering()))});
  summary.Add({"last lsn (written)", std::to_string(snapshot.last_lsn)});
  summary.Add(
      {"facts", fmt::format("{} ({})", snapshot.fact_count, FormatBytes(snapshot.fact_bytes))});
  std::string type_list;
  for (const std::string& type : data.types) type_list += (type_list.empty() ? "" : ", ") + type;
  summary.Add({"declared types", data.types.empty() ? "-" : type_list});
  summary.Add({"consumers", std::to_string(snapshot.consumers.size())});
  size_t held = std::count_if(
      lease_view.leases.begin(), lease_view.leases.end(), [&](const LeaseInfo& lease) {
        return std::string_view(LeaseState(lease, lease_view, data.now_ms)) == "held";
      });
  size_t alive = std::count_if(lease_view.instances.begin(), lease_view.instances.end(),
                               [&](const InstanceInfo& instance) {
                                 return InstanceAlive(instance, lease_view, data.now_ms);
                               });
  summary.Add({"leases", fmt::format("{} ({} held)", lease_view.leases.size(), held)});
  summary.Add({"instances", fmt::format("{} ({} alive)", lease_view.instances.size(), alive)});
  summary.Add({"timers pending", snapshot.timer_count == 0
                                     ? "0"
                                     : fmt::format("{} (next due {})", snapshot.timer_count,
                                                   FormatTimeMs(snapshot.next_timer_due_ms))});
  summary.Add({"dead letters", std::to_string(snapshot.dead_letter_count)});
  uint64_t lost_facts = 0, losing_consumers = 0;
  for (const ConsumerStat& consumer : snapshot.consumers) {
    lost_facts += consumer.lost_fact_count;
    losing_consumers += consumer.lost_fact_count > 0 ? 1 : 0;
  }
  summary.Add({"retention losses", lost_facts == 0 ? "0"
                                                   : fmt::format("{} facts ({} consumers)",
                                                                 lost_facts, losing_consumers)});
  summary.Add({"last backup", LastBackupText(snapshot.last_backup)});
  if (data.replication && data.replication->enabled) {
    bool fenced = false;
    summary.Add({"replication", ReplicationText(*data.replication, &fenced)});
  }
  std::string rendered = summary.Render();
  return rendered.substr(rendered.find('\n') + 1);  // no header row for the summary
}

}  // namespace

int Stat(const Context& context) {
  std::unique_ptr<Inspector> inspector;
  if (int code = OpenInspector(context, &inspector)) return code;
  StatData data;
  Status s = ReadStatData(*inspector, &data);
  if (!s.ok()) return DataError(s);
  ReplicationMetrics replication;
  if (ReadLiveReplication(context, &replication)) data.replication = replication;
  if (context.json) {
    PrintStatJson(context, *inspector, data);
    return kExitOk;
  }
  std::string out = StatSummary(context, *inspector, data);
  Table partition_table({"PARTITION", "FACTS", "BYTES", "FIRST_ID", "LAST_ID"},
                        {true, true, true, true, true});
  for (const auto& partition : data.snapshot.partitions) {
    partition_table.Add({std::to_string(partition.partition), std::to_string(partition.fact_count),
                         std::to_string(partition.bytes), std::to_string(partition.first_id),
                         std::to_string(partition.last_id)});
  }
  out += "\n" + partition_table.Render();
  if (!data.snapshot.consumers.empty()) {
    out += "\n" + ConsumerTable(data.snapshot.consumers, data.now_ms).Render();
    Table lanes = LaneTable(data.snapshot.consumers, data.now_ms);
    if (!lanes.empty()) out += "\n" + lanes.Render();
    Table retrying = RetryTable(data.snapshot.consumers, data.now_ms);
    if (!retrying.empty()) out += "\n" + retrying.Render();
  }
  std::string lease_tables = LeaseTables(data.lease_view, data.now_ms);
  if (!lease_tables.empty()) out += "\n" + lease_tables;
  Print(out);
  return kExitOk;
}

int CursorList(const Context& context) {
  std::unique_ptr<Inspector> inspector;
  if (int code = OpenInspector(context, &inspector)) return code;
  std::vector<ConsumerStat> reports;
  Status s = inspector->ConsumerStats("", &reports);
  if (!s.ok()) return DataError(s);
  int64_t now_ms = NowMs();
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("consumers").BeginArray();
    for (const ConsumerStat& report : reports) ConsumerJson(json, report);
    PrintJson(json.EndArray().EndObject());
    return kExitOk;
  }
  if (reports.empty()) {
    Print("no consumers\n");
    return kExitOk;
  }
  Print(ConsumerTable(reports, now_ms).Render());
  return kExitOk;
}

namespace {

// For an error about a consumer the database does not know: " (did you mean 'X'?) (known: ...)",
// the known ones being those with cursors, a registration, retention losses or dead letters.
std::string KnownConsumers(Inspector& inspector, const std::string& consumer) {
  std::vector<ConsumerStat> reports;
  std::vector<DeadLetter> letters;
  if (!inspector.ConsumerStats("", &reports).ok() || !inspector.DeadLetters("", &letters).ok()) {
    return "";  // the error itself is what matters
  }
  std::vector<std::string> known;
  for (const ConsumerStat& report : reports) known.push_back(report.consumer);
  for (const DeadLetter& letter : letters) known.push_back(letter.consumer);
  std::sort(known.begin(), known.end());
  known.erase(std::unique(known.begin(), known.end()), known.end());
  return DidYouMean(consumer, known) + " (known consumers: " + NameList(known) + ")";
}

}  // namespace

int CursorGet(const Context& context, const std::string& consumer) {
  if (consumer.empty()) return Fail(kExitError, "the consumer id is empty");
  std::unique_ptr<Inspector> inspector;
  if (int code = OpenInspector(context, &inspector)) return code;
  std::vector<ConsumerStat> reports;
  Status s = inspector->ConsumerStats(consumer, &reports);
  if (!s.ok()) return DataError(s);
  if (reports.empty()) {
    return Fail(kExitError, "consumer '" + consumer + "' has no cursors" +
                                KnownConsumers(*inspector, consumer));
  }
  int64_t now_ms = NowMs();
  if (context.json) {
    wire::JsonWriter json;
    ConsumerJson(json, reports[0]);
    PrintJson(json);
    return kExitOk;
  }
  Table table({"PARTITION", "CURSOR", "EPOCH", "LAG_FACTS", "BEHIND_FACTS", "OLDEST_AGE_MS"},
              {true, true, true, true, true, true});
  for (const ConsumerPartitionStat& lane : reports[0].partitions) {
    table.Add({std::to_string(lane.partition), lane.has_cursor ? std::to_string(lane.fact_id) : "-",
               lane.has_cursor ? std::to_string(lane.epoch) : "-", std::to_string(lane.lag_facts),
               std::to_string(lane.facts_behind), Age(lane.oldest_commit_ms, now_ms)});
  }
  Print(fmt::format("consumer {}: {} facts to deliver ({} facts behind in all)\n", consumer,
                    reports[0].lag_facts, reports[0].facts_behind) +
        table.Render());
  return kExitOk;
}

namespace {

// Merges the facts of several partitions in id order, reading each in bounded chunks.
class FactMerger {
 public:
  FactMerger(Inspector* inspector, const std::vector<uint32_t>& partitions, uint64_t from_id)
      : inspector_(inspector) {
    for (uint32_t partition : partitions) lanes_.push_back(Lane{partition, from_id, {}, 0, false});
  }
  // Sets every lane to continue after `last_id` (used after printing the last facts).
  void ContinueAfter(uint64_t last_id) {
    for (Lane& lane : lanes_) lane = Lane{lane.partition, last_id + 1, {}, 0, false};
  }
  // New facts may have arrived (after a catch-up): exhausted lanes are read again.
  void Rearm() {
    for (Lane& lane : lanes_) lane.exhausted = false;
  }
  // The next fact in id order; *found is false when every lane is exhausted.
  Status Next(Fact* fact, bool* found) {
    Lane* best = nullptr;
    for (Lane& lane : lanes_) {
      if (lane.index == lane.buffer.size() && !lane.exhausted) {
        Status s = Refill(&lane);
        if (!s.ok()) return s;
      }
      if (lane.index == lane.buffer.size()) continue;
      if (best == nullptr || lane.buffer[lane.index].id < best->buffer[best->index].id) {
        best = &lane;
      }
    }
    *found = best != nullptr;
    if (best != nullptr) *fact = std::move(best->buffer[best->index++]);
    return Status::OK();
  }

 private:
  struct Lane {
    uint32_t partition;
    uint64_t next_id;
    std::vector<Fact> buffer;
    size_t index;
    bool exhausted;
  };
  Status Refill(Lane* lane) {
    lane->buffer.clear();
    lane->index = 0;
    Status s =
        inspector_->ReadFacts(lane->partition, lane->next_id, kTailChunkFacts, &lane->buffer);
    if (!s.ok()) return s;
    if (lane->buffer.empty()) {
      lane->exhausted = true;
    } else {
      lane->next_id = lane->buffer.back().id + 1;
    }
    return Status::OK();
  }

  Inspector* inspector_;
  std::vector<Lane> lanes_;
};

bool Matches(const TailOptions& options, const Fact& fact) {
  return options.types.empty() ||
         std::find(options.types.begin(), options.types.end(), fact.type) != options.types.end();
}

// Prints facts as tail shows them: as stored. The inspector reads the store, and upcasters are the
// application's code (Engine::RegisterUpcaster), so the payload is the stored one and `v` its
// stored version, never the declared version consumers get. A fact stored below its type's
// declared version says so on its line ("v=1 (stored; declared 2)"); unless --as-stored asked
// for exactly this, a note on stderr says once what consumers get instead.
class FactPrinter {
 public:
  FactPrinter(const Context& context, bool as_stored, const std::vector<DeclaredType>& types)
      : context_(context), as_stored_(as_stored) {
    for (const DeclaredType& type : types) declared_[type.name] = type.version;
  }

  void Print(const Fact& fact) {
    auto it = declared_.find(fact.type);
    const uint32_t declared = it == declared_.end() ? fact.v : it->second;
    if (fact.v < declared && !as_stored_ && !noted_) {
      noted_ = true;
      std::fprintf(stderr,
                   "wharf: note: fact %llu (%s) is shown as stored, at version %u; its type is "
                   "declared at version %u, and consumers get it upcast by the application's "
                   "upcasters, which this command does not have (--as-stored: the stored payload "
                   "and version, without this note)\n",
                   static_cast<unsigned long long>(fact.id), Display(fact.type, 80).c_str(), fact.v,
                   declared);
    }
    PrintFact(fact, declared);
  }

 private:
  void PrintFact(const Fact& fact, uint32_t declared);

  const Context& context_;
  const bool as_stored_;
  std::map<std::string, uint32_t, std::less<>> declared_;  // type -> declared version
  bool noted_ = false;
};

void FactPrinter::PrintFact(const Fact& fact, uint32_t declared) {
  const Context& context = context_;
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("id").Uint(fact.id).Key("type").String(fact.type);
    json.BytesField("key", fact.key);
    json.Key("partition").Uint(fact.partition).Key("commit_ms").Int(fact.commit_ms);
    json.Key("source").String(fact.source).Key("v").Uint(fact.v).Key("depth").Uint(fact.depth);
    json.Key("headers").BeginArray();
    for (const auto& [name, value] : fact.headers) {
      json.BeginObject().BytesField("name", name).BytesField("value", value).EndObject();
    }
    json.EndArray();
    json.BytesField("payload", fact.payload);
    PrintJson(json.EndObject());
    return;
  }
  const std::string older =
      fact.v < declared ? fmt::format(" (stored; declared {})", declared) : std::string();
  cli::Print(fmt::format("{}  {}  {}  v={}{}  key={}  partition={}  {}\n", fact.id,
                         FormatTimeMs(fact.commit_ms), fact.type, fact.v, older,
                         fact.key.empty() ? "-" : Display(fact.key), fact.partition,
                         Display(fact.payload)));
}

// A --type no fact can have matches nothing: a warning names it with the types that are known
// (declared by a producer, which every fact's type must be, or taken by a registered consumer).
Status WarnOfUnknownTypes(Inspector& inspector, const std::vector<std::string>& types) {
  if (types.empty()) return Status::OK();
  std::vector<std::string> known;
  Status s = inspector.DeclaredTypes(&known);
  std::map<std::string, std::vector<std::string>> consumers;
  if (s.ok()) s = inspector.ConsumerTypes(&consumers);
  if (!s.ok()) return s;
  for (const auto& [consumer, taken] : consumers)
    known.insert(known.end(), taken.begin(), taken.end());
  std::sort(known.begin(), known.end());
  known.erase(std::unique(known.begin(), known.end()), known.end());
  for (const std::string& type : types) {
    if (std::binary_search(known.begin(), known.end(), type)) continue;
    Warn("no fact type '" + type + "' is known in this database" + DidYouMean(type, known) +
         " (known: " + NameList(known) + ")");
  }
  return Status::OK();
}

// Prints the last `limit` matching facts, in id order, and returns the highest id looked at.
Status PrintLastFacts(FactPrinter& printer, Inspector& inspector,
                      const std::vector<uint32_t>& partitions, const TailOptions& options,
                      uint64_t limit, uint64_t* printed) {
  // The last `limit` matching facts of each partition hold the last `limit` overall. Without a
  // type filter they are read directly; with one, each partition is read backwards in chunks.
  std::vector<Fact> facts;
  for (uint32_t partition : partitions) {
    std::vector<Fact> candidates;
    size_t want = static_cast<size_t>(std::min<uint64_t>(limit, SIZE_MAX / 2));
    for (size_t window = std::max<size_t>(want, kTailChunkFacts);; window *= 2) {
      candidates.clear();
      Status s = inspector.ReadLastFacts(partition, window, &candidates);
      if (!s.ok()) return s;
      size_t matching = std::count_if(candidates.begin(), candidates.end(),
                                      [&](const Fact& f) { return Matches(options, f); });
      if (matching >= want || candidates.size() < window || options.types.empty()) break;
    }
    for (Fact& fact : candidates) {
      if (Matches(options, fact)) facts.push_back(std::move(fact));
    }
  }
  std::sort(facts.begin(), facts.end(), [](const Fact& a, const Fact& b) { return a.id < b.id; });
  size_t first = facts.size() > limit ? facts.size() - static_cast<size_t>(limit) : 0;
  for (size_t i = first; i < facts.size(); ++i) printer.Print(facts[i]);
  *printed = facts.size() - first;
  return Status::OK();
}

}  // namespace

int Tail(const Context& context, const TailOptions& options) {
  std::unique_ptr<Inspector> inspector;
  if (int code = OpenInspector(context, &inspector)) return code;
  std::vector<uint32_t> partitions;
  if (options.partition) {
    if (*options.partition >= inspector->partitions()) {
      return Fail(kExitError, fmt::format("--partition {} is out of range: the database has {} "
                                          "partitions (0..{})",
                                          *options.partition, inspector->partitions(),
                                          inspector->partitions() - 1));
    }
    partitions.push_back(*options.partition);
  } else {
    for (uint32_t p = 0; p < inspector->partitions(); ++p) partitions.push_back(p);
  }
  if (Status s = WarnOfUnknownTypes(*inspector, options.types); !s.ok()) return DataError(s);
  std::vector<DeclaredType> types;
  if (Status s = inspector->DeclaredTypeVersions(&types); !s.ok()) return DataError(s);
  FactPrinter printer(context, options.as_stored, types);
  if (options.follow) {
    // SIGINT or SIGTERM ends `tail -f`: it exits 128 + the signal's number, as a shell reports a
    // command a signal killed, after the facts printed so far (each a whole line, flushed).
    CatchStopSignals();
  }
  FactMerger merger(inspector.get(), partitions, options.from_id.value_or(0));
  uint64_t printed = 0;
  uint64_t limit = options.limit.value_or(options.from_id ? 0 : kTailDefaultLimit);
  // Without --from, the last `limit` facts (--limit 0: every fact, read from the start below).
  if (!options.from_id && limit > 0) {
    // Facts written after this read are the ones to follow: remember where the view ends.
    uint64_t last_lsn = 0;
    Status s = inspector->LastLsn(&last_lsn);
    if (s.ok()) s = PrintLastFacts(printer, *inspector, partitions, options, limit, &printed);
    if (!s.ok()) return DataError(s);
    if (!options.follow) return kExitOk;
    merger.ContinueAfter(last_lsn);
    limit = 0;  // following has no limit
  }
  while (true) {
    Fact fact;
    bool found = false;
    while (CaughtStopSignal() == 0 && (limit == 0 || printed < limit)) {
      Status s = merger.Next(&fact, &found);
      if (!s.ok()) return DataError(s);
      if (!found) break;
      if (!Matches(options, fact)) continue;
      printer.Print(fact);
      ++printed;
    }
    if (CaughtStopSignal() != 0) return 128 + CaughtStopSignal();
    if (!options.follow || (limit != 0 && printed >= limit)) return kExitOk;
    for (auto waited = std::chrono::milliseconds(0);
         waited < kFollowInterval && CaughtStopSignal() == 0;
         waited += std::chrono::milliseconds(10)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (CaughtStopSignal() != 0) return 128 + CaughtStopSignal();
    Status s = inspector->CatchUp();
    if (!s.ok()) return DataError(s);
    merger.Rearm();
  }
}

int DeadList(const Context& context, const std::string& consumer) {
  std::unique_ptr<Inspector> inspector;
  if (int code = OpenInspector(context, &inspector)) return code;
  std::vector<DeadLetter> letters;
  Status s = inspector->DeadLetters(consumer, &letters);
  if (!s.ok()) return DataError(s);
  if (!consumer.empty() && letters.empty()) {
    std::vector<CursorInfo> cursors;
    s = inspector->Cursors(consumer, &cursors);
    if (!s.ok()) return DataError(s);
    if (cursors.empty()) {
      return Fail(kExitError, "consumer '" + consumer +
                                  "' does not exist (no cursors and no dead letters)" +
                                  KnownConsumers(*inspector, consumer));
    }
  }
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("dead_letters").BeginArray();
    // As the admin socket's dead_list reply has them (fact.key_hex: the key's bytes); attempt 0
    // for letters written before attempts were recorded. `key` is the key as text when it is
    // printable UTF-8, else lower-case hex, told by key_encoding (as `state scan` gives keys).
    for (const DeadLetter& letter : letters) {
      json.BeginObject();
      wire::WriteFields(json, letter);
      const bool text = IsPrintableText(letter.fact.key);
      json.Key("key").String(text ? letter.fact.key : Hex(letter.fact.key));
      json.Key("key_encoding").String(text ? "text" : "hex");
      json.EndObject();
    }
    PrintJson(json.EndArray().EndObject());
    return kExitOk;
  }
  if (letters.empty()) {
    Print("no dead letters\n");
    return kExitOk;
  }
  // KEY: printable text with \n, \r, \t escaped, else 0x + hex (Display); "-" when empty.
  Table table({"CONSUMER", "FACT_ID", "TYPE", "KEY", "PARTITION", "ATTEMPT", "REASON", "COMMITTED",
               "PAYLOAD"},
              {false, true, false, false, true, true, false, false, false});
  for (const DeadLetter& letter : letters) {
    table.Add({letter.consumer, std::to_string(letter.fact.id), letter.fact.type,
               letter.fact.key.empty() ? "-" : Display(letter.fact.key, 40),
               std::to_string(letter.fact.partition),
               letter.attempt == 0 ? "-" : std::to_string(letter.attempt), Display(letter.reason),
               FormatTimeMs(letter.fact.commit_ms), Display(letter.fact.payload, 60)});
  }
  Print(table.Render());
  return kExitOk;
}

int LeaseList(const Context& context) {
  std::unique_ptr<Inspector> inspector;
  if (int code = OpenInspector(context, &inspector)) return code;
  LeaseView view;
  Status s = ReadLeases(*inspector, &view);
  if (!s.ok()) return DataError(s);
  int64_t now_ms = NowMs();
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject();
    LeasesJson(json, view, now_ms);
    PrintJson(json.EndObject());
    return kExitOk;
  }
  if (view.leases.empty() && view.instances.empty()) {
    Print("no leases\n");
    return kExitOk;
  }
  Print(LeaseTables(view, now_ms));
  return kExitOk;
}

}  // namespace wharf::cli
