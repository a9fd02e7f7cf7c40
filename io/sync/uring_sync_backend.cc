#include "io/sync/uring_sync_backend.h"

#include <liburing.h>

#include "engine/base/assert.h"
// <linux/fs.h>, pulled in by liburing.h, defines BLOCK_SIZE; keep it from leaking any further.
#undef BLOCK_SIZE

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/base/thread_name.h"

namespace wharf::io {
namespace {

// Entries of the submission queue, and the most syncs of a round in the kernel at once. liburing
// sizes the completion queue at twice this, so completions can never overflow it.
constexpr unsigned kDepth = 64;
static_assert(kDepth > 0 && (kDepth & (kDepth - 1)) == 0, "io_uring rings are powers of two");

// user_data of the NOP that wakes the reaper for shutdown; never the address of an Op.
constexpr uint64_t kWakeReaper = ~uint64_t{0};

// Thread-safe, unlike strerror.
std::string ErrnoText(int error) {
  WHARF_DASSERT(error > 0);  // an errno, not a negated return code
  WHARF_DASSERT(error < 4096);
  return std::error_code(error, std::generic_category()).message();
}

const char* SetupHint(int error) {
  WHARF_DASSERT(error > 0);  // io_uring_queue_init's -rc, negated back
  WHARF_DASSERT(error < 4096);
  switch (error) {
    case EPERM:
      return " (io_uring disabled by seccomp or sysctl kernel.io_uring_disabled?)";
    case ENOSYS:
      return " (kernel built without io_uring, or io_uring_setup blocked by seccomp?)";
    case ENOMEM:
      return " (RLIMIT_MEMLOCK too low for the ring? kernels before 5.12 charge it)";
    case EMFILE:
    case ENFILE:
      return " (out of file descriptors)";
    case EINVAL:
      return " (kernel too old?)";
    default:
      return "";
  }
}

// Sets up `ring` and checks the opcodes this backend uses. On failure `ring` is torn down again.
Status InitRing(io_uring* ring) {
  WHARF_ASSERT(ring != nullptr);
  WHARF_DASSERT(ring->ring_fd == 0);  // a fresh, zeroed ring: never one set up already
  const int rc = io_uring_queue_init(kDepth, ring, 0);
  WHARF_ASSERT(rc <= 0);  // 0 or a negated errno
  if (rc < 0) {
    return Status::NotSupported("io_uring_setup failed: " + ErrnoText(-rc) + SetupHint(-rc));
  }
  io_uring_probe* probe = io_uring_get_probe_ring(ring);
  if (probe == nullptr) {
    io_uring_queue_exit(ring);
    return Status::NotSupported(
        "io_uring cannot list its supported operations (kernel older than 5.6?)");
  }
  const bool supported = io_uring_opcode_supported(probe, IORING_OP_FSYNC) &&
                         io_uring_opcode_supported(probe, IORING_OP_NOP);
  io_uring_free_probe(probe);
  if (!supported) {
    io_uring_queue_exit(ring);
    return Status::NotSupported("io_uring lacks IORING_OP_FSYNC on this kernel");
  }
  return Status::OK();
}

}  // namespace

struct UringSyncBackend::Impl {
  struct Round;
  enum class Kind : uint8_t { kDataSync, kSync, kNop };
  // One entry of a round; its address is the user_data of its SQE.
  struct Op {
    Round* round;
    int fd;
    Kind kind;
  };
  struct Round {
    std::vector<Op> ops;  // never resized once built: SQEs point into it
    RoundCallback callback;
    size_t next = 0;         // ops[next..] have not been issued yet
    unsigned in_flight = 0;  // issued, completion not seen yet
    int first_error = 0;
    bool finished = false;  // the callback was taken; completions arriving later are stale
  };

  // A finished round's callback, taken under mu and run after mu is released (so that it may
  // submit the next round), with the round itself unless it must stay alive in `retired`.
  struct Finished {
    RoundCallback callback;
    int error = 0;
    std::unique_ptr<Round> done;
  };

  static void Record(Round* r, int error) {
    WHARF_DASSERT(r != nullptr && !r->finished);  // a finished round's error is reported already
    WHARF_DASSERT(error > 0);                     // an errno: 0 would read as success
    if (r->first_error == 0) r->first_error = error;
  }

  // The round's fields are written under mu too; they are not annotated (Round has no mutex).
  bool Queue(Round* r, const Op* op) WHARF_REQUIRES(mu);
  bool Flush(Round* r) WHARF_REQUIRES(mu);
  void IssueMore(Round* r) WHARF_REQUIRES(mu);
  std::optional<Finished> TakeIfDone(Round* r) WHARF_REQUIRES(mu);
  static void RunFinished(std::optional<Finished> finished);
  void OnCompletion(Op* op, int res);
  void Abandon(int error);
  void Reap();

  io_uring ring{};  // SQ side under mu (Queue, Flush); the CQ side belongs to the reaper alone
  internal::Mutex mu;
  internal::CondVar idle;                             // signalled when `round` becomes null
  std::unique_ptr<Round> round WHARF_GUARDED_BY(mu);  // the round in flight, or null
  bool stopping WHARF_GUARDED_BY(mu) = false;         // the destructor runs: no new rounds
  int broken WHARF_GUARDED_BY(mu) = 0;  // errno that made the ring unusable; 0 while it works
  bool reaper_gone WHARF_GUARDED_BY(mu) = false;  // the reaper returned after a fatal wait error
  // Rounds finished after the ring broke. Entries the kernel never consumed may still be submitted
  // by the destructor's wake-up, and their completions must find live (finished) rounds.
  std::vector<std::unique_ptr<Round>> retired WHARF_GUARDED_BY(mu);
  std::thread reaper;
};

// Puts one SQE for `op` (null: the reaper's wake-up NOP) into the SQ. When the SQ is full, submits
// what it holds and retries; false only when that submission failed (the ring is broken).
bool UringSyncBackend::Impl::Queue(Round* r, const Op* op) {
  WHARF_ASSERT(op == nullptr || op->round == r);  // its completion finds the round through it
  // A broken ring takes no more ops (only the destructor's wake-up, which may yet get through).
  WHARF_ASSERT(op == nullptr || broken == 0);
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  if (sqe == nullptr && Flush(r)) sqe = io_uring_get_sqe(&ring);
  if (sqe == nullptr) return false;
  if (op == nullptr) {
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data64(sqe, kWakeReaper);
    return true;
  }
  switch (op->kind) {
    case Kind::kDataSync:
      io_uring_prep_fsync(sqe, op->fd, IORING_FSYNC_DATASYNC);
      break;
    case Kind::kSync:
      io_uring_prep_fsync(sqe, op->fd, 0);
      break;
    case Kind::kNop:
      io_uring_prep_nop(sqe);
      break;
  }
  io_uring_sqe_set_data(sqe, const_cast<Op*>(op));
  return true;
}

// Hands every queued SQE to the kernel. On a fatal error marks the ring broken and takes the
// entries the kernel did not consume out of r's count (they will never complete on their own).
bool UringSyncBackend::Impl::Flush(Round* r) {
  WHARF_DASSERT(r == nullptr || !r->finished);
  WHARF_DASSERT(io_uring_sq_ready(&ring) <= kDepth);  // never more queued than the SQ holds
  while (io_uring_sq_ready(&ring) > 0) {
    const int rc = io_uring_submit(&ring);
    if (rc > 0 || rc == -EINTR) continue;
    if (rc == 0 || rc == -EAGAIN || rc == -EBUSY) {
      // The kernel is short of request memory or completions are backed up. The reaper drains
      // completions without taking mu, so waiting here with mu held still makes progress.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    broken = -rc;
    WHARF_ASSERT(broken > 0);
    if (r != nullptr) {
      // The unconsumed entries were counted in flight when queued (the wake-up NOP has no round).
      WHARF_ASSERT(r->in_flight >= io_uring_sq_ready(&ring));
      r->in_flight -= io_uring_sq_ready(&ring);
      Record(r, broken);
    }
    return false;
  }
  return true;
}

// Issues r's next ops while fewer than kDepth are in the kernel, then submits. Ops that can no
// longer be issued (broken ring) count as failed with the ring's error.
void UringSyncBackend::Impl::IssueMore(Round* r) {
  WHARF_ASSERT(r != nullptr && r == round.get());  // only the round in flight issues
  WHARF_DASSERT(!r->finished);
  while (broken == 0 && r->next < r->ops.size() && r->in_flight < kDepth) {
    if (!Queue(r, &r->ops[r->next])) break;
    ++r->next;
    ++r->in_flight;
  }
  WHARF_ASSERT(r->in_flight <= kDepth && r->next <= r->ops.size());
  if (broken == 0) Flush(r);
  if (broken != 0 && r->next < r->ops.size()) {
    Record(r, broken);
    r->next = r->ops.size();
  }
}

// When every op of r has completed, retires r and takes its callback, for RunFinished once mu is
// released.
std::optional<UringSyncBackend::Impl::Finished> UringSyncBackend::Impl::TakeIfDone(Round* r) {
  WHARF_ASSERT(r != nullptr && r == round.get());
  WHARF_ASSERT(r->next <= r->ops.size());
  if (r->in_flight != 0 || r->next < r->ops.size()) return std::nullopt;
  r->finished = true;
  Finished finished{std::move(r->callback), r->first_error, std::move(round)};
  if (broken != 0) retired.push_back(std::move(finished.done));
  idle.SignalAll();
  return finished;
}

void UringSyncBackend::Impl::RunFinished(std::optional<Finished> finished) {
  if (!finished.has_value()) return;
  WHARF_ASSERT(finished->callback);     // taken once, from a round Submit accepted
  WHARF_DASSERT(finished->error >= 0);  // 0 or an errno
  finished->done.reset();
  finished->callback(finished->error);
}

void UringSyncBackend::Impl::OnCompletion(Op* op, int res) {
  WHARF_ASSERT(op != nullptr);
  std::optional<Finished> finished;
  {
    // op->round is read under mu: Submit wrote it before issuing under mu (the ring's own ordering
    // is invisible to ThreadSanitizer).
    internal::MutexLock lock(&mu);
    Round* r = op->round;
    WHARF_ASSERT(r != nullptr);
    if (r->finished) return;  // an entry given up when the ring broke, submitted after all
    // The op is one of the round's own: the SQE's user_data pointed into r->ops.
    WHARF_DASSERT(op >= r->ops.data() && op < r->ops.data() + r->ops.size());
    // An interrupted or refused sync says nothing about the disk: issue the same one again.
    const bool retry = res == -EINTR || res == -EAGAIN;
    if (!retry || broken != 0 || !Queue(r, op)) {
      WHARF_ASSERT(r->in_flight > 0);  // every completion answers one issued op
      --r->in_flight;
      if (res < 0) Record(r, -res);
    }
    IssueMore(r);
    finished = TakeIfDone(r);
  }
  RunFinished(std::move(finished));
}

// The completion queue cannot be waited on any more: the round in flight fails with `error` (its
// syncs may or may not have happened, so it must not count as durable).
void UringSyncBackend::Impl::Abandon(int error) {
  WHARF_ASSERT(error > 0);  // the wait's errno: the round must not read as durable
  std::optional<Finished> finished;
  {
    internal::MutexLock lock(&mu);
    WHARF_ASSERT(!reaper_gone);  // the reaper abandons once, then returns
    broken = error;
    reaper_gone = true;
    if (round == nullptr) return;
    Round* r = round.get();
    Record(r, error);
    r->in_flight = 0;
    r->next = r->ops.size();
    finished = TakeIfDone(r);
    WHARF_DASSERT(finished.has_value());  // nothing left in flight: it is done
  }
  RunFinished(std::move(finished));
}

void UringSyncBackend::Impl::Reap() {
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_wait_cqe(&ring, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) {
      Abandon(-rc);
      return;
    }
    WHARF_ASSERT(rc == 0 && cqe != nullptr);
    const uint64_t data = cqe->user_data;
    const int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    if (data == kWakeReaper) return;
    WHARF_ASSERT(data != 0);  // every other entry carries the address of its Op
    OnCompletion(reinterpret_cast<Op*>(data), res);
  }
}

Status UringSyncBackend::Probe() {
  io_uring ring{};
  Status status = InitRing(&ring);
  WHARF_DASSERT(status.ok() ||
                status.code() ==
                    Status::Code::kNotSupported);  // the one refusal Create reports too
  if (status.ok()) WHARF_DASSERT(ring.ring_fd >= 0);
  if (status.ok()) io_uring_queue_exit(&ring);
  return status;
}

Status UringSyncBackend::Create(std::unique_ptr<SyncBackend>* backend) {
  WHARF_ASSERT(backend != nullptr);
  auto impl = std::make_unique<Impl>();
  Status status = InitRing(&impl->ring);
  if (!status.ok()) return status;
  Impl* raw = impl.get();
  impl->reaper = std::thread([raw] {
    NameThisThread("wharf-uring");
    raw->Reap();
  });
  backend->reset(new UringSyncBackend(std::move(impl)));
  WHARF_DASSERT(*backend != nullptr && impl == nullptr);  // the backend owns the ring now
  return Status::OK();
}

UringSyncBackend::UringSyncBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  WHARF_ASSERT(impl_ != nullptr);
  WHARF_ASSERT(impl_->reaper.joinable());  // the destructor wakes and joins it
}

UringSyncBackend::~UringSyncBackend() {
  Impl& im = *impl_;
  bool woken = false;
  {
    internal::MutexLock lock(&im.mu);
    WHARF_ASSERT(!im.stopping);  // destroyed once
    // Refuse new rounds first, so a callback that keeps resubmitting cannot delay shutdown forever.
    im.stopping = true;
    im.idle.Wait(&im.mu, [&im]() WHARF_REQUIRES(im.mu) { return im.round == nullptr; });
    WHARF_ASSERT(im.round == nullptr);
    // The reaper sleeps in io_uring_wait_cqe, which only a completion ends.
    woken = im.reaper_gone || (im.Queue(nullptr, nullptr) && im.Flush(nullptr));
  }
  if (!woken) {
    // The ring refused the wake-up (it broke earlier), so the reaper can never return. Leaking it
    // with its ring beats hanging the caller forever.
    im.reaper.detach();
    static_cast<void>(impl_.release());
    return;
  }
  // The last callback may still be running on the reaper; join waits for it.
  im.reaper.join();
  io_uring_queue_exit(&im.ring);
}

Status UringSyncBackend::Submit(std::vector<SyncOp> ops, RoundCallback callback) {
  if (!callback) return Status::InvalidArgument("SyncBackend::Submit: empty callback");
  WHARF_DASSERT(std::all_of(ops.begin(), ops.end(), [](const SyncOp& op) { return op.fd >= 0; }));
  auto round = std::make_unique<Impl::Round>();
  Impl::Round* r = round.get();
  r->callback = std::move(callback);
  if (ops.empty()) {
    // A NOP carries the empty round through the ring, so its callback too runs on the reaper.
    r->ops.push_back({r, -1, Impl::Kind::kNop});
  } else {
    r->ops.reserve(ops.size());
    for (const SyncOp& op : ops) {
      r->ops.push_back({r, op.fd, op.data_only ? Impl::Kind::kDataSync : Impl::Kind::kSync});
    }
  }

  WHARF_ASSERT(!r->ops.empty());  // an empty round still travels as a NOP
  Impl& im = *impl_;
  internal::MutexLock lock(&im.mu);
  if (im.stopping) return Status::Closed("io_uring sync backend is shutting down");
  if (im.broken != 0) return Status::IOError("io_uring ring is unusable: " + ErrnoText(im.broken));
  if (im.round != nullptr) {
    return Status::Internal("SyncBackend::Submit while a round is in flight");
  }
  im.round = std::move(round);
  im.IssueMore(r);
  // Completions are handled under mu, so none can have come yet: in_flight == 0 means nothing
  // reached the kernel and no callback would ever run. Refuse the round instead.
  if (r->in_flight == 0) {
    r->finished = true;
    im.retired.push_back(std::move(im.round));
    return Status::IOError("io_uring_submit failed: " + ErrnoText(im.broken));
  }
  WHARF_ASSERT(r->in_flight <= kDepth);
  return Status::OK();
}

}  // namespace wharf::io
