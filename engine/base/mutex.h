// Mutex, SharedMutex and their scoped locks, annotated for clang's thread-safety analysis
// (-Wthread-safety, on in every clang build: the asan and tsan presets): a member declared
// WHARF_GUARDED_BY(mu_) may only be touched with mu_ held, a function declared WHARF_REQUIRES(mu_)
// only be called with it held, and the compiler checks both, as leveldb's thread annotations and
// abseil's Mutex do. GCC ignores the annotations.
//
// Thread safety: as std::mutex and std::shared_mutex, which they wrap. (Locks waited on with a
// condition variable stay std::mutex until a condition wrapper joins these.)
#pragma once

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

 private:
  std::mutex mutex_;

  // --- Try-locking (the committer's inline commit takes its write mutex only when free). ---
 public:
  // True when it took the mutex (then Unlock it); false, without waiting, when it is held.
  bool TryLock() WHARF_TRY_ACQUIRE(true) { return mutex_.try_lock(); }
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
