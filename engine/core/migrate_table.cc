// Engine::MigrateTable: the rows of a table still at an older version, migrated online in bounded
// batches, each one transaction through the committer (wharf/engine.h).
//
// A batch is a Txn::Scan of batch_rows rows from where the last one ended: the scan lifts the
// rows written at an older version and adds their write-backs to the transaction
// (engine/core/txn_reads.cc), whose commit validates the scanned range, so a row a concurrent
// commit changed is never overwritten with its stale lift: the batch is refused and runs again
// (Transact). Each batch commits whole or not at all: after a power cut every row is at the
// version it had or at the declared one, and readable at the declared one either way.
#include <algorithm>
#include <chrono>
#include <thread>

#include "engine/core/engine_core.h"
#include "engine/core/engine_internal.h"
#include "wharf/engine.h"

namespace wharf {

namespace {

Status CheckMigrateOptions(const MigrateOptions& options) {
  if (options.batch_rows == 0 || options.batch_rows > kScanLimitMax) {
    return Status::InvalidArgument("MigrateTable: batch_rows " +
                                   std::to_string(options.batch_rows) + " is outside 1.." +
                                   std::to_string(kScanLimitMax));
  }
  return Status::OK();
}

}  // namespace

Status Engine::MigrateTable(std::string_view table, const MigrateOptions& options,
                            MigrateReport* report_out) {
  Status s = internal::ValidateName("table name", table, kTableBytesMax);
  if (s.ok()) s = CheckMigrateOptions(options);
  if (s.ok()) s = core_->CheckOpen();
  if (!s.ok()) return s;
  MigrateReport report;
  report.version = core_->TableVersion(table);
  KeyRange range;
  range.from = options.from;
  const auto started = std::chrono::steady_clock::now();
  // At version 1 no row is older: nothing to visit.
  while (report.version > 1) {
    ScanResult scanned;
    size_t migrated = 0;
    auto batch = [&](Txn& txn) {
      internal::TxnRep* rep = internal::EngineInternal::Rep(txn);
      rep->migrating = true;
      Status scan = txn.Scan(
          table, range, options.batch_rows, [](std::string_view, std::string_view) { return true; },
          &scanned);
      migrated = rep->migrated_rows;
      return scan;
    };
    if (options.dry_run) {
      Txn txn = Begin();
      s = batch(txn);  // never committed: its write-backs go with it
    } else {
      s = Transact(batch, nullptr, options.retry);
    }
    if (!s.ok()) break;
    report.rows += scanned.rows;
    report.migrated += migrated;
    ++report.batches;
    if (!scanned.more) {
      report.done = true;
      report.resume_from.clear();
      break;
    }
    report.resume_from = range.from = std::move(scanned.resume_from);
    if (options.progress && !options.progress(report)) break;
    if (options.rows_per_second > 0 && !options.dry_run) {
      // Paced on the rows written: each batch starts when the ones before fit the rate. Waited in
      // slices, so that closing the engine does not wait for a slow pace.
      const auto due = started + std::chrono::microseconds(report.migrated * 1'000'000 /
                                                           options.rows_per_second);
      for (auto now = std::chrono::steady_clock::now(); now < due && s.ok();
           now = std::chrono::steady_clock::now()) {
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            due - now, std::chrono::milliseconds(20)));
        s = core_->CheckOpen();
      }
      if (!s.ok()) break;
    }
  }
  if (report.version == 1) report.done = true;
  if (report_out != nullptr) *report_out = std::move(report);
  return s;
}

}  // namespace wharf
