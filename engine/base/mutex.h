// Mutex, SharedMutex and their scoped locks, annotated for clang's thread-safety analysis
// (-Wthread-safety, on in every clang build: the asan and tsan presets): a member declared
// WHARF_GUARDED_BY(mu_) may only be touched with mu_ held, a function declared WHARF_REQUIRES(mu_)
// only be called with it held, and the compiler checks both, as leveldb's thread annotations and
// abseil's Mutex do. GCC ignores the annotations.
//
// CondVar waits on a Mutex (a std::condition_variable over the Mutex's std::mutex: no
// condition_variable_any indirection on the runtime's waits). RecursiveMutex is for the one lock a
// callback may take again on its own thread (the C API's lent transactions).
//
// Thread safety: as std::mutex, std::recursive_mutex, std::shared_mutex and
// std::condition_variable, which they wrap.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define WHARF_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define WHARF_THREAD_ANNOTATION(x)
#endif

#define WHARF_CAPABILITY(x) WHARF_THREAD_ANNOTATION(capability(x))
#define WHARF_SCOPED_CAPABILITY WHARF_THREAD_ANNOTATION(scoped_lockable)
#define WHARF_GUARDED_BY(x) WHARF_THREAD_ANNOTATION(guarded_by(x))
#define WHARF_REQUIRES(...) WHARF_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define WHARF_ACQUIRE(...) WHARF_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define WHARF_ACQUIRE_SHARED(...) WHARF_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define WHARF_RELEASE(...) WHARF_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define WHARF_RELEASE_SHARED(...) WHARF_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
// Try-locks and the escape hatch (the committer's inline commit, the engine's read guard).
#define WHARF_TRY_ACQUIRE(...) WHARF_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// Turns the analysis off for one function; each use says why it cannot follow the locking.
#define WHARF_NO_THREAD_SAFETY_ANALYSIS WHARF_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace wharf::internal {

class WHARF_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() WHARF_ACQUIRE() { mutex_.lock(); }
  void Unlock() WHARF_RELEASE() { mutex_.unlock(); }
  // True when it took the lock (then Unlock it); false, at once, when another thread holds it.
  bool TryLock() WHARF_TRY_ACQUIRE(true) { return mutex_.try_lock(); }

 private:
  friend class CondVar;  // waits on mutex_ itself
  std::mutex mutex_;
};

// Holds a Mutex for its scope.
class WHARF_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mutex) WHARF_ACQUIRE(mutex) : mutex_(mutex) { mutex_->Lock(); }
  ~MutexLock() WHARF_RELEASE() { mutex_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mutex_;
};

// Holds two distinct Mutexes for its scope, taken in address order: two threads locking the same
// pair, each naming its own first, cannot deadlock (as std::scoped_lock, but checked).
class WHARF_SCOPED_CAPABILITY MutexLockPair {
 public:
  MutexLockPair(Mutex* a, Mutex* b) WHARF_ACQUIRE(a, b)
      : first_(a < b ? a : b), second_(a < b ? b : a) {
    first_->Lock();
    second_->Lock();
  }
  ~MutexLockPair() WHARF_RELEASE() {
    second_->Unlock();
    first_->Unlock();
  }
  MutexLockPair(const MutexLockPair&) = delete;
  MutexLockPair& operator=(const MutexLockPair&) = delete;

 private:
  Mutex* const first_;
  Mutex* const second_;
};

// Waits for a condition on data a Mutex guards; every wait is entered and left with it held. A
// predicate reads that data, so it is declared WHARF_REQUIRES(the mutex), e.g.
//   cv_.Wait(&mu_, [this]() WHARF_REQUIRES(mu_) { return stopping_; });
// The timed forms return the predicate's last value (false: timed out), as std's do.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

  // May return spuriously: the caller re-checks its condition.
  void Wait(Mutex* mu) WHARF_REQUIRES(mu) {
    Adopted held(mu);
    cv_.wait(held.lock);
  }
  template <typename Rep, typename Period>
  void WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout) WHARF_REQUIRES(mu) {
    Adopted held(mu);
    cv_.wait_for(held.lock, timeout);
  }

  // The predicate forms run `pred` with `mu` held, but the analysis cannot tie the predicate's
  // own WHARF_REQUIRES(mu_) to the parameter `mu`, so their bodies are not analysed; the
  // predicates themselves are.
  template <typename Pred>
  void Wait(Mutex* mu, Pred pred) WHARF_REQUIRES(mu) WHARF_NO_THREAD_SAFETY_ANALYSIS {
    Adopted held(mu);
    cv_.wait(held.lock, pred);
  }
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout, Pred pred)
      WHARF_REQUIRES(mu) WHARF_NO_THREAD_SAFETY_ANALYSIS {
    Adopted held(mu);
    return cv_.wait_for(held.lock, timeout, pred);
  }
  template <typename Clock, typename Duration, typename Pred>
  bool WaitUntil(Mutex* mu, std::chrono::time_point<Clock, Duration> deadline, Pred pred)
      WHARF_REQUIRES(mu) WHARF_NO_THREAD_SAFETY_ANALYSIS {
    Adopted held(mu);
    return cv_.wait_until(held.lock, deadline, pred);
  }

 private:
  // The caller's hold on the mutex, lent to std::condition_variable for one wait and handed back
  // (still held) when the wait returns, also by an exception.
  struct Adopted {
    explicit Adopted(Mutex* mu) : lock(mu->mutex_, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    std::unique_lock<std::mutex> lock;
  };
  std::condition_variable cv_;
};

// A Mutex its holder may lock again (each Lock matched by an Unlock). The analysis is per
// function, so a nested acquisition through a callback is not reported.
class WHARF_CAPABILITY("mutex") RecursiveMutex {
 public:
  RecursiveMutex() = default;
  RecursiveMutex(const RecursiveMutex&) = delete;
  RecursiveMutex& operator=(const RecursiveMutex&) = delete;

  void Lock() WHARF_ACQUIRE() { mutex_.lock(); }
  void Unlock() WHARF_RELEASE() { mutex_.unlock(); }

 private:
  std::recursive_mutex mutex_;
};

// Holds a RecursiveMutex for its scope.
class WHARF_SCOPED_CAPABILITY RecursiveMutexLock {
 public:
  explicit RecursiveMutexLock(RecursiveMutex* mutex) WHARF_ACQUIRE(mutex) : mutex_(mutex) {
    mutex_->Lock();
  }
  ~RecursiveMutexLock() WHARF_RELEASE() { mutex_->Unlock(); }
  RecursiveMutexLock(const RecursiveMutexLock&) = delete;
  RecursiveMutexLock& operator=(const RecursiveMutexLock&) = delete;

 private:
  RecursiveMutex* const mutex_;
};

class WHARF_CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() WHARF_ACQUIRE() { mutex_.lock(); }
  void Unlock() WHARF_RELEASE() { mutex_.unlock(); }
  void LockShared() WHARF_ACQUIRE_SHARED() { mutex_.lock_shared(); }
  void UnlockShared() WHARF_RELEASE_SHARED() { mutex_.unlock_shared(); }

 private:
  std::shared_mutex mutex_;
};

// Holds a SharedMutex exclusively for its scope.
class WHARF_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex* mutex) WHARF_ACQUIRE(mutex) : mutex_(mutex) { mutex_->Lock(); }
  ~WriterLock() WHARF_RELEASE() { mutex_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* const mutex_;
};

// Holds a SharedMutex shared for its scope.
class WHARF_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mutex) WHARF_ACQUIRE_SHARED(mutex) : mutex_(mutex) {
    mutex_->LockShared();
  }
  ~ReaderLock() WHARF_RELEASE() { mutex_->UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* const mutex_;
};

// --- Holding the engine open (EngineCore::ReadGuard). ---

// Holds a SharedMutex shared for its scope, like ReaderLock, but can be returned from a function
// (EngineCore::ReadGuard hands one to each reader). The analysis cannot follow a capability
// across a return, so this is not a scoped capability: use it only for a mutex that guards no
// annotated data (it orders readers against a close, it does not protect members).
class [[nodiscard]] SharedHold {
 public:
  // The analysis would see the shared lock still held at the end of the constructor: by design.
  explicit SharedHold(SharedMutex* mutex) WHARF_NO_THREAD_SAFETY_ANALYSIS : mutex_(mutex) {
    mutex_->LockShared();
  }
  // Releases what the constructor took, which the analysis does not know is held.
  ~SharedHold() WHARF_NO_THREAD_SAFETY_ANALYSIS { mutex_->UnlockShared(); }
  SharedHold(const SharedHold&) = delete;
  SharedHold& operator=(const SharedHold&) = delete;

 private:
  SharedMutex* const mutex_;
};

}  // namespace wharf::internal
