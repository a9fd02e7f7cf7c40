// Options of the engine. One vocabulary across the C++ structs, the C ABI's "key=value;..." strings
// and the CLI flags: each field below is named exactly as its string key.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "wharf/fact.h"
#include "wharf/status.h"

namespace wharf {

// `durability`: when a commit is acknowledged.
enum class Durability : uint8_t {
  kSync,        // "sync" (default): after fdatasync of the WAL completed. Survives power loss.
  kBuffered,    // "buffered": after the write reached the OS; synced every buffered_sync_ms.
                // A power loss may lose the last buffered_sync_ms of acknowledged commits (and
                // leave a gap in fact ids; an id is never handed out twice). Consumers see a fact
                // only once synced, up to buffered_sync_ms after its commit.
  kReplicated,  // "replicated": after fdatasync of the WAL *and* the replication stream's
                // acknowledgement of the commit's group (`replicate` must be set). Survives the
                // loss of the machine. Consumers see a fact only once both are in.
};

// `replicate_mode`: how groups are shipped to the replication stream.
enum class ReplicateMode : uint8_t {
  kSync,   // "sync": a commit waits for the stream (what durability=replicated means)
  kAsync,  // "async": acknowledged locally, shipped behind (durability=sync with `replicate`)
};

// `io`: how syncs are issued.
enum class IoBackend : uint8_t {
  kAuto,   // "auto" (default): io_uring when the kernel allows it, else posix
  kUring,  // "uring": io_uring; Open fails with NotSupported when unavailable
  kPosix,  // "posix": fdatasync on a dedicated thread
};

// `when_full`: what a producer does when the commit queue holds queue_capacity transactions.
enum class WhenFull : uint8_t {
  kBlock,  // "block" (default): wait for room
  kError,  // "error": the commit returns Status::Busy at once
};

// `ordering`: of an outbox (EngineOptions::ordering), how facts without a key are placed (keyed
// facts always go to their key's partition); of a consumer (ConsumerOptions::ordering), the order
// it delivers in.
enum class Ordering : uint8_t {
  kPartition,  // "partition" (default): unkeyed facts go to partition 0; a consumer delivers in
               // id order within each partition, the partitions in parallel
  kGlobal,     // "global": unkeyed facts go to partition 0 as well; a consumer delivers in one id
               // order over every partition (one lane)
  kNone,       // "none": unkeyed facts are spread over all partitions; a consumer delivers as
               // with partition
};

// Limits on what a transaction may carry. Inputs outside them are refused with InvalidArgument.
inline constexpr size_t kTypeBytesMax = 255;
inline constexpr size_t kTableBytesMax = 255;
inline constexpr size_t kKeyBytesMax = 4096;
inline constexpr size_t kValueBytesMax = 16u << 20;  // state values and fact payloads: 16 MiB
inline constexpr size_t kHeaderCountMax = 64;        // headers per fact
inline constexpr size_t kTxnBytesMax = 64u << 20;    // everything one transaction carries
inline constexpr uint32_t kPartitionsMax = 4096;
// The textfile writer's shortest interval (metrics_interval_ms).
inline constexpr uint32_t kMetricsIntervalMsMin = 100;

// What a new database gets when `partitions` is left at 0.
inline constexpr uint32_t kDefaultPartitions = 16;

struct EngineOptions {
  // `partitions`: partitions of the outbox, fixed when the database is created (1..4096).
  // 0 (the default): the stored value, or kDefaultPartitions (16) when the database is created.
  // Any other value is explicit: opening an existing database with a different count fails with
  // InvalidArgument naming both ("database has 2 partitions; partitions=16 cannot change it").
  uint32_t partitions = 0;
  // `ordering`: the outbox's ordering declaration, fixed at creation like partitions. Empty (the
  // default): the stored value, or Ordering::kPartition when the database is created. A value set
  // explicitly that differs from the stored one fails the open with InvalidArgument naming both.
  std::optional<Ordering> ordering;
  // `durability`, `io`: see the enums.
  Durability durability = Durability::kSync;
  IoBackend io = IoBackend::kAuto;
  // `queue_capacity`: transactions waiting for the committer, at most (>= 1).
  uint32_t queue_capacity = 4096;
  // `when_full`: see the enum.
  WhenFull when_full = WhenFull::kBlock;
  // `group_facts_max`: facts written (and synced) as one group, at most. Bounds committer memory.
  uint32_t group_facts_max = 8192;
  // `buffered_sync_ms`: in buffered durability, the interval between syncs.
  uint32_t buffered_sync_ms = 100;
  // `create_if_missing`: create the database when `path` holds none.
  bool create_if_missing = true;
  // `conflict_window_bytes`: what the committer keeps to validate transactions' reads (the keys
  // that recent commits wrote, about 72 bytes each beyond the key), at most. A transaction whose
  // snapshot is older than the oldest write still kept is refused with Conflict, subcode
  // kReadConflict ("snapshot too old"): keep transactions short, or raise this. Kept only while a
  // transaction that read something is open. At least 1 MiB.
  uint64_t conflict_window_bytes = 16u << 20;
  // `tail_cache_facts`: recently durable facts kept in memory per partition for consumers.
  uint32_t tail_cache_facts = 4096;
  // `memtable_bytes`: RocksDB write buffer of the outbox column family (under retention_max_bytes
  // at most 1/32 of the bound).
  uint64_t memtable_bytes = 64u << 20;
  // `block_cache_bytes`: RocksDB's cache of SST blocks, shared by all column families.
  uint64_t block_cache_bytes = 32u << 20;
  // `wal_prefill_bytes`: size of the zero-filled, synced file kept ready for RocksDB's next WAL,
  // so that WAL syncs overwrite allocated blocks instead of growing the file (no size update per
  // sync; about 35 % faster syncs on ext4 here). A background thread writes it once the WAL has
  // taken 1 MiB, and the WAL switches to it when ready or nearly full. Costs up to twice this in
  // disk space (the spare, and the unused zeros of the current WAL). Rounded up to whole MiB;
  // 0 disables it. Small spares switch WALs often (each switch flushes the tiny meta family) but
  // write their zeros in short bursts: 8 MiB against 64 MiB measured higher throughput and a
  // shorter commit tail at 16 producers (README, "WAL spares").
  uint64_t wal_prefill_bytes = 8u << 20;

  // Retention (engine/retention): on an interval, while producers and consumers run, the engine
  // removes the facts every durable consumer has passed, and under a bound those beyond it.
  // `retention_interval_ms`: the interval; 0 turns online retention off (`wharf trim` still works).
  uint32_t retention_interval_ms = 10'000;
  // `retention_max_bytes`: the database directory keeps within this many bytes, every file in it
  // counted (tables, WAL and its spares, MANIFEST, compaction outputs): older facts are removed
  // even if a consumer has not passed them, and each consumer that loses facts is told (trace
  // `retention-dropped`, `wharf stat`). Under it memtables, WAL and table files are sized by the
  // bound (memtable_bytes then only caps the outbox's memtable). 0: no bound; otherwise at least
  // 16 MiB (a smaller bound fails the open with InvalidArgument naming it).
  uint64_t retention_max_bytes = 0;
  // `retention_max_age_ms`: facts committed longer ago than this are removed, as above. 0: no
  // bound.
  uint64_t retention_max_age_ms = 0;

  // `admin_socket`: the Unix domain socket on which the engine serves administration requests
  // (the CLI's write commands while the engine holds the database). "on" (the default):
  // `<path>/admin.sock`; "off": none; anything else: that path. Owner-only (0600); peers of another
  // user are refused, except root.
  std::string admin_socket = "on";

  // Metrics (wharf/metrics.h), served to scrapers; README "Observability".
  // `metrics_listen`: HOST:PORT on which an HTTP listener serves `GET /metrics` (Prometheus text).
  // Empty (the default): none. `127.0.0.1:9464` keeps it on the machine; port 0 takes any free
  // port. IPv6 hosts in brackets (`[::1]:9464`). A bind failure fails Open with IOError.
  std::string metrics_listen;
  // `metrics_textfile`: a file rewritten (write, fsync, rename) with the Prometheus text every
  // metrics_interval_ms, at open and at close, for node-exporter's textfile collector. Empty (the
  // default): none. Its directory must exist at Open (else InvalidArgument); later write failures
  // are reported on stderr, once per kind, and never fail a commit.
  std::string metrics_textfile;
  // `metrics_interval_ms`: the textfile's rewrite interval (>= 100).
  uint32_t metrics_interval_ms = 15'000;

  // Replication (README "Surviving the loss of the machine"): every group of commits the engine
  // writes is also published, in order, to a NATS JetStream stream, with snapshots of the whole
  // database beside it, so that another machine can restore or follow it.
  // `replicate`: nats://host:port, several separated by ',' (a cluster's members). Empty (the
  // default): no replication.
  std::string replicate;
  // `replicate_stream`: the JetStream stream of the groups (subject "<stream>.groups"); the
  // snapshots go to "<stream>_SNAPSHOTS". Letters, digits, '-' and '_'.
  std::string replicate_stream = "wharf";
  // `replicate_mode`: unset (the default) follows `durability`: sync when it is replicated, else
  // async. Set, it must agree with `durability` (InvalidArgument otherwise).
  std::optional<ReplicateMode> replicate_mode;
  // `replicate_timeout_ms`: connecting, and how long a replicated commit waits for the stream's
  // acknowledgement before it fails with a retryable IOError ("outcome unknown").
  // The default outlasts a stream leader's election in a 3-node cluster (5-10 s with 2.9).
  uint32_t replicate_timeout_ms = 15'000;
  // `replicate_replicas`: replicas of the streams when the engine creates them (3 in a 3-node
  // cluster; 1 on a single server).
  uint32_t replicate_replicas = 3;
  // `replicate_user`, `replicate_password`, `replicate_token`: NATS credentials.
  std::string replicate_user;
  std::string replicate_password;
  std::string replicate_token;
  // `replicate_tls` (or any of the files): TLS; `replicate_tls_ca`: PEM CA certificates the server
  // must chain to (empty: the system's); `replicate_tls_cert` + `replicate_tls_key`: a client
  // certificate and key.
  bool replicate_tls = false;
  std::string replicate_tls_ca;
  std::string replicate_tls_cert;
  std::string replicate_tls_key;
  // `replicate_pending_bytes_max`: group bytes published and not yet acknowledged, at most (>= 1
  // MiB): beyond it commits fail with a retryable IOError until the stream catches up, so memory
  // stays bounded while NATS is unreachable.
  uint64_t replicate_pending_bytes_max = 64u << 20;
  // `replicate_snapshot_interval_ms`, `replicate_snapshot_bytes`: a snapshot is uploaded when
  // either has passed since the last one (group bytes shipped since; an interval of 0 turns the
  // time trigger off; bytes: 1 MiB to 1 PiB). The group stream holds at most 4 x
  // replicate_snapshot_bytes (NATS drops its oldest groups beyond that; the engine holds
  // publishing rather than let it drop a group its newest snapshot does not hold), and the
  // snapshots beyond replicate_snapshot_keep are deleted: NATS's disk stays bounded.
  uint64_t replicate_snapshot_interval_ms = 3'600'000;
  uint64_t replicate_snapshot_bytes = 1ull << 30;
  // `replicate_snapshot_keep`: snapshots kept in the stream (>= 1).
  uint32_t replicate_snapshot_keep = 2;

  // Fact types declared when the engine opens, each at its version (Engine::DeclareType; the
  // first_version field is not used): the declarative file's `types:` section. A version below the
  // one the database declares fails the open.
  std::vector<DeclaredType> types;

  // State tables declared when the engine opens, each at its row version (Engine::DeclareTable),
  // after the types: the declarative file's `tables:` section. The migrations between versions
  // are the application's to register (Engine::RegisterMigration) before it reads the tables. A
  // version below the one the database declares fails the open.
  std::vector<DeclaredTable> tables;

  // Keyed partitioning from the payload (the declarative runtime's `partitioning: keyed`): called
  // by Txn::Emit for every fact; returns true and sets *key to use that partition key instead of
  // the one given, false to keep the given key, or sets *error (then Emit fails with
  // InvalidArgument naming the type and the problem, e.g. a missing field or a payload that is
  // not JSON). Must be thread-safe. Empty: keys are taken as given.
  std::function<bool(std::string_view type, std::string_view payload, std::string* key,
                     std::string* error)>
      key_from_payload;
};

// Parses "key=value;key=value" (whitespace around keys and values ignored, empty string = no
// change) into *options, starting from its current values. A key that is absent leaves its field
// as it was, so `partitions` and `ordering` stay "the stored value" unless the string names them
// (`partitions=0` says so explicitly). `config=FILE` applies a declarative
// runtime file (partitions and keyed partitioning; see engine/declarative/model.h) at that point.
// An unknown key or a bad value returns InvalidArgument naming it and leaves *options unchanged.
Status ParseEngineOptions(std::string_view text, EngineOptions* options);

// Checks the metrics options (metrics_listen's HOST:PORT syntax, metrics_interval_ms's range);
// Engine::Open calls it. InvalidArgument naming the option and the value.
Status ValidateMetricsOptions(const EngineOptions& options);

const char* ToString(Durability value);
const char* ToString(ReplicateMode value);
const char* ToString(IoBackend value);
const char* ToString(WhenFull value);
const char* ToString(Ordering value);

}  // namespace wharf
