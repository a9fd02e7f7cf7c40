// KeyWindow: the facts a concurrent (or asynchronous) subscriber lane holds beyond its cursor, and
// the per-key order in which they are handed to the handler.
//
// Entries are kept in id order, each numbered by a sequence (`seq`, increasing). A fact is
// handed over only when it is the oldest unfinished fact of its key in the window, so facts of
// one key never overlap and are delivered in id order; facts of other keys go on meanwhile. A fact
// that failed stays the oldest of its key while it backs off, so it holds back its key only. The
// lane's cursor may pass the contiguous prefix of finished (or skipped) entries at the front.
//
// Bounded: the lane appends only while size() < its key_window_facts, and hands over at most
// key_concurrency facts at once. Pure bookkeeping: no locking, no I/O (the lane's thread).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/runtime/tail_cache.h"

namespace wharf::internal {

class DeliveryState;

class KeyWindow {
 public:
  enum class State : uint8_t {
    kSkipped,   // the consumer does not take it: finished from the start
    kBlocked,   // an older fact of its key is unfinished
    kReady,     // the oldest unfinished fact of its key: may be handed over
    kRunning,   // in the handler
    kBackoff,   // failed: ready again at due_ms
    kFinished,  // handled, or settled as failed (dead_name says so)
  };
  struct Entry {
    FactPtr fact;
    State state = State::kBlocked;
    uint32_t attempt = 0;  // deliveries so far (counted across restarts for a stored retry)
    int64_t due_ms = 0;    // kRunning: its timeout (SteadyMs); kBackoff: when it is ready again
    std::shared_ptr<DeliveryState> delivery;  // kRunning: the delivery the handler holds
    std::string dead_name;                    // kFinished as failed: its dead letter's name...
    std::string dead_reason;                  // ... and reason
    uint64_t next_of_key = kNoSeq;            // the seq of its key's next unfinished fact
  };
  static constexpr uint64_t kNoSeq = UINT64_MAX;

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  uint32_t running() const { return running_; }
  // Id of the newest fact appended since the window was last empty (0: none).
  uint64_t last_id() const { return entries_.empty() ? 0 : entries_.back().fact->id; }
  uint64_t front_seq() const { return front_seq_; }
  Entry& at(uint64_t seq) { return entries_[seq - front_seq_]; }
  bool Holds(uint64_t seq) const { return seq >= front_seq_ && seq - front_seq_ < entries_.size(); }

  // Appends the next fact (ids increase); `attempts` deliveries of it happened before.
  void Append(FactPtr fact, bool taken, uint32_t attempts);
  // The oldest ready fact, now running until `timeout_ms` (SteadyMs); false when none is ready.
  bool StartNext(int64_t timeout_ms, uint64_t* seq);
  // A running fact finished (handled or settled as failed): the next fact of its key is ready.
  void Finish(uint64_t seq, std::string dead_name = {}, std::string dead_reason = {});
  // A running fact failed and is tried again at `due_ms`.
  void Backoff(uint64_t seq, int64_t due_ms);
  // Facts whose backoff is over become ready. Returns the earliest backoff still pending
  // (INT64_MAX: none).
  int64_t ReleaseDue(int64_t now_ms);
  // Running facts whose timeout passed, oldest deadline first (appended to *out); returns the
  // earliest timeout still pending (INT64_MAX: none). A fact in *out stays running until the
  // lane finishes or backs it off.
  int64_t TimedOut(int64_t now_ms, std::vector<uint64_t>* out);
  // The seq of the first entry whose fact id is above `fact_id` (end: none).
  uint64_t SeqAfter(uint64_t fact_id) const;
  uint64_t end_seq() const { return front_seq_ + entries_.size(); }
  // Entries at the front that are finished or skipped, counted from entry `from_seq` on.
  size_t FinishedFrom(uint64_t from_seq) const;
  // Removes the entries before `seq` (all finished or skipped: the cursor passed them).
  void PopBefore(uint64_t seq);
  // Forgets everything; returns the deliveries still running (the lane abandons them).
  std::vector<std::shared_ptr<DeliveryState>> Clear();

 private:
  std::deque<Entry> entries_;
  uint64_t front_seq_ = 0;  // seq of entries_.front()
  uint32_t running_ = 0;
  // Per key: its unfinished facts, oldest first, chained through Entry::next_of_key (the head is
  // ready, running or backing off; the others are blocked). The map's key views the head fact's
  // key bytes (re-pointed when the head changes), so the map owns no strings and no queues.
  struct KeyChain {
    uint64_t head = kNoSeq;
    uint64_t tail = kNoSeq;
  };
  std::unordered_map<std::string_view, KeyChain> keys_;
  using Due = std::pair<int64_t, uint64_t>;  // (due_ms, seq)
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> ready_;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> backoff_;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> timeouts_;  // lazily cleaned
};

}  // namespace wharf::internal
