// Inspector: read-only access to a database directory for tools (the `wharf` CLI), while an
// application may hold the database open.
//
//   #include <cstdio>
//
//   #include "wharf/inspect.h"
//
//   wharf::Status PrintCursors(const std::string& db_path) {  // held by an application or not
//     std::unique_ptr<wharf::Inspector> inspector;
//     wharf::Status s = wharf::Inspector::Open(db_path, &inspector);
//     if (!s.ok()) return s;
//     std::vector<wharf::CursorInfo> cursors;
//     s = inspector->Cursors("", &cursors);  // every consumer's
//     for (const wharf::CursorInfo& cursor : cursors) {
//       std::printf("%s partition %u: fact %llu\n", cursor.consumer.c_str(), cursor.partition,
//                   (unsigned long long)cursor.fact_id);
//     }
//     return s;
//   }
//
// The database is opened as a RocksDB *secondary* instance: it takes no lock, never writes to the
// primary's files, and sees what the primary has written to its WAL and tables up to the last
// CatchUp(). Its private files (info log, manifest copy) live in a temporary directory that the
// destructor removes. Nothing here writes; to change a database use wharf/admin.h.
//
// What it sees: every write batch the primary has handed to the OS, which may be ahead of what is
// fsynced. LastLsn() is therefore the highest fact id *written*, not the durable LSN the engine
// acknowledged (which only the engine knows): tools report it as "last lsn (written)".
//
// Errors: every record is verified (envelope version and checksum) when read; a mismatch is
// Corruption naming the record, never garbage. A partition out of range is InvalidArgument.
//
// Ownership: Open() hands the caller the only owner of the Inspector; results are copied out into
// the caller's containers (which are replaced, not appended to, unless a method says otherwise).
// Thread safety: not thread-safe; one thread uses an Inspector at a time (distinct Inspectors, even
// of one database, may be used from distinct threads).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/admin.h"
#include "wharf/fact.h"
#include "wharf/options.h"
#include "wharf/status.h"

namespace wharf {

namespace internal {
struct InspectorState;  // engine/store/inspect.cc
}  // namespace internal

// The newest on-disk format version this build of the library reads and writes. A database of a
// newer version is refused (NotSupported) by Engine::Open and Inspector::Open.
uint64_t FormatVersion();

// A runtime instance's heartbeat.
struct InstanceInfo {
  std::string instance;
  int64_t expires_at_ms = 0;
  uint64_t open_epoch = 0;  // the engine open it was written under
};

struct TimerStat {
  uint64_t count = 0;       // timers pending
  int64_t next_due_ms = 0;  // 0 when there is none
};

// What a consumer takes, as its runtime registered it (Inspector::ConsumerTypes): its types, and
// the facts re-emitted for it alone by RetryDeadLetters (which every other consumer skips).
struct TakenFilter {
  std::string consumer;
  std::set<std::string, std::less<>> types;
  bool Takes(const Fact& fact) const;
};

// Facts after a cursor: how many in all, how many the consumer takes, and the commit time of the
// oldest one it takes (the oldest undelivered).
struct Backlog {
  uint64_t fact_count = 0;
  uint64_t taken_count = 0;      // == fact_count without a filter
  int64_t oldest_commit_ms = 0;  // 0 when taken_count == 0
};

class Inspector {
 public:
  // Opens `path` as a secondary and checks it is a Wharf database this build can read.
  //   InvalidArgument  an empty path, or a directory that is not a Wharf database (no Wharf
  //                    column families, no format version)
  //   NotFound         `path` does not exist or holds no database
  //   NotSupported     a newer format version (FormatVersion())
  //   Corruption       the meta records do not verify
  static Status Open(const std::string& path, std::unique_ptr<Inspector>* inspector);
  ~Inspector();
  Inspector(const Inspector&) = delete;
  Inspector& operator=(const Inspector&) = delete;

  // Applies what the primary wrote since the last catch-up (call before a round of reads).
  Status CatchUp();

  const std::string& path() const;
  uint64_t format_version() const;  // of the database (<= FormatVersion())
  uint32_t partitions() const;
  Ordering ordering() const;

  // The highest fact id the primary has written (0: none).
  Status LastLsn(uint64_t* lsn);
  Status DeclaredTypes(std::vector<std::string>* types);
  // The declared types with their versions, in name order.
  Status DeclaredTypeVersions(std::vector<DeclaredType>* types);
  // One entry per partition, in order (a full scan of the outbox). Facts at or below a partition's
  // retention floor are removed (even before compaction drops them) and not counted, here and in
  // BacklogAfter, Stat and ConsumerStats.
  Status PartitionStats(std::vector<PartitionStat>* stats);
  // Facts of `partition` with id > after_id; with a filter, also those it takes (each fact is then
  // decoded: slower than counting keys). `filter` may be null; it is not retained.
  Status BacklogAfter(uint32_t partition, uint64_t after_id, const TakenFilter* filter,
                      Backlog* backlog);
  // The stat snapshot (wharf/admin.h), computed as the engine's ReadStat computes it, over every
  // fact the primary has written: durable_lsn_known is false (a secondary cannot know it) and
  // last_lsn is LastLsn().
  Status Stat(StatSnapshot* snapshot);
  // The consumers with a cursor, a registration or a retention loss (only `consumer` when not
  // empty), by id, with their positions and lag: StatSnapshot::consumers.
  Status ConsumerStats(std::string_view consumer, std::vector<ConsumerStat>* consumers);
  // The registered consumers (by id) and the types each takes.
  Status ConsumerTypes(std::map<std::string, std::vector<std::string>>* consumers);
  // Appends up to `count_max` facts of `partition` with id >= from_id, in id order.
  Status ReadFacts(uint32_t partition, uint64_t from_id, size_t count_max,
                   std::vector<Fact>* facts);
  // Appends the last `count_max` facts of `partition`, in id order.
  Status ReadLastFacts(uint32_t partition, size_t count_max, std::vector<Fact>* facts);

  // All cursors, by consumer then partition; with a non-empty `consumer`, only its own.
  Status Cursors(std::string_view consumer, std::vector<CursorInfo>* cursors);
  // Consumers' leases, by consumer, and instance heartbeats, by instance id. A record that does
  // not decode, or a key of no known shape, is Corruption naming it.
  Status Leases(std::vector<LeaseInfo>* leases, std::vector<InstanceInfo>* instances);
  // Incremented by every open of the database (0 when never recorded). A lease or heartbeat
  // written under an earlier open is void: its writer is gone.
  Status OpenEpoch(uint64_t* open_epoch);
  Status Timers(TimerStat* timers);
  // Dead letters of `consumer` (empty: all), by consumer then fact id.
  Status DeadLetters(std::string_view consumer, std::vector<DeadLetter>* letters);
  Status DeadLetterCount(uint64_t* count);

 private:
  explicit Inspector(std::unique_ptr<internal::InspectorState> state);
  std::unique_ptr<internal::InspectorState> impl_;
};

}  // namespace wharf
