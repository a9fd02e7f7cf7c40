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
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return finished(); });
}

void RelayPublisher::Job::Finish() {
  std::lock_guard lock(mutex_);
  finished_.store(true, std::memory_order_release);
  cv_.notify_all();
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
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      queue_.push_back(std::move(job));
      if (idle_ < queue_.size() && threads_.size() < kRelayThreadsMax) {
        threads_.emplace_back([this, number = threads_.size()] {
          io::NameThisThread("wharf-relay-" + std::to_string(number));
          Loop();
        });
      } else {
        work_.notify_one();
      }
      return;
    }
  }
  FinishUnpublished(job.get());
}

void RelayPublisher::Loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    ++idle_;
    work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (stopping_) break;
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    sink_->Publish(job->facts, &job->outcomes);
    Complete(job.get());
    lock.lock();
    --running_;
    publish_ended_.notify_all();
  }
}

void RelayPublisher::Stop() {
  std::lock_guard stop_lock(stop_mutex_);
  std::deque<std::shared_ptr<Job>> waiting;
  std::unique_lock lock(mutex_);
  stopping_ = true;
  waiting.swap(queue_);
  work_.notify_all();
  lock.unlock();
  for (const auto& job : waiting) FinishUnpublished(job.get());
  lock.lock();
  while (running_ > 0) {
    lock.unlock();
    sink_->Cancel();
    lock.lock();
    publish_ended_.wait_for(lock, kCancelAgainEvery, [this] { return running_ == 0; });
  }
  std::vector<std::thread> threads;
  threads.swap(threads_);
  lock.unlock();
  for (std::thread& thread : threads) thread.join();
}

}  // namespace wharf::internal
