#include "engine/admin/socket/ops.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "wharf/admin.h"
#include "wharf/backup.h"
#include "wharf/metrics.h"

namespace wharf::internal::admin_socket {
namespace {

// One page of a state scan: rows until the limit or until their bytes reach
// kStateScanReplyBytesMax (a reply is held whole in memory on both sides), then where to resume.
Status ScanPage(Engine& engine, const Request& request, Reply* reply) {
  KeyRange range;
  range.from = request.key_from;
  range.to = request.key_to;
  size_t bytes = 0;
  ScanResult result;
  Status s = engine.Scan(
      request.table, range, static_cast<size_t>(request.limit),
      [&](std::string_view key, std::string_view value) {
        reply->rows.emplace_back(key, value);
        bytes += key.size() + value.size();
        return bytes < kStateScanReplyBytesMax;
      },
      &result);
  if (!s.ok()) {
    reply->rows.clear();
    return s;
  }
  reply->more = result.more;
  if (result.more) {
    // Where the rows taken end: the row the callback stopped at was handed over, and is here.
    reply->resume_from = reply->rows.empty() ? result.resume_from : reply->rows.back().first + '\0';
  }
  return Status::OK();
}

// Engine::MigrateTable for `request`, its progress told to `progress` (when asked) and its rate
// bound kept here: the wait between batches checks `stop` every few milliseconds.
Status Migrate(Engine& engine, const Request& request, const ProgressSink& progress,
               const StopCheck& stop, MigrateReport* report) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kStopCheckEvery = std::chrono::milliseconds(20);
  MigrateOptions options;
  options.from = request.key_from;
  options.batch_rows = static_cast<size_t>(request.batch_rows);
  options.dry_run = request.dry_run;
  const Clock::time_point started = Clock::now();
  options.progress = [&](const MigrateReport& so_far) {
    if (request.progress && progress) progress(so_far.rows, 0);
    if (request.rows_per_second > 0 && !request.dry_run) {
      const Clock::time_point due =
          started +
          std::chrono::microseconds(so_far.migrated * 1'000'000 / request.rows_per_second);
      for (Clock::time_point now = Clock::now(); now < due; now = Clock::now()) {
        if (stop && stop()) return false;
        std::this_thread::sleep_for(std::min<Clock::duration>(
            due - now, std::chrono::duration_cast<Clock::duration>(kStopCheckEvery)));
      }
    }
    return !(stop && stop());
  };
  return engine.MigrateTable(request.table, options, report);
}

}  // namespace

std::string Execute(Engine& engine, const Request& request, const ProgressSink& progress,
                    const StopCheck& stop) {
  Reply reply;
  switch (request.op) {
    case Op::kHello:
      reply.version = kProtocolVersion;
      // Absolute, so that a client in another directory can tell which database this is.
      if (char* real = ::realpath(engine.path().c_str(), nullptr)) {
        reply.path = real;
        ::free(real);
      } else {
        reply.path = engine.path();
      }
      break;
    case Op::kCursorList:
      reply.status = ListCursors(engine, &reply.cursors);
      break;
    case Op::kCursorGet:
      reply.status = GetCursor(engine, request.consumer, request.partition, &reply.fact_id);
      break;
    case Op::kCursorSet: {
      SetCursorOptions options;
      options.dry_run = request.dry_run;
      reply.status = SetCursor(engine, request.consumer, request.fact_id, options, &reply.moves);
      break;
    }
    case Op::kCursorCopy:
      reply.status = CopyCursor(engine, request.from, request.to, request.force);
      break;
    case Op::kCursorDelete:
      reply.status = DeleteCursor(engine, request.consumer);
      break;
    case Op::kDeadList:
      reply.status = ListDeadLetters(engine, request.consumer, &reply.dead_letters);
      break;
    case Op::kDeadRetry:
      reply.status = RetryDeadLetters(engine, request.consumer, request.fact_ids, &reply.retried);
      break;
    case Op::kDeadPurge:
      reply.status = PurgeDeadLetters(engine, request.consumer, request.fact_ids, &reply.purged);
      break;
    case Op::kLeaseRelease:
      reply.status = ReleaseLease(engine, request.consumer);
      break;
    case Op::kTrim: {
      TrimOptions options;
      options.dry_run = request.dry_run;
      if (request.progress && progress) {
        options.progress = [&](uint32_t done, uint32_t total) { progress(done, total); };
      }
      reply.status = TrimPassed(engine, &reply.trim, options);
      break;
    }
    case Op::kRetentionLosses:
      reply.status = ListRetentionLosses(engine, &reply.losses);
      break;
    case Op::kLeaseList:
      reply.status = ListLeases(engine, &reply.leases);
      break;
    case Op::kStat:
      reply.status = ReadStat(engine, &reply.stat);
      break;
    case Op::kMetrics:
      reply.status = ReadMetrics(engine, &reply.metrics);
      break;
    case Op::kStateGet:
      reply.status = engine.Get(request.table, request.key, &reply.value);
      break;
    case Op::kStateScan:
      reply.status = ScanPage(engine, request, &reply);
      break;
    case Op::kBackup: {
      BackupOptions options;
      options.keep = request.keep;
      options.rate_limit_bytes_per_s = request.rate_limit_bytes_per_s;
      if (request.progress && progress) options.progress = progress;
      reply.status = engine.Backup(request.target, options, &reply.backup);
      break;
    }
    case Op::kMigrate:
      reply.status = Migrate(engine, request, progress, stop, &reply.migrate);
      break;
  }
  return EncodeReply(request.op, reply);
}

}  // namespace wharf::internal::admin_socket
