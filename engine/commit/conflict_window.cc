#include "engine/commit/conflict_window.h"

#include "engine/base/assert.h"
#include "engine/base/bytes_text.h"

namespace wharf::internal {

namespace {

// Whether `key` lies in [first, second) (`second` empty: no upper end).
bool InRange(std::string_view key, const std::pair<std::string, std::string>& range) {
  return key >= range.first && (range.second.empty() || key < range.second);
}

}  // namespace

void ConflictWindow::Record(std::string_view key, uint64_t seq) {
  WHARF_DASSERT(order_.empty() || order_.back().seq <= seq);
  auto [it, inserted] = last_write_.try_emplace(std::string(key), seq);
  if (inserted) {
    bytes_ += it->first.size() + kEntryOverheadBytes;
  } else {
    it->second = seq;
    bytes_ += sizeof(Write);
  }
  order_.push_back({&it->first, seq});
  Evict();
}

void ConflictWindow::Skip(uint64_t seq) {
  if (seq > floor_seq_) floor_seq_ = seq;
}

void ConflictWindow::Evict() {
  while (bytes_ > bytes_max_ && !order_.empty()) {
    const Write oldest = order_.front();
    order_.pop_front();
    auto it = last_write_.find(*oldest.key);
    WHARF_DASSERT(it != last_write_.end());
    if (it->second == oldest.seq) {
      // The key's last write kept (a later one would have raised the node's seq): forgetting it
      // forgets that the key changed at oldest.seq, so snapshots below it can no longer be
      // validated. An earlier write of a key written again is forgotten for free: the later
      // entry reports the key to every snapshot the earlier one would have.
      bytes_ -= it->first.size() + kEntryOverheadBytes;
      last_write_.erase(it);
      if (oldest.seq > floor_seq_) floor_seq_ = oldest.seq;
    } else {
      bytes_ -= sizeof(Write);
    }
  }
}

Status ConflictWindow::Validate(const ReadSet& reads) const {
  // A key known to be written since the snapshot is named before the floor is looked at: it says
  // more than "too old".
  for (const std::string& key : reads.keys) {
    auto it = last_write_.find(key);
    if (it != last_write_.end() && it->second > reads.snapshot_seq) return ReadConflict(key, false);
  }
  if (!reads.ranges.empty()) {
    for (auto write = order_.rbegin(); write != order_.rend(); ++write) {
      if (write->seq <= reads.snapshot_seq) break;
      for (const auto& range : reads.ranges) {
        if (InRange(*write->key, range)) return ReadConflict(*write->key, true);
      }
    }
  }
  if (reads.snapshot_seq < floor_seq_) {
    return Status::Conflict(
               "read conflict: the transaction's snapshot is too old to be validated (the "
               "committer keeps the writes of recent commits up to conflict_window_bytes, and "
               "older ones were written since it read); run it again, and keep transactions "
               "short or raise conflict_window_bytes")
        .WithSubCode(Status::SubCode::kReadConflict);
  }
  return Status::OK();
}

Status ReadConflict(std::string_view state_key, bool in_range) {
  const size_t separator = state_key.find('\0');
  WHARF_DASSERT(separator != std::string_view::npos);
  const std::string_view table = state_key.substr(0, separator);
  const std::string_view key = state_key.substr(separator + 1);
  return Status::Conflict("read conflict: key " + DescribeBytes(key) + " of table " +
                          DescribeBytes(table) +
                          (in_range ? ", inside a range this transaction scanned," : "") +
                          " was written by another commit after this transaction read it; "
                          "nothing was written: run the transaction again")
      .WithSubCode(Status::SubCode::kReadConflict);
}

}  // namespace wharf::internal
