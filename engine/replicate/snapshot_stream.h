// SnapshotStream: a database's snapshots in JetStream, the stream "<stream>_SNAPSHOTS". A
// snapshot is one backup (wharf/backup.h) of the database, uploaded file by file; a copy of the
// database is restored from the newest snapshot and the groups after the one it covers
// (GroupReader, ApplyGroup).
//
// Layout (the stream's subjects are "<stream>.snapshots.>"; <id> is 16 random hex digits):
//   <stream>.snapshots.<id>.file   one message per chunk of a file, the files in the manifest's
//                                  order, each file's chunks in order, at most kChunkBytes each
//                                  (an empty file is one empty chunk). Headers:
//                                    Nats-Msg-Id       <id>:<chunk index from 0>
//                                    Wharf-Snapshot    <id>
//                                    Wharf-File        the file's name in the backup target
//                                                      ("shared_checksum/000012_..._789.sst")
//                                    Wharf-Offset      the chunk's first byte in the file
//                                    Wharf-File-Bytes  the file's size
//   <stream>.snapshots.<id>.done   last, once every chunk was stored; its data is the backup's
//                                  manifest (snapshot_manifest.h: every file with its CRC32C).
//                                  Headers: Nats-Msg-Id <id>:done, Wharf-Snapshot, Wharf-Backup-Id,
//                                  Wharf-Group (the last group the snapshot holds),
//                                  Wharf-Last-Fact-Id, Wharf-Database (32 hex), Wharf-Format,
//                                  Wharf-Bytes, Wharf-Files, Wharf-Chunks, Wharf-First-Seq (the
//                                  stream sequence of its first chunk), Wharf-Term (set_term).
// A snapshot without its done message (an upload that failed or was interrupted) does not exist
// for List, Latest and Download; Prune removes what it left.
//
// The stream allows direct gets (AllowDirect): a download reads each chunk by its sequence with
// js_DirectGetMsg (raw bytes; about 4x faster than js_GetMsg's base64 in JSON), from the leader
// (js_GetMsg) when a replica lacks it or the stream was made without AllowDirect. Measured on
// loopback: 64 MiB uploaded in 0.3 s, downloaded in 0.4 s.
//
// Memory: one chunk at a time in both directions (files are streamed, never held whole); the
// manifest (a few KiB; one line per file) is held whole and must fit in kChunkBytes.
//
// Thread safety: one caller at a time per object; one uploader and pruner at a time per stream
// (Prune removes what lies below the oldest kept snapshot, an upload in progress there too).
// Errors: InvalidArgument names the bad argument; NotFound when there is no snapshot (or no backup
// to upload, or the snapshot was pruned meanwhile); Corruption names the file whose bytes do not
// match the manifest's checksum (damage in the backup being uploaded or in the stream); IOError
// names the NATS or file operation that failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "wharf/backup.h"
#include "wharf/status.h"

struct __natsConnection;
struct __jsCtx;

namespace wharf::internal {

// One complete snapshot: its done message.
struct SnapshotInfo {
  std::string id;              // 16 hex digits
  uint32_t backup_id = 0;      // the backup's id in the target it was uploaded from (and in a
                               // download's target)
  uint64_t covered_group = 0;  // the last group it holds; a copy continues at covered_group + 1
  uint64_t last_fact_id = 0;
  std::string database_id;  // 32 hex
  std::string term_hex;     // the primary's term when it was taken (32 hex; "" when unknown)
  uint64_t format_version = 0;
  uint64_t bytes = 0;  // of its files
  uint32_t files = 0;
  uint64_t chunks = 0;
  uint64_t first_sequence = 0;  // stream sequence of its first chunk
  uint64_t done_sequence = 0;   // stream sequence of its done message
  int64_t created_ms = 0;       // when the stream stored its done message (wall clock)
  std::string manifest;         // the backup's manifest, verbatim
};

class SnapshotStream {
 public:
  // The largest chunk: NATS messages are at most 1 MiB by default (max_payload), headers included,
  // and a chunk read back (js_GetMsg) comes base64-encoded in a JSON reply, 4/3 of its size.
  static constexpr size_t kChunkBytes = 512 * 1024;

  // `connection`: borrowed, must outlive this object. `stream`: the group stream's name (the
  // snapshots go to "<stream>_SNAPSHOTS"). `timeout_ms`: each JetStream request's.
  SnapshotStream(__natsConnection* connection, std::string stream, uint32_t timeout_ms = 5000);
  ~SnapshotStream();
  SnapshotStream(const SnapshotStream&) = delete;
  SnapshotStream& operator=(const SnapshotStream&) = delete;

  const std::string& name() const { return name_; }

  // How Upload and Download move bytes (both optional): at most `rate_limit_bytes_per_s` on
  // average (0: as fast as NATS takes them), and `progress(bytes so far, bytes in all)` on the
  // caller's thread after each chunk.
  struct Transfer {
    uint64_t rate_limit_bytes_per_s = 0;
    CopyProgressFn progress;
  };
  void set_transfer(Transfer transfer) { transfer_ = std::move(transfer); }
  // The term the uploads record (header Wharf-Term of the done message): a standby that sees
  // the groups' term change looks for a snapshot of the new term (a primary that rebased).
  void set_term(std::string term_hex) { term_hex_ = std::move(term_hex); }

  // Creates the stream if missing: file storage, `replicas`, discard old, no limits (Prune bounds
  // it), duplicate window 2 min.
  Status Ensure(uint32_t replicas);

  // Uploads backup `backup_id` of the backup target `backup_dir`: its files (checked against the
  // manifest while read: a damaged file is Corruption, and nothing is visible), then the done
  // message. `last_fact_id` and `format_version` must be the backup's own (InvalidArgument
  // otherwise). On success fills `*info` (may be null).
  Status Upload(const std::string& backup_dir, uint32_t backup_id, uint64_t covered_group,
                uint64_t last_fact_id, const std::string& database_id, uint64_t format_version,
                SnapshotInfo* info);

  // Every complete snapshot, oldest first.
  Status List(std::vector<SnapshotInfo>* snapshots);
  // The newest complete snapshot; NotFound when there is none.
  Status Latest(SnapshotInfo* snapshot);

  // Writes `snapshot`'s files into `dest_dir` (created if missing; must be empty) laid out as a
  // backup target holding that one backup (its manifest as meta/<backup_id>, written last), so
  // that wharf::Restore(dest_dir, ...) restores it. Each file's CRC32C is checked as it is
  // written: Corruption naming the file when it does not match (or when chunks are missing).
  // On failure `dest_dir` is emptied again.
  Status Download(const SnapshotInfo& snapshot, const std::string& dest_dir);

  // Removes the snapshots beyond the newest `keep` (>= 1), and what unfinished uploads left below
  // the oldest kept one. `*oldest_kept_group`: the oldest kept snapshot's covered group (0 when
  // there is no snapshot).
  Status Prune(uint32_t keep, uint64_t* oldest_kept_group);

 private:
  Status Js();
  // The newest done message (*found false when the stream holds none).
  Status LastDone(SnapshotInfo* snapshot, bool* found);
  Status Publish(const std::string& subject, const std::string& msg_id,
                 const std::vector<std::pair<const char*, std::string>>& headers, const char* data,
                 size_t bytes, uint64_t* sequence);
  Status UploadFile(const std::string& backup_dir, const std::string& file_name,
                    uint32_t expected_crc, const std::string& id, uint64_t* chunk_index,
                    uint64_t* first_sequence, uint64_t* bytes, std::string* buffer);
  // After each chunk: waits as the rate limit says, then reports progress.
  void Pace(uint64_t bytes_done);
  Status DownloadInto(const SnapshotInfo& snapshot, const std::string& dest_dir);
  // Deletes every message below `below_sequence`, one by one (a purge is not safe on
  // nats-server 2.9: it empties a clustered stream for "below sequence 1", and a node that
  // recovers replays any purge as a full one; nats-server issues 4696 and 4196). Snapshots are
  // few messages (chunks of kChunkBytes), so this stays cheap.
  Status DeleteBelow(uint64_t below_sequence);

  __natsConnection* const connection_;
  const std::string stream_;  // the group stream's name
  const std::string name_;    // this stream's: "<stream>_SNAPSHOTS"
  const uint32_t timeout_ms_;
  __jsCtx* js_ = nullptr;
  Transfer transfer_;
  std::string term_hex_;
  // Of the Upload or Download running.
  std::chrono::steady_clock::time_point transfer_began_;
  uint64_t transfer_bytes_ = 0;
};

}  // namespace wharf::internal
