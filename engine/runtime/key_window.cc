#include "engine/runtime/key_window.h"

#include <algorithm>
#include <climits>

#include "engine/base/assert.h"

namespace wharf::internal {

void KeyWindow::Append(FactPtr fact, bool taken, uint32_t attempts) {
  WHARF_DASSERT(entries_.empty() || fact->id > entries_.back().fact->id);  // id order
  const uint64_t seq = front_seq_ + entries_.size();
  Entry entry;
  entry.attempt = attempts;
  if (!taken) {
    entry.state = State::kSkipped;
  } else {
    auto [it, inserted] = keys_.try_emplace(std::string_view(fact->key), KeyChain{seq, seq});
    if (inserted) {
      entry.state = State::kReady;
      ready_.push(seq);
    } else {
      entry.state = State::kBlocked;
      at(it->second.tail).next_of_key = seq;
      it->second.tail = seq;
    }
  }
  entry.fact = std::move(fact);
  entries_.push_back(std::move(entry));
}

bool KeyWindow::StartNext(int64_t timeout_ms, uint64_t* seq) {
  while (!ready_.empty()) {
    const uint64_t next = ready_.top();
    ready_.pop();
    if (!Holds(next) || at(next).state != State::kReady) continue;  // cleared since
    Entry& entry = at(next);
    entry.state = State::kRunning;
    entry.due_ms = timeout_ms;
    ++entry.attempt;
    ++running_;
    timeouts_.push({timeout_ms, next});
    *seq = next;
    return true;
  }
  return false;
}

void KeyWindow::Finish(uint64_t seq, std::string dead_name, std::string dead_reason) {
  Entry& entry = at(seq);
  WHARF_ASSERT(entry.state == State::kRunning || entry.state == State::kBackoff);
  if (entry.state == State::kRunning) --running_;
  entry.state = State::kFinished;
  entry.delivery.reset();
  entry.dead_name = std::move(dead_name);
  entry.dead_reason = std::move(dead_reason);
  auto it = keys_.find(std::string_view(entry.fact->key));
  WHARF_ASSERT(it != keys_.end() && it->second.head == seq);
  const uint64_t next = entry.next_of_key;
  if (next == kNoSeq) {
    keys_.erase(it);
  } else {
    // The key's next fact is its oldest unfinished one now; the map's key views its bytes from
    // now on (this entry's may be popped once the cursor passes it).
    auto node = keys_.extract(it);
    node.key() = std::string_view(at(next).fact->key);
    node.mapped().head = next;
    keys_.insert(std::move(node));
    WHARF_DASSERT(at(next).state == State::kBlocked);
    at(next).state = State::kReady;
    ready_.push(next);
  }
}

void KeyWindow::Backoff(uint64_t seq, int64_t due_ms) {
  Entry& entry = at(seq);
  WHARF_ASSERT(entry.state == State::kRunning);
  --running_;
  entry.state = State::kBackoff;
  entry.delivery.reset();
  entry.due_ms = due_ms;
  backoff_.push({due_ms, seq});
}

int64_t KeyWindow::ReleaseDue(int64_t now_ms) {
  while (!backoff_.empty()) {
    auto [due_ms, seq] = backoff_.top();
    if (!Holds(seq) || at(seq).state != State::kBackoff || at(seq).due_ms != due_ms) {
      backoff_.pop();  // cleared, or finished while backing off (attempts exhausted)
      continue;
    }
    if (due_ms > now_ms) return due_ms;
    backoff_.pop();
    at(seq).state = State::kReady;
    ready_.push(seq);
  }
  return INT64_MAX;
}

int64_t KeyWindow::TimedOut(int64_t now_ms, std::vector<uint64_t>* out) {
  while (!timeouts_.empty()) {
    auto [due_ms, seq] = timeouts_.top();
    if (!Holds(seq) || at(seq).state != State::kRunning || at(seq).due_ms != due_ms) {
      timeouts_.pop();  // finished or backed off since
      continue;
    }
    if (due_ms > now_ms) return due_ms;
    timeouts_.pop();
    out->push_back(seq);
  }
  return INT64_MAX;
}

uint64_t KeyWindow::SeqAfter(uint64_t fact_id) const {
  // The usual question: the lane's cursor, which PopBefore keeps just before the front.
  if (entries_.empty() || entries_.front().fact->id > fact_id) return front_seq_;
  auto it = std::partition_point(entries_.begin(), entries_.end(), [fact_id](const Entry& entry) {
    return entry.fact->id <= fact_id;
  });
  return front_seq_ + static_cast<uint64_t>(it - entries_.begin());
}

size_t KeyWindow::FinishedFrom(uint64_t from_seq) const {
  size_t count = 0;
  for (size_t i = from_seq - front_seq_; i < entries_.size(); ++i) {
    const State state = entries_[i].state;
    if (state != State::kFinished && state != State::kSkipped) break;
    ++count;
  }
  return count;
}

void KeyWindow::PopBefore(uint64_t seq) {
  while (front_seq_ < seq) {
    WHARF_ASSERT(!entries_.empty());
    const State state = entries_.front().state;
    WHARF_ASSERT(state == State::kFinished || state == State::kSkipped);
    entries_.pop_front();
    ++front_seq_;
  }
}

std::vector<std::shared_ptr<DeliveryState>> KeyWindow::Clear() {
  std::vector<std::shared_ptr<DeliveryState>> running;
  for (Entry& entry : entries_) {
    if (entry.state == State::kRunning && entry.delivery) running.push_back(entry.delivery);
  }
  front_seq_ += entries_.size();  // seqs are never reused: stale deliveries match nothing
  keys_.clear();                  // first: its keys view the entries' facts
  entries_.clear();
  running_ = 0;
  ready_ = {};
  backoff_ = {};
  timeouts_ = {};
  return running;
}

}  // namespace wharf::internal
