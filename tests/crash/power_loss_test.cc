// Power-loss and disk-full simulation of the storage core.
//
// Producers commit transactions (one state row plus one to three facts each) on several threads
// while the fault-injecting file system cuts power at a random moment: every byte not yet synced
// is dropped and the database is reopened on what survived. After every cut we check the contract:
// every acknowledged commit is present (state and facts), no transaction is partially present, no
// fact is corrupt, and fact ids continue above everything recovered. The database accumulates
// across cuts, so recovery of recovered databases is exercised too. The seed is printed on failure
// (WHARF_SEED=<n> replays it).
#include <map>
#include <random>
#include <set>
#include <thread>

#include "engine/core/engine_core.h"
#include "engine/open/open_engine.h"
#include "engine/store/codec.h"
#include "engine/store/store.h"
#include "engine/store/tables/scan.h"
#include "engine/store/tables/state.h"
#include "io/fault/fault_fs.h"
#include "io/wal/wal_fs.h"
#include "test_util.h"

namespace wharf {
namespace {

using testing::SeedFromEnv;
using testing::TempDir;

struct TxnId {
  int producer;
  int seq;
  auto operator<=>(const TxnId&) const = default;
};

std::string RowKey(TxnId id) {
  return "p" + std::to_string(id.producer) + "-" + std::to_string(id.seq);
}

class PowerLossTest : public ::testing::TestWithParam<IoBackend> {
 protected:
  void Open() {
    EngineOptions options;
    options.io = GetParam();
    options.partitions = 4;
    // A small memtable makes WAL switches and flushes (new files, directory syncs) happen often.
    options.memtable_bytes = 1u << 20;
    // Small WAL spares: many WALs are zero-filled spares, and many grow past theirs.
    options.wal_prefill_bytes = 1u << 20;
    internal::StoreHooks hooks{fs_, fs_.get()};
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"T"}));
  }

  // Reads every fact and every state row and returns what contradicts the contract: a
  // transaction present in part (some of its facts, or its state row without its facts, or its
  // facts without its state row), a fact above the durable LSN, an acknowledged transaction
  // missing. *max_id: the highest fact id found.
  std::vector<std::string> FindProblems(const std::set<TxnId>& acked, uint64_t* max_id) {
    std::vector<std::string> problems;
    std::map<TxnId, std::vector<std::pair<int, int>>> facts_of;  // (index, count) per txn
    *max_id = 0;
    for (uint32_t p = 0; p < engine_->partitions(); ++p) {
      std::vector<Fact> facts;
      Status s = engine_->ReadFacts(p, 0, SIZE_MAX, &facts);  // verifies every checksum
      if (!s.ok()) problems.push_back("partition " + std::to_string(p) + ": " + s.ToString());
      for (const Fact& fact : facts) {
        TxnId id{};
        int index = 0, count = 0;
        if (std::sscanf(fact.payload.c_str(), "%d/%d/%d/%d", &id.producer, &id.seq, &index,
                        &count) != 4) {
          problems.push_back("fact " + std::to_string(fact.id) + " has a foreign payload");
          continue;
        }
        facts_of[id].emplace_back(index, count);
        *max_id = std::max(*max_id, fact.id);
      }
    }
    if (*max_id > engine_->durable_lsn()) problems.push_back("a fact above the durable LSN");
    // Every state row, read from the store itself: a row whose facts are missing is only seen
    // this way.
    std::set<TxnId> rows;
    {
      const std::string lower = tables::state::Key("rows", ""),
                        upper = tables::state::Key("rowt", "");
      internal::Store* store = internal::EngineInternal::Core(*engine_)->store();
      tables::Scan it(store->db(), store->cf(internal::kState), tables::KeyRange{lower, upper});
      for (it.SeekToFirst(); it.Valid(); it.Next()) {
        std::string key(it.key().substr(lower.size()));
        TxnId id{};
        if (std::sscanf(key.c_str(), "p%d-%d", &id.producer, &id.seq) != 2) {
          problems.push_back("foreign state row " + key);
          continue;
        }
        rows.insert(id);
      }
      if (!it.status().ok()) problems.push_back("state scan: " + it.status().ToString());
    }
    for (const auto& [id, parts] : facts_of) {
      // Whole: all facts of the transaction and its state row.
      if (parts.size() != static_cast<size_t>(parts[0].second)) {
        problems.push_back(RowKey(id) + ": " + std::to_string(parts.size()) + " of " +
                           std::to_string(parts[0].second) + " facts");
      }
      if (!rows.count(id)) problems.push_back(RowKey(id) + ": facts without the state row");
    }
    for (const TxnId& id : rows) {
      if (!facts_of.count(id)) problems.push_back(RowKey(id) + ": state row without its facts");
    }
    for (const TxnId& id : acked) {
      if (!rows.count(id)) problems.push_back("acknowledged " + RowKey(id) + ": state row lost");
      if (!facts_of.count(id)) problems.push_back("acknowledged " + RowKey(id) + ": facts lost");
    }
    return problems;
  }

  // Checks the contract after a cut (FindProblems), then that ids continue above everything
  // recovered.
  void Verify(const std::set<TxnId>& acked) {
    uint64_t max_id = 0;
    const std::vector<std::string> problems = FindProblems(acked, &max_id);
    ASSERT_TRUE(problems.empty()) << problems.size() << " problems, first: " << problems[0];
    static int probes = 0;
    std::string probe = RowKey({99, probes});
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Put("rows", probe, "probe"));
    ASSERT_OK(txn.Emit("T", "probe", "99/" + std::to_string(probes++) + "/0/1"));
    CommitResult result;
    ASSERT_OK(txn.Commit(&result));
    EXPECT_GT(result.first_fact_id, max_id);
  }

  TempDir dir_;
  std::shared_ptr<io::FaultInjectionFileSystem> fs_ =
      std::make_shared<io::FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  std::unique_ptr<Engine> engine_;
};

TEST_P(PowerLossTest, AcknowledgedCommitsSurviveRandomCuts) {
  const uint64_t seed = SeedFromEnv();
  SCOPED_TRACE("WHARF_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Fewer under the sanitizers (each cut costs about 3x there: 80 s per backend under ASan with
  // 110).
  constexpr int kCuts = testing::kSanitized ? 40 : 110, kProducers = 4;
  std::set<TxnId> acked;  // across all cycles
  std::vector<int> next_seq(kProducers, 0);
  int cuts_in_spares = 0;  // cuts after the WAL had switched to a zero-filled spare
  Open();
  for (int cut = 0; cut < kCuts; ++cut) {
    std::vector<std::set<TxnId>> acked_now(kProducers);
    std::atomic<bool> stop{false};
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p, producer_seed = rng()] {
        std::mt19937 local(static_cast<uint32_t>(producer_seed));
        while (!stop.load()) {
          TxnId id{p, next_seq[p]++};
          int count = 1 + static_cast<int>(local() % 3);
          Txn txn = engine_->Begin();
          EXPECT_OK(txn.Put("rows", RowKey(id), std::string(local() % 200, 'v')));
          for (int i = 0; i < count; ++i) {
            std::string payload = std::to_string(p) + "/" + std::to_string(id.seq) + "/" +
                                  std::to_string(i) + "/" + std::to_string(count) + "/" +
                                  std::string(local() % 300, 'x');
            EXPECT_OK(txn.Emit("T", "key-" + std::to_string(local() % 16), payload));
          }
          if (!txn.Commit().ok()) break;  // power is gone
          acked_now[p].insert(id);
        }
      });
    }
    if (cut % 2 == 1) {
      // Every other cut lands while the WAL is a zero-filled spare being overwritten.
      const io::WalFileSystem* wal_fs = internal::EngineInternal::Core(*engine_)->store()->wal_fs();
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (wal_fs->spare_wals() == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      if (wal_fs->spare_wals() > 0) ++cuts_in_spares;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    fs_->Cut();
    stop = true;
    for (auto& producer : producers) producer.join();
    engine_->Close().PermitUncheckedError();  // may report the simulated power loss
    engine_.reset();
    ASSERT_TRUE(fs_->DropUnsyncedData().ok());
    for (const auto& set : acked_now) acked.insert(set.begin(), set.end());
    Open();
    ASSERT_NO_FATAL_FAILURE(Verify(acked)) << "after cut " << cut;
  }
  EXPECT_GE(fs_->cuts(), uint64_t{kCuts});
  EXPECT_GT(acked.size(), size_t{kCuts});  // the cuts did land among acknowledged commits
  EXPECT_GE(cuts_in_spares, kCuts / 4);
}

// Verify itself notices a transaction present in part: a state row without its facts, facts
// without their state row, a missing fact of several, and an acknowledged transaction missing.
TEST_P(PowerLossTest, VerifyNoticesPartialTransactions) {
  Open();
  auto commit = [&](const std::string& row, const std::vector<std::string>& payloads) {
    Txn txn = engine_->Begin();
    if (!row.empty()) {
      EXPECT_OK(txn.Put("rows", row, "v"));
    }
    for (const std::string& payload : payloads) EXPECT_OK(txn.Emit("T", "k", payload));
    EXPECT_OK(txn.Commit());
  };
  commit("p0-0", {"0/0/0/2", "0/0/1/2"});  // whole
  uint64_t max_id = 0;
  EXPECT_TRUE(FindProblems({{0, 0}}, &max_id).empty());
  commit("p1-0", {});           // state row, no facts
  commit("", {"2/0/0/1"});      // facts, no state row
  commit("p3-0", {"3/0/0/2"});  // one of two facts
  std::vector<std::string> problems = FindProblems({{0, 0}, {4, 0}}, &max_id);
  std::string all;
  for (const std::string& problem : problems) all += problem + "\n";
  EXPECT_NE(all.find("p1-0: state row without its facts"), std::string::npos) << all;
  EXPECT_NE(all.find("p2-0: facts without the state row"), std::string::npos) << all;
  EXPECT_NE(all.find("p3-0: 1 of 2 facts"), std::string::npos) << all;
  EXPECT_NE(all.find("acknowledged p4-0: state row lost"), std::string::npos) << all;
  EXPECT_EQ(problems.size(), 5u) << all;  // p4-0 lost its row and its facts
}

// Disk full: commits fail with a clear, retryable error; nothing acknowledged is lost; once space
// returns commits succeed again, and everything survives a power cut afterwards.
TEST_P(PowerLossTest, DiskFullFailsClearlyAndRecovers) {
  Open();
  std::set<TxnId> acked;
  auto commit = [&](int seq) {
    Txn txn = engine_->Begin();
    EXPECT_OK(txn.Put("rows", RowKey({0, seq}), "v"));
    EXPECT_OK(txn.Emit("T", "k", "0/" + std::to_string(seq) + "/0/1"));
    Status s = txn.Commit();
    if (s.ok()) acked.insert({0, seq});
    return s;
  };
  for (int i = 0; i < 20; ++i) ASSERT_OK(commit(i));
  fs_->SetNoSpace(true);
  for (int i = 20; i < 30; ++i) {
    Status s = commit(i);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_NE(s.ToString().find("disk full"), std::string::npos) << s.ToString();
  }
  fs_->SetNoSpace(false);
  Status s;
  int seq = 30;
  // RocksDB's own disk-space recovery may hold the error for a few seconds (its space check
  // runs on a timer); until then commits keep failing with the retryable error.
  for (int attempt = 0; attempt < 2000; ++attempt) {
    s = commit(seq++);
    if (s.ok()) break;
    EXPECT_TRUE(s.retryable()) << s.ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_OK(s) << "commits did not recover after space returned";
  for (int i = 0; i < 20; ++i) ASSERT_OK(commit(seq++));
  fs_->Cut();
  engine_->Close().PermitUncheckedError();
  engine_.reset();
  const rocksdb::IOStatus dropped = fs_->DropUnsyncedData();
  ASSERT_TRUE(dropped.ok()) << dropped.ToString();
  Open();
  Verify(acked);
}

INSTANTIATE_TEST_SUITE_P(Backends, PowerLossTest,
                         ::testing::Values(IoBackend::kPosix, IoBackend::kUring),
                         [](const auto& param_info) {
                           return std::string(ToString(param_info.param));
                         });

}  // namespace
}  // namespace wharf
