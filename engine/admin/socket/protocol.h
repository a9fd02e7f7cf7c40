// The admin socket's protocol (engine option `admin_socket`; the CLI's write commands on a live
// database): one JSON object per line each way, versioned.
//
//   request   {"v":2,"op":"cursor_set","consumer":"mailer","fact_id":5,"dry_run":false}
//   reply     {"v":2,"ok":true,"result":{"moves":[...]}}
//             {"v":2,"ok":false,"code":"InvalidArgument","subcode":"None","retryable":false,
//              "message":"consumer id is empty","result":{...}}
//   progress  {"v":2,"progress":{"done":3,"total":16}}   (trim, backup and migrate with
//                                                        "progress":true, before its reply)
//
// Each op mirrors one function of wharf/admin.h (metrics: wharf/metrics.h ReadMetrics; state_get
// and state_scan: Engine::Get and Engine::Scan, durable reads outside any transaction; migrate:
// Engine::MigrateTable, run by the engine with the migrations its application registered) with the
// same arguments and results; "result" is present whenever the op has results, also with an error
// (the dead letters retried and the facts trimmed before a failure). Bytes that may be anything
// (fact keys, payloads, header values, dead-letter reasons, a handler's error text, a backup's
// error, a runtime instance id, state keys and values) travel as lower-case hex in fields named
// *_hex. Floating-point values (histogram bounds and sums, seconds) travel in their shortest exact
// form and read back bit for bit; one that is not finite travels as null and reads back as NaN.
// The fields of every result come from one list per type (engine/wire/schema.h), read and written
// by the same code, and the CLI's --json output uses the same lists.
// Every request field is checked like any other input: an unknown op or field, a missing or
// ill-typed field, a number out of range, a bad consumer id, a duplicate field is InvalidArgument
// naming it.
//
// Thread safety: free functions over their arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wharf/admin.h"
#include "wharf/backup.h"
#include "wharf/engine.h"
#include "wharf/metrics.h"
#include "wharf/status.h"

namespace wharf::internal::admin_socket {

// Version 2: the stat reply's `lag_facts` (was `fact_lag`), and both sides refuse a line of
// another version, naming both (the engine: InvalidArgument; the client: NotSupported).
inline constexpr uint32_t kProtocolVersion = 2;
// A request line (without its newline) longer than this is refused.
inline constexpr size_t kRequestBytesMax = 64 * 1024;

enum class Op {
  kHello,            // {} -> {"version","path"}: who answers
  kCursorList,       // ListCursors
  kCursorGet,        // GetCursor: consumer, partition
  kCursorSet,        // SetCursor: consumer, fact_id, [dry_run]
  kCursorCopy,       // CopyCursor: from, to, [force]
  kCursorDelete,     // DeleteCursor: consumer
  kDeadList,         // ListDeadLetters: [consumer] (absent or "": all)
  kDeadRetry,        // RetryDeadLetters: consumer, [fact_ids]
  kDeadPurge,        // PurgeDeadLetters: consumer, [fact_ids]
  kLeaseRelease,     // ReleaseLease: consumer
  kTrim,             // TrimPassed: [dry_run], [progress]
  kRetentionLosses,  // ListRetentionLosses
  kLeaseList,        // ListLeases
  kStat,             // ReadStat
  kMetrics,          // ReadMetrics (wharf/metrics.h): the whole snapshot
  kStateGet,         // Engine::Get: table, key_hex -> value_hex (NotFound when absent)
  kStateScan,        // Engine::Scan: table, [from_hex], [to_hex], limit -> rows, more, resume
  // Engine::Backup (wharf/backup.h): target (absolute), [keep], [rate_limit_bytes_per_s],
  // [progress] -> backup. Runs on a thread of its own (server.h); progress counts bytes.
  kBackup,
  // Engine::MigrateTable: table, [from_hex], [batch_rows], [rows_per_second], [dry_run],
  // [progress] -> the MigrateReport. Runs on a thread of its own (server.h); progress counts the
  // rows visited (total 0: unknown).
  kMigrate,
};
// The last op: tests and the fuzzer go through them all, from 0 to this.
inline constexpr Op kLastOp = Op::kMigrate;
// A state_scan reply stops adding rows once their keys and values hold this many bytes (it holds
// at least one row, whatever its size), and says where to resume: a page of a scan never holds
// more than about this much beyond one row, whatever the limit asked for.
inline constexpr size_t kStateScanReplyBytesMax = 1 << 20;
// "cursor_set" and so on; Op from such a name (false when unknown).
const char* OpName(Op op);
bool OpFromName(std::string_view name, Op* op);

struct Request {
  Op op = Op::kHello;
  std::string consumer;
  std::string from, to;
  uint32_t partition = 0;
  uint64_t fact_id = 0;
  bool force = false;
  bool dry_run = false;
  bool progress = false;  // trim, backup, migrate: progress lines before the reply
  std::vector<uint64_t> fact_ids;
  // state_get, state_scan, migrate: a state table, a key (get), a range [key_from, key_to)
  // ("" = open end; migrate: where to start, key_from) and a row limit (scan).
  std::string table;
  std::string key, key_from, key_to;
  uint64_t limit = 0;
  // backup: where to, how many to keep (0: all), the copy's rate bound (0: none).
  std::string target;
  uint32_t keep = 0;
  uint64_t rate_limit_bytes_per_s = 0;
  // migrate: MigrateOptions::batch_rows (1..kScanLimitMax; its default when absent) and
  // ::rows_per_second (0: no bound).
  uint64_t batch_rows = MigrateOptions().batch_rows;
  uint64_t rows_per_second = 0;
};

// Parses one request line (its newline removed). InvalidArgument naming the problem.
Status ParseRequest(std::string_view line, Request* request);
// The request as one line, newline included (only the fields its op takes).
std::string EncodeRequest(const Request& request);

// A reply: the outcome and the op's results (only those of its op are encoded).
struct Reply {
  Status status;
  uint32_t version = 0;  // hello
  std::string path;      // hello: the database the engine holds
  std::vector<CursorInfo> cursors;
  uint64_t fact_id = 0;
  std::vector<CursorMove> moves;
  std::vector<DeadLetter> dead_letters;
  std::vector<RetriedLetter> retried;
  uint64_t purged = 0;
  TrimReport trim;
  std::vector<RetentionLoss> losses;
  std::vector<LeaseInfo> leases;
  StatSnapshot stat;
  MetricsSnapshot metrics;
  std::string value;  // state_get
  // state_scan: the rows visited, in key order; `more` when rows of the range remain after the
  // last one, then continue from `resume_from` (the last key followed by a 0x00 byte).
  std::vector<std::pair<std::string, std::string>> rows;
  bool more = false;
  std::string resume_from;
  BackupInfo backup;      // backup
  MigrateReport migrate;  // migrate (also with an error: the batches committed before it)
};

// The reply to a request of `op`, one line, newline included.
std::string EncodeReply(Op op, const Reply& reply);
// The reply to a request that could not be parsed (or refused before it was): no result.
std::string EncodeError(const Status& status);
// A progress line, newline included (trim: partitions; backup: bytes copied and to copy;
// migrate: rows visited, total 0).
std::string EncodeProgress(uint64_t done, uint64_t total);

// One line the engine sent in answer to a request of `op` (its newline removed). Exactly one of:
// *progress true with done/total set, or *progress false and *reply filled (reply->status is the
// engine's outcome, with its code, subcode, retryability and message). The returned Status is not
// OK when the line itself is malformed (Internal naming the problem), or NotSupported when it is
// of another protocol version (an engine of another release: the message names both versions).
Status DecodeReply(Op op, std::string_view line, bool* progress, uint64_t* done, uint64_t* total,
                   Reply* reply);
// The same for an op whose progress counts fit 32 bits (trim): larger ones are malformed.
Status DecodeReply(Op op, std::string_view line, bool* progress, uint32_t* done, uint32_t* total,
                   Reply* reply);

}  // namespace wharf::internal::admin_socket
