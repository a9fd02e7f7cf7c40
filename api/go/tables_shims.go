package wharf

// C shims of tables.go: the progress callback of wharf_migrate_table (in a file without //export,
// since cgo allows C definitions only there). The migration shim is in shims.go, next to the
// upcaster's, since both mark their thread (handler_depth).

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

extern int wharfGoMigrateProgress(void* ctx, wharf_migrate_report* so_far);

static int migrate_progress_shim(void* ctx, const wharf_migrate_report* so_far) {
  return wharfGoMigrateProgress(ctx, (wharf_migrate_report*)so_far);
}

// Called from tables.go (declared there), hence not static. ctx NULL: no progress callback.
wharf_status migrate_table_go(wharf_engine* engine, const char* table, size_t batch_rows,
                              uint64_t rows_per_second, uint8_t dry_run, void* ctx,
                              wharf_migrate_report* report) {
  wharf_migrate_options options = {0};
  options.struct_size = sizeof(options);
  options.batch_rows = batch_rows;
  options.rows_per_second = rows_per_second;
  options.dry_run = dry_run;
  options.progress = ctx != NULL ? migrate_progress_shim : NULL;
  options.progress_ctx = ctx;
  report->struct_size = sizeof(*report);
  return wharf_migrate_table(engine, table, &options, report);
}
*/
import "C"
