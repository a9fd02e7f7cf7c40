#include "engine/base/process.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <vector>

#include "engine/base/mutex.h"

namespace wharf::internal {
namespace {

std::atomic<pid_t> g_process_id{0};
std::atomic<pid_t> g_exit_handler_pid{0};  // the process that registered ExitInForkedChild

void RefreshInChild() { g_process_id.store(::getpid(), std::memory_order_relaxed); }

// Registered once, after RocksDB registered its exit handlers: runs before them.
void ExitInForkedChild(int status, void* /*arg*/) {
  if (CurrentProcessId() == g_exit_handler_pid.load(std::memory_order_relaxed)) return;
  std::fflush(nullptr);
  ::_exit(status);
}

}  // namespace

pid_t CurrentProcessId() {
  // Registered on first use: a process that forked before it ever asked reads getpid() here.
  static const bool registered = [] {
    RefreshInChild();
    ::pthread_atfork(nullptr, nullptr, &RefreshInChild);
    return true;
  }();
  (void)registered;
  return g_process_id.load(std::memory_order_relaxed);
}

void NoteEngineOpened() {
  static const bool registered = [] {
    g_exit_handler_pid.store(CurrentProcessId(), std::memory_order_relaxed);
    return ::on_exit(&ExitInForkedChild, nullptr) == 0;
  }();
  (void)registered;
}

void KeepForever(std::shared_ptr<void> object) {
  // Leaked on purpose, with what it holds: nothing kept here may ever be destroyed.
  static Mutex* mutex = new Mutex();
  static auto* kept = new std::vector<std::shared_ptr<void>>();  // under *mutex
  MutexLock lock(mutex);
  kept->push_back(std::move(object));
}

}  // namespace wharf::internal
