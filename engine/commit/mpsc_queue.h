// MpscQueue: the lock-free queue used for hand-offs between threads (producers → committer,
// commit completions → workers).
//
// It is moodycamel::ConcurrentQueue, except in ThreadSanitizer builds: moodycamel synchronizes
// with std::atomic_thread_fence, which TSan does not model, so every hand-off through it would be
// reported as a race. Under TSan the queue is a mutex and a deque with the same interface, which
// lets TSan check everything around the queue (moodycamel itself is model-checked upstream).
//
// Thread safety: every method is thread-safe. Not linearizable (moodycamel's caveat): items of one
// producer come out in order; items of different producers may interleave in any order.
#pragma once

// Always included: moodycamel's lightweightsemaphore.h relies on its macros.
#include <concurrentqueue/concurrentqueue.h>

#include <cstddef>
#include <deque>

#include "engine/base/mutex.h"

namespace wharf::internal {

// Spins before a LightweightSemaphore waiting for a hand-off blocks in the kernel.
inline constexpr int kWakeSpins = 100;

#if defined(WHARF_TSAN)

template <typename T>
class MpscQueue {
 public:
  explicit MpscQueue(size_t /*capacity_hint*/ = 0) {}
  bool enqueue(T item) {
    MutexLock lock(&mutex_);
    items_.push_back(std::move(item));
    return true;
  }
  bool try_dequeue(T& item) {
    MutexLock lock(&mutex_);
    if (items_.empty()) return false;
    item = std::move(items_.front());
    items_.pop_front();
    return true;
  }
  size_t try_dequeue_bulk(T* items, size_t count_max) {
    MutexLock lock(&mutex_);
    size_t count = 0;
    while (count < count_max && !items_.empty()) {
      items[count++] = std::move(items_.front());
      items_.pop_front();
    }
    return count;
  }

 private:
  Mutex mutex_;
  std::deque<T> items_ WHARF_GUARDED_BY(mutex_);
};

#else

template <typename T>
class MpscQueue {
 public:
  explicit MpscQueue(size_t capacity_hint = 32) : queue_(capacity_hint) {}
  bool enqueue(T item) { return queue_.enqueue(std::move(item)); }
  bool try_dequeue(T& item) { return queue_.try_dequeue(item); }
  size_t try_dequeue_bulk(T* items, size_t count_max) {
    return queue_.try_dequeue_bulk(items, count_max);
  }

 private:
  moodycamel::ConcurrentQueue<T> queue_;
};

#endif

}  // namespace wharf::internal
