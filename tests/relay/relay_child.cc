// The relaying process that redis_relay_test and nats_relay_test SIGKILL at random moments:
//   relay_child DB RELAY_OPTIONS FACTS RUN
// opens the database (4 partitions), commits FACTS facts of type A (keys k0..k12, header run=RUN),
// writes "ready" on stdout (the test kills it from then on), drains a relay of A into the broker
// until it caught up, and prints the sink's counters ("done ACK DUP REJ TRANSIENT"). Exit 0 when
// done.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "wharf/engine.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace {

// Forwards to the real sink and writes "dup N" for each batch with duplicates at once (unbuffered):
// a run killed later still reports the redeliveries it saw.
class ReportingSink : public wharf::RelaySink {
 public:
  explicit ReportingSink(std::unique_ptr<wharf::RelaySink> sink) : sink_(std::move(sink)) {}
  wharf::Status Validate(const std::string& relay_name, wharf::Ordering ordering) override {
    return sink_->Validate(relay_name, ordering);
  }
  void Publish(std::span<const wharf::Fact* const> facts,
               std::vector<wharf::PublishOutcome>* outcomes) override {
    sink_->Publish(facts, outcomes);
    size_t duplicates = 0;
    for (const wharf::PublishOutcome& outcome : *outcomes) {
      duplicates += outcome.result == wharf::PublishResult::kDuplicate ? 1 : 0;
    }
    if (duplicates == 0) return;
    const std::string line = "dup " + std::to_string(duplicates) + "\n";
    if (::write(1, line.data(), line.size()) < 0) std::_Exit(3);
  }
  Counters counters() const override { return sink_->counters(); }

 private:
  std::unique_ptr<wharf::RelaySink> sink_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: relay_child DB RELAY_OPTIONS FACTS RUN\n");
    return 2;
  }
  const std::string db = argv[1], relay_options = argv[2], run = argv[4];
  const int facts = std::atoi(argv[3]);
  wharf::EngineOptions options;
  options.partitions = 4;
  std::unique_ptr<wharf::Engine> engine;
  wharf::Status s = wharf::Engine::Open(db, options, &engine);
  if (s.ok()) s = engine->DeclareTypes({"A"});
  if (!s.ok()) {
    std::fprintf(stderr, "open: %s\n", s.ToString().c_str());
    return 1;
  }
  for (int i = 0; i < facts; ++i) {
    wharf::Txn txn = engine->Begin();
    s = txn.Emit("A", "k" + std::to_string(i % 13), "run " + run + " fact " + std::to_string(i),
                 {.headers = {{"run", run}}, .deliver_at_ms = 0});
    if (s.ok()) s = txn.Commit();
    if (!s.ok()) {
      std::fprintf(stderr, "commit: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::unique_ptr<wharf::RelaySink> sink;
  s = wharf::MakeRelaySink(relay_options, &sink);
  if (!s.ok()) {
    std::fprintf(stderr, "relay options: %s\n", s.ToString().c_str());
    return 1;
  }
  auto shared = std::make_shared<ReportingSink>(std::move(sink));
  wharf::RuntimeOptions runtime_options;
  runtime_options.workers = 2;
  runtime_options.backoff_initial_ms = 1;
  runtime_options.backoff_max_ms = 20;
  runtime_options.trace = [](const wharf::TraceEvent&) {};
  wharf::Runtime runtime(engine.get(), runtime_options);
  wharf::ConsumerOptions consumer;
  consumer.batch_facts = 8;  // many batches: kills land between and inside them
  s = runtime.Relay("r", {"A"}, shared, consumer);
  if (!s.ok()) {
    std::fprintf(stderr, "relay: %s\n", s.ToString().c_str());
    return 1;
  }
  for (int attempt = 0; !(s = runtime.Drain()).ok(); ++attempt) {
    if (attempt == 1000) {
      std::fprintf(stderr, "drain: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const wharf::RelaySink::Counters counters = shared->counters();
  std::printf("done %llu %llu %llu %llu\n", static_cast<unsigned long long>(counters.acknowledged),
              static_cast<unsigned long long>(counters.duplicates),
              static_cast<unsigned long long>(counters.rejected),
              static_cast<unsigned long long>(counters.transient));
  s = runtime.Stop();
  if (s.ok()) s = engine->Close();
  return s.ok() ? 0 : 1;
}
