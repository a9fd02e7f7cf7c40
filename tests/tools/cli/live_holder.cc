// The child of cli_test's live-database tests: holds a database open with a running runtime while
// the test runs the CLI's write commands against it, and reports what its runtime then does.
//
//   live_holder DB ADMIN_SOCKET      (commands on stdin, one reply line each on stdout)
//
// Opens DB (4 partitions, option admin_socket=ADMIN_SOCKET), declares OrderCreated and starts a
// runtime with a subscriber `mailer` (it rejects a payload "bounce" unless the fact is a retry of a
// dead letter) and a projection `totals` (state totals/<key> = payload). Prints "ready", then per
// command:
//   emit KEY PAYLOAD     commits one fact              -> "emitted ID"
//   drain                Runtime::Drain()              -> "drained"
//   seen                 mailer's deliveries so far    -> "ID:PAYLOAD[:retry] ..." (in order)
//   quit                 stops and closes              -> "bye"
#include <cstdio>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "wharf/admin.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace {

[[noreturn]] void Die(const std::string& what, const wharf::Status& status) {
  std::fprintf(stderr, "live_holder: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::_Exit(2);
}

void Check(const std::string& what, const wharf::Status& status) {
  if (!status.ok()) Die(what, status);
}

bool IsRetry(const wharf::Fact& fact) {
  for (const auto& [name, value] : fact.headers) {
    if (name == wharf::kRetryForHeader) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: live_holder DB ADMIN_SOCKET\n");
    return 2;
  }
  wharf::EngineOptions options;
  options.partitions = 4;
  options.admin_socket = argv[2];
  std::unique_ptr<wharf::Engine> engine;
  Check("open", wharf::Engine::Open(argv[1], options, &engine));
  Check("declare", engine->DeclareTypes({"OrderCreated"}));

  std::mutex mutex;
  std::vector<std::string> seen;
  wharf::RuntimeOptions runtime_options;
  runtime_options.trace = [](const wharf::TraceEvent&) {};
  wharf::Runtime runtime(engine.get(), runtime_options);
  Check("subscribe", runtime.Subscribe("mailer", {"OrderCreated"}, [&](const wharf::Fact& fact) {
    std::lock_guard lock(mutex);
    seen.push_back(std::to_string(fact.id) + ":" + fact.payload + (IsRetry(fact) ? ":retry" : ""));
    return fact.payload == "bounce" && !IsRetry(fact) ? wharf::Outcome::kRejected
                                                      : wharf::Outcome::kHandled;
  }));
  Check("project", runtime.Project("totals", {"OrderCreated"},
                                   [](const wharf::Fact& fact, wharf::Effects& effects) {
                                     return effects.Put("totals", fact.key, fact.payload).ok()
                                                ? wharf::Outcome::kHandled
                                                : wharf::Outcome::kFailed;
                                   }));
  Check("start", runtime.Start());
  std::cout << "ready" << std::endl;

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string command;
    words >> command;
    if (command == "emit") {
      std::string key, payload;
      words >> key >> payload;
      wharf::Txn txn = engine->Begin();
      Check("emit", txn.Emit("OrderCreated", key, payload));
      wharf::CommitResult result;
      Check("commit", txn.Commit(&result));
      std::cout << "emitted " << result.first_fact_id << std::endl;
    } else if (command == "drain") {
      Check("drain", runtime.Drain());
      std::cout << "drained" << std::endl;
    } else if (command == "seen") {
      std::lock_guard lock(mutex);
      std::string all;
      for (const std::string& delivery : seen) all += (all.empty() ? "" : " ") + delivery;
      std::cout << all << std::endl;
    } else if (command == "quit") {
      break;
    } else {
      std::cout << "unknown command" << std::endl;
    }
  }
  Check("stop", runtime.Stop());
  Check("close", engine->Close());
  std::cout << "bye" << std::endl;
  return 0;
}
