package wharf

// C shims of backup.go: the progress and list callbacks handed to the C ABI (in a file without
// //export, since cgo allows C definitions only there).

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

extern wharf_status wharfGoProgress(void* ctx, uint64_t copied_bytes, uint64_t total_bytes);
extern void wharfGoBackupRow(void* ctx, wharf_backup_info* info);

static wharf_status progress_shim(void* ctx, uint64_t copied_bytes, uint64_t total_bytes) {
  return wharfGoProgress(ctx, copied_bytes, total_bytes);
}
static void backup_row_shim(void* ctx, const wharf_backup_info* info) {
  wharfGoBackupRow(ctx, (wharf_backup_info*)info);
}

// Called from backup.go (declared there), hence not static. ctx NULL: no progress callback.
wharf_status backup_go(wharf_engine* engine, const char* target, uint32_t keep,
                       uint64_t rate_limit_bytes_per_s, void* ctx, wharf_backup_info* info) {
  wharf_backup_options options = {0};
  options.struct_size = sizeof(options);
  options.keep = keep;
  options.rate_limit_bytes_per_s = rate_limit_bytes_per_s;
  options.progress = ctx != NULL ? progress_shim : NULL;
  options.progress_ctx = ctx;
  info->struct_size = sizeof(*info);
  return wharf_backup(engine, target, &options, info);
}
wharf_status restore_go(const char* target, const char* destination, uint32_t backup_id,
                        uint8_t force, uint64_t rate_limit_bytes_per_s, void* ctx,
                        wharf_backup_info* info, uint64_t* incarnation) {
  wharf_restore_options options = {0};
  options.struct_size = sizeof(options);
  options.backup_id = backup_id;
  options.force = force;
  options.rate_limit_bytes_per_s = rate_limit_bytes_per_s;
  options.progress = ctx != NULL ? progress_shim : NULL;
  options.progress_ctx = ctx;
  info->struct_size = sizeof(*info);
  return wharf_restore(target, destination, &options, info, incarnation);
}
wharf_status list_backups_go(const char* target, void* ctx) {
  return wharf_list_backups(target, backup_row_shim, ctx);
}
*/
import "C"
