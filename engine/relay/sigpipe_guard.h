// Writing to a socket the peer (or Cancel) closed raises SIGPIPE, whose default action ends the
// process — the application's, since a relay runs inside it. hiredis and OpenSSL write with plain
// write(2), so a sink blocks SIGPIPE on the calling thread while it talks to its broker: the write
// then fails with EPIPE, which the sink reports as a connection error. A SIGPIPE raised meanwhile
// is consumed before the thread's mask is restored, unless one was already pending (then it was
// not ours to take). Installing a process-wide handler instead would change the application's own
// signal disposition.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <ctime>

namespace wharf::internal {

class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) > 0) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_;
  sigset_t previous_;
  bool was_pending_ = false;
};

}  // namespace wharf::internal
