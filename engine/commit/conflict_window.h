// ConflictWindow: the state keys that recent commits wrote, with the RocksDB sequence number of
// the group that wrote them, so the committer can tell whether a transaction's reads are still
// current (optimistic concurrency control, validated backwards against commits after the
// transaction's snapshot).
//
// Bounded: at most `bytes_max` bytes are kept (each key costs its size plus kEntryOverheadBytes).
// The oldest writes are forgotten first; `floor_seq` is then raised to the last forgotten one, and
// a transaction whose snapshot is below it cannot be validated (refused: "snapshot too old").
// Groups the committer writes while nobody could validate against them (no transaction that read
// is open) are not recorded key by key: they only raise the floor (Skip).
//
// Invariant: for every state key k written by a group with sequence number w, either the window
// holds k with a sequence number >= w, or floor_seq >= w. So a write after a snapshot s (w > s) is
// always seen: as the key, or as s < floor_seq.
//
// Thread safety: none; the committer uses it under its write mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/commit/read_set.h"
#include "wharf/status.h"

namespace wharf::internal {

class ConflictWindow {
 public:
  // What a kept key costs beyond its bytes: its hash node and its place in the order (measured
  // with libstdc++: about 56 bytes of node, 16 of order entry).
  static constexpr size_t kEntryOverheadBytes = 72;

  explicit ConflictWindow(uint64_t bytes_max) : bytes_max_(bytes_max) {}

  // `key` was written by the group with sequence number `seq` (seq never decreases from one call
  // to the next).
  void Record(std::string_view key, uint64_t seq);
  // The group `seq` was written and its keys are not recorded.
  void Skip(uint64_t seq);
  // OK when no key or range of `reads` was written after reads.snapshot_seq; Conflict with subcode
  // kReadConflict naming the table and key otherwise, or when the snapshot is below the floor.
  Status Validate(const ReadSet& reads) const;

  uint64_t floor_seq() const { return floor_seq_; }
  uint64_t bytes() const { return bytes_; }
  size_t keys() const { return last_write_.size(); }

 private:
  void Evict();

  const uint64_t bytes_max_;
  uint64_t bytes_ = 0;
  uint64_t floor_seq_ = 0;
  // The last group that wrote each key kept.
  std::unordered_map<std::string, uint64_t> last_write_;
  // Every write kept, oldest first (a key written again appears again): eviction order, and the
  // writes after a snapshot for range validation (walked from the newest).
  struct Write {
    const std::string* key;  // in last_write_: a node lives until its last entry here is evicted
    uint64_t seq;
  };
  std::deque<Write> order_;
};

// The message of a read conflict on state key `state_key` (table · 0x00 · key); `in_range`: found
// inside a scanned range rather than read as a key.
Status ReadConflict(std::string_view state_key, bool in_range);

}  // namespace wharf::internal
