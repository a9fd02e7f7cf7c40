// ReadSet: what a transaction read, for the committer to validate (serializable isolation).
//
// A transaction reads from one RocksDB snapshot; `snapshot_seq` is its sequence number. Keys and
// ranges are state-family keys (tables::state: table · 0x00 · key). At commit the committer
// refuses the transaction when a commit after the snapshot wrote one of the keys or a key inside
// one of the ranges (ConflictWindow::Validate).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace wharf::internal {

struct ReadSet {
  uint64_t snapshot_seq = 0;
  std::vector<std::string> keys;
  // [first, second): `second` empty means to the end of the family (never produced for a table:
  // a table's ranges end at its own end, table · 0x01).
  std::vector<std::pair<std::string, std::string>> ranges;
  size_t bytes = 0;  // of keys and ranges, bounded by kTxnBytesMax

  bool empty() const { return keys.empty() && ranges.empty(); }
};

}  // namespace wharf::internal
