// Fork safety. fork() copies the memory of every engine and runtime a process holds open, but none
// of their threads, and the child shares the parent's files (its database directory, its admin
// socket). An object made in another process must therefore never be used, closed or destroyed
// normally in a child: that would join threads that do not exist there, unlink the parent's live
// admin socket and write a clean-close record into a database the parent still writes. Engines and
// runtimes remember the process that made them (CurrentProcessId) and, closed in another one,
// abandon themselves (KeepForever) without any effect on files.
#pragma once

#include <sys/types.h>

#include <memory>

namespace wharf::internal {

// The calling process's id. Cached, and refreshed in a forked child (pthread_atfork), so a check
// costs one atomic load. Thread-safe.
pid_t CurrentProcessId();

// Called once an engine opened (its store, and so RocksDB, is open). A process forked after the
// first engine opened (even one closed since) ends at exit() without running the exit handlers
// registered before that: RocksDB's, registered then, join its threads (the periodic-task timer,
// the default environment's thread pools), which exist in the parent only, so a child would hang
// there or crash. The child's stdio buffers are flushed and its exit status kept; exit handlers
// registered later (the child's own, Python's finalization) run first.
void NoteEngineOpened();

// Keeps `object` alive (and reachable, so leak checkers stay quiet) until the process ends, never
// destroying it: what a forked child does with an engine or a runtime it inherited. Thread-safe.
void KeepForever(std::shared_ptr<void> object);

}  // namespace wharf::internal
