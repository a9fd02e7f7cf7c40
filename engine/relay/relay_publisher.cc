// RelayPublisher: a relay's publishing threads, and stopping them within the relay's timeout.
#include "engine/relay/relay_publisher.h"

#include <chrono>

#include "engine/base/thread_name.h"

namespace wharf::internal {
namespace {

// While Stop waits for publishes in progress it cancels them again this often: a thread that took
// its job just before the stop may enter the sink's Publish just after a Cancel.
constexpr auto kCancelAgainEvery = std::chrono::milliseconds(20);

}  // namespace

void RelayPublisher::Job::Wait() {
  MutexLock lock(&mutex_);
  cv_.Wait(&mutex_, [this] { return finished(); });
}

void RelayPublisher::Job::Finish() {
  MutexLock lock(&mutex_);
  finished_.store(true, std::memory_order_release);
  cv_.SignalAll();
}

void RelayPublisher::FinishUnpublished(Job* job) {
  job->outcomes.assign(job->facts.size(), PublishOutcome{PublishResult::kTransient,
                                                         "not published: the runtime is stopping"});
  Complete(job);
}

void RelayPublisher::Complete(Job* job) {
  job->Finish();
  if (job->on_finished) job->on_finished();
}

void RelayPublisher::Submit(std::shared_ptr<Job> job) {
  {
    MutexLock lock(&mutex_);
    if (!stopping_) {
      queue_.push_back(std::move(job));
      if (idle_ < queue_.size() && threads_.size() < kRelayThreadsMax) {
        threads_.emplace_back([this, number = threads_.size()] {
          io::NameThisThread("wharf-relay-" + std::to_string(number));
          Loop();
        });
      } else {
        work_.Signal();
      }
      return;
    }
  }
  FinishUnpublished(job.get());
}

void RelayPublisher::Loop() {
  // Held but across a Publish (explicit Lock/Unlock: the analysis checks that they pair up).
  mutex_.Lock();
  while (true) {
    ++idle_;
    work_.Wait(&mutex_, [this]() WHARF_REQUIRES(mutex_) { return stopping_ || !queue_.empty(); });
    --idle_;
    if (stopping_) break;
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    mutex_.Unlock();
    sink_->Publish(job->facts, &job->outcomes);
    Complete(job.get());
    mutex_.Lock();
    --running_;
    publish_ended_.SignalAll();
  }
  mutex_.Unlock();
}

void RelayPublisher::Stop() {
  MutexLock stop_lock(&stop_mutex_);
  std::deque<std::shared_ptr<Job>> waiting;
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    waiting.swap(queue_);
    work_.SignalAll();
  }
  for (const auto& job : waiting) FinishUnpublished(job.get());
  std::vector<std::thread> threads;
  mutex_.Lock();
  while (running_ > 0) {
    mutex_.Unlock();
    sink_->Cancel();
    mutex_.Lock();
    publish_ended_.WaitFor(&mutex_, kCancelAgainEvery,
                           [this]() WHARF_REQUIRES(mutex_) { return running_ == 0; });
  }
  threads.swap(threads_);
  mutex_.Unlock();
  for (std::thread& thread : threads) thread.join();
}

}  // namespace wharf::internal
