// Futex wait/wake on a 32-bit atomic, without spinning.
//
// std::atomic<T>::wait in libstdc++ spins and calls sched_yield before it sleeps. With many
// producer threads waiting for their commits on two cores, those spins take the CPU the committer
// needs; a waiter here goes straight to sleep in the kernel.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <ctime>

namespace wharf::internal {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

// Returns once *word != expected (spurious wake-ups are absorbed here).
inline void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
  while (word->load(std::memory_order_acquire) == expected) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
            nullptr, 0);
  }
}

// Sleeps while *word == expected, at most `timeout_us`; returns early on a wake-up (or a spurious
// one): the caller re-checks its condition.
inline void FutexWaitOnce(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_us) {
  if (word->load(std::memory_order_acquire) != expected) return;
  struct timespec timeout {
    .tv_sec = static_cast<time_t>(timeout_us / 1000000),
    .tv_nsec = static_cast<long>(timeout_us % 1000000) * 1000
  };
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, &timeout,
          nullptr, 0);
}

inline void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

}  // namespace wharf::internal
