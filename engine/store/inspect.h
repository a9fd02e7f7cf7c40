// internal::Inspector: read-only access to a database directory for tools (the `wharf` CLI), while
// an application may hold the database open.
//
// The database is opened as a RocksDB *secondary* instance: it takes no lock, never writes to the
// primary's files, and sees what the primary has written to its WAL and tables up to the last
// CatchUp(). Its private files (info log, manifest copy) live in a temporary directory removed by
// the destructor. Nothing here goes through the committer, because nothing here writes.
//
// What a secondary sees: every write batch the primary has handed to the OS, which may be ahead of
// what is fsynced. The primary stores meta `last_lsn` in the same batch as the facts, so
// LastLsn() is the highest fact id *written*, not the durable LSN the engine acknowledged (which
// only the engine knows): tools report it as "last lsn (written)" and never as durable.
//
// Every record is verified (envelope version and checksum) when read: a mismatch is Corruption
// naming the record, never garbage.
//
// Thread safety: not thread-safe; one thread uses an Inspector at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/admin.h"
#include "wharf/fact.h"
#include "wharf/inspect.h"
#include "wharf/options.h"
#include "wharf/status.h"

namespace rocksdb {
class DB;
class Env;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace wharf::internal {

// The result types (PartitionStat, LeaseInfo, InstanceInfo, TimerStat, TakenFilter, Backlog) are
// public: wharf/inspect.h, whose wharf::Inspector wraps this one.

class Inspector {
 public:
  // Opens `path` as a secondary and checks it is a Wharf database this build can read.
  //   NotFound      `path` does not exist or holds no database
  //   InvalidArgument  a database that is not Wharf's (no meta family or no format version)
  //   NotSupported  a newer format version
  //   Corruption    the meta records do not verify
  static Status Open(const std::string& path, std::unique_ptr<Inspector>* inspector);
  ~Inspector();
  Inspector(const Inspector&) = delete;
  Inspector& operator=(const Inspector&) = delete;

  // Applies what the primary wrote since the last catch-up (call before a round of reads).
  Status CatchUp();

  const std::string& path() const { return path_; }
  uint64_t format_version() const { return format_version_; }
  uint32_t partitions() const { return partitions_; }
  Ordering ordering() const { return ordering_; }

  // Meta `last_lsn`: the highest fact id the primary has written.
  Status LastLsn(uint64_t* lsn);
  Status DeclaredTypes(std::vector<std::string>* types);
  // One entry per partition, in order (a full scan of the outbox with bounded iterators).
  Status PartitionStats(std::vector<PartitionStat>* stats);
  // Facts of `partition` after `after_id` (with id > after_id); with a filter, also those it takes
  // (each fact is then decoded: slower than counting keys).
  Status BacklogAfter(uint32_t partition, uint64_t after_id, const TakenFilter* filter,
                      Backlog* backlog);
  // The registered consumers (by id) and the types each takes.
  Status ConsumerTypes(std::map<std::string, std::vector<std::string>>* consumers);
  // Up to `count_max` facts of `partition` with id >= from_id, in id order.
  Status ReadFacts(uint32_t partition, uint64_t from_id, size_t count_max,
                   std::vector<Fact>* facts);
  // The last `count_max` facts of `partition`, in id order.
  Status ReadLastFacts(uint32_t partition, size_t count_max, std::vector<Fact>* facts);

  // All cursors, by consumer then partition; with a non-empty `consumer`, only its own.
  Status Cursors(std::string_view consumer, std::vector<CursorInfo>* cursors);
  // Consumers' leases, by consumer, and instance heartbeats, by instance id. A record that does
  // not decode, or a key of no known shape, is Corruption naming it.
  Status Leases(std::vector<LeaseInfo>* leases, std::vector<InstanceInfo>* instances);
  // Meta `open_epoch`: incremented by every open of the database (0 when absent). A lease or
  // heartbeat written under an earlier open is void: its writer is gone.
  Status OpenEpoch(uint64_t* open_epoch);
  Status Timers(TimerStat* timers);
  // Dead letters of `consumer` (empty: all), by consumer then fact id.
  Status DeadLetters(std::string_view consumer, std::vector<DeadLetter>* letters);
  Status DeadLetterCount(uint64_t* count);

 private:
  Inspector() = default;
  Status LoadMeta();
  Status GetMeta(const std::string& key, std::string* body, bool* found);

  std::string path_;
  std::string secondary_path_;
  std::unique_ptr<rocksdb::Env> env_;  // reads live WALs up to their writer's end (wal_tail_fs)
  std::unique_ptr<rocksdb::DB> db_;
  // Indexed by Cf; the default family (unused by Wharf) is kept apart.
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  rocksdb::ColumnFamilyHandle* default_handle_ = nullptr;
  uint64_t format_version_ = 0;
  uint32_t partitions_ = 0;
  Ordering ordering_ = Ordering::kPartition;
};

}  // namespace wharf::internal
