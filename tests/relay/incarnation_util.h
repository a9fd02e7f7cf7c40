// What the relay incarnation tests share: an original database and one "restored" from a copy of
// it. The copy is taken (closed) at a point; the original then commits more facts; the copy starts
// a new incarnation as a restore's last step does (Store::StartIncarnation) and commits facts of
// its own under the ids the original gave its later ones, as a database restored from a backup
// does.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/store/store.h"
#include "test_util.h"
#include "wharf/engine.h"

namespace wharf::testing {

// The restored database's incarnation (any number but 0).
inline constexpr uint64_t kRestoredIncarnation = 0x1234abcd5678ef90;
inline constexpr const char* kRestoredIncarnationHex = "1234abcd5678ef90";

class RestoredPair {
 public:
  explicit RestoredPair(uint32_t partitions) : partitions_(partitions) {}

  std::string original() const { return original_.db(); }
  std::string restored() const { return restored_.db(); }

  Status Open(const std::string& path, std::unique_ptr<Engine>* engine) const {
    EngineOptions options;
    options.partitions = partitions_;
    options.retention_interval_ms = 0;  // every fact stays, to be compared with the broker's
    Status s = Engine::Open(path, options, engine);
    if (s.ok()) s = (*engine)->DeclareTypes({"A"});
    return s;
  }

  // Creates the original with facts [0, point) (CommitFact numbering), then copies it, closed:
  // the copy is the database as restored from a backup at that point.
  void CreateAndCopy(int point) {
    std::unique_ptr<Engine> engine;
    ASSERT_OK(Open(original(), &engine));
    for (int i = 0; i < point; ++i) CommitFact(*engine, "original", i);
    ASSERT_OK(engine->Close());
    engine.reset();
    std::error_code error;
    std::filesystem::copy(original(), restored(), std::filesystem::copy_options::recursive, error);
    ASSERT_FALSE(error) << error.message();
  }

  // The copy starts kRestoredIncarnation at the first id after the point.
  void StartIncarnation() const {
    EngineOptions options;
    options.partitions = partitions_;
    std::unique_ptr<internal::Store> store;
    ASSERT_OK(internal::Store::Open(restored(), options, internal::StoreHooks{}, &store));
    ASSERT_OK(store->StartIncarnation(kRestoredIncarnation));
    ASSERT_OK(store->Close());
  }

  // Fact number `i` (its key, so its partition, depends on `i` alone: both databases put their
  // i-th fact, which has the same id in both, into the same partition). Returns its id.
  static uint64_t CommitFact(Engine& engine, const std::string& who, int i) {
    Txn txn = engine.Begin();
    EXPECT_OK(txn.Emit("A", "key-" + std::to_string(i), who + " " + std::to_string(i), {}));
    CommitResult result;
    EXPECT_OK(txn.Commit(&result));
    return result.first_fact_id;
  }

 private:
  const uint32_t partitions_;
  TempDir original_;
  TempDir restored_;
};

}  // namespace wharf::testing
