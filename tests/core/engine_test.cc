// Engine and Txn: atomic commits, recovery across reopen, checksums, bad input. Every test runs on
// both sync backends (io_uring and the posix thread), which must behave identically.
#include <rocksdb/db.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "engine/core/engine_core.h"
#include "engine/open/open_engine.h"
#include "engine/store/codec.h"
#include "engine/store/store.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/state.h"
#include "io/fault/fault_fs.h"
#include "io/wal/wal_fs.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/inspect.h"

namespace wharf {
namespace {

using testing::TempDir;

// Holds every WAL sync the engine reports (between the fdatasync and its acknowledgement) while
// closed, so a test can look at the engine while a commit's sync is in flight. Forwards to the
// fault-injecting file system, which decides what a power cut keeps.
class SyncGate : public io::DurabilityObserver {
 public:
  explicit SyncGate(io::FaultInjectionFileSystem* fs) : fs_(fs) {}
  void Close() {
    std::lock_guard lock(mutex_);
    open_ = false;
  }
  void Open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  // Waits until a sync is held at the gate.
  void AwaitHeldSync() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return held_ > 0; });
  }
  rocksdb::IOStatus OnFileSynced(const std::string& path, uint64_t size_bytes) override {
    {
      std::unique_lock lock(mutex_);
      ++held_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_; });
      --held_;
    }
    return fs_->OnFileSynced(path, size_bytes);
  }
  uint64_t BeforeDirSync(const std::string& dir) override { return fs_->BeforeDirSync(dir); }
  rocksdb::IOStatus OnDirSynced(const std::string& dir, uint64_t token) override {
    return fs_->OnDirSynced(dir, token);
  }

 private:
  io::FaultInjectionFileSystem* fs_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = true;
  int held_ = 0;
};

class EngineTest : public ::testing::TestWithParam<IoBackend> {
 protected:
  EngineOptions Options() const {
    EngineOptions options;
    options.io = GetParam();
    return options;
  }
  void Open(const EngineOptions& options, const internal::EngineHooks& hooks = {}) {
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
  }
  void Open() { Open(Options()); }

  // WAL spares of 4 MiB, and a memtable large enough that the outbox stays in the WAL.
  EngineOptions SpareOptions() const {
    EngineOptions options = Options();
    options.memtable_bytes = 16u << 20;
    options.wal_prefill_bytes = 4u << 20;
    return options;
  }
  // Commits a state row "k<n>" = "<n>" and a 1 KiB fact of key "key" whose payload starts "<n>".
  void CommitOne() {
    Txn txn = engine_->Begin();
    EXPECT_OK(txn.Put("t", "k" + std::to_string(committed_), std::to_string(committed_)));
    EXPECT_OK(txn.Emit("T", "key", std::to_string(committed_) + std::string(1000, 'p')));
    EXPECT_OK(txn.Commit());
    ++committed_;
  }
  // Opens with SpareOptions and commits until the WAL is a spare (the first WAL asks for one after
  // 512 KiB and switches to it once it is built), then once more.
  void OpenAndCommitUntilSpareWal() {
    Open(SpareOptions());
    ASSERT_OK(engine_->DeclareTypes({"T"}));
    const io::WalFileSystem* wal_fs = internal::EngineInternal::Core(*engine_)->store()->wal_fs();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (wal_fs->spare_wals() == 0 && std::chrono::steady_clock::now() < deadline) CommitOne();
    ASSERT_EQ(wal_fs->spare_wals(), 1u) << "no WAL was created from a spare";
    CommitOne();
  }
  void Reopen() {
    ASSERT_OK(engine_->Close());
    engine_.reset();
    Open();
  }
  // Opens on the fault-injecting file system, every WAL sync passing gate_.
  void OpenHooked(const EngineOptions& options) {
    internal::StoreHooks hooks{fs_, &gate_};
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"T"}));
  }
  // Commits t/k = "old", then t/k = "new" and a fact on writer_, and returns once the second
  // commit's sync is held at the gate (its write is in RocksDB, readable, not durable).
  void CommitNewWhileSyncHeld() {
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Put("t", "k", "old"));
    ASSERT_OK(txn.Commit());
    gate_.Close();
    writer_ = std::thread([this] {
      Txn held = engine_->Begin();
      EXPECT_OK(held.Put("t", "k", "new"));
      EXPECT_OK(held.Emit("T", "k", "p"));
      writer_status_ = held.Commit(&writer_result_);
    });
    gate_.AwaitHeldSync();
  }

  void TearDown() override {
    gate_.Open();
    if (writer_.joinable()) writer_.join();
  }

  TempDir dir_;
  std::shared_ptr<io::FaultInjectionFileSystem> fs_ =
      std::make_shared<io::FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  SyncGate gate_{fs_.get()};
  std::unique_ptr<Engine> engine_;
  uint64_t committed_ = 0;  // by CommitOne
  std::thread writer_;
  Status writer_status_;
  CommitResult writer_result_;
};

// A transaction's state writes and facts are visible together after commit, and the commit
// reports the fact ids it was given.
TEST_P(EngineTest, CommitWritesStateAndFactsTogether) {
  Open();
  EXPECT_STREQ(engine_->io_backend(), GetParam() == IoBackend::kPosix ? "posix" : "uring");
  ASSERT_OK(engine_->DeclareTypes({"OrderCreated"}));
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Put("orders", "o-1", "pending"));
  ASSERT_OK(txn.Emit("OrderCreated", "c-1", "one", {.headers = {{"trace", "t1"}}}));
  ASSERT_OK(txn.Emit("OrderCreated", "c-1", "two"));
  CommitResult result;
  ASSERT_OK(txn.Commit(&result));
  EXPECT_EQ(result.first_fact_id, 1u);
  EXPECT_EQ(result.last_fact_id, 2u);
  EXPECT_EQ(engine_->durable_lsn(), 2u);

  std::string value;
  ASSERT_OK(engine_->Get("orders", "o-1", &value));
  EXPECT_EQ(value, "pending");
  std::vector<Fact> facts;
  ASSERT_OK(engine_->ReadFacts(engine_->PartitionOf("c-1"), 0, 10, &facts));
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[0].id, 1u);
  EXPECT_EQ(facts[0].payload, "one");
  EXPECT_EQ(facts[0].type, "OrderCreated");
  EXPECT_EQ(facts[0].key, "c-1");
  ASSERT_EQ(facts[0].headers.size(), 1u);
  EXPECT_EQ(facts[0].headers[0].second, "t1");
  EXPECT_EQ(facts[1].id, 2u);
  EXPECT_EQ(facts[1].partition, engine_->PartitionOf("c-1"));
  EXPECT_GT(facts[1].commit_ms, 0);

  ASSERT_OK(txn.Delete("orders", "o-1").ok() ? Status::Internal("commit twice allowed")
                                             : Status::OK());
  Txn del = engine_->Begin();
  ASSERT_OK(del.Delete("orders", "o-1"));
  ASSERT_OK(del.Commit());
  EXPECT_TRUE(engine_->Get("orders", "o-1", &value).IsNotFound());
}

// A transaction that is never committed leaves nothing behind.
TEST_P(EngineTest, AbandonedTransactionWritesNothing) {
  Open();
  ASSERT_OK(engine_->DeclareTypes({"T"}));
  {
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Put("t", "k", "v"));
    ASSERT_OK(txn.Emit("T", "k", "p"));
  }
  std::string value;
  EXPECT_TRUE(engine_->Get("t", "k", &value).IsNotFound());
  EXPECT_EQ(engine_->durable_lsn(), 0u);
}

// After a reopen, LSNs continue where they stopped and state, facts and declared types are intact.
TEST_P(EngineTest, ReopenRecoversEverythingAndLsnsContinue) {
  Open();
  ASSERT_OK(engine_->DeclareTypes({"A", "B"}));
  for (int i = 0; i < 100; ++i) {
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Put("t", "k" + std::to_string(i), std::to_string(i)));
    ASSERT_OK(txn.Emit(i % 2 ? "A" : "B", "key", "payload-" + std::to_string(i)));
    ASSERT_OK(txn.Commit());
  }
  Reopen();
  EXPECT_EQ(engine_->durable_lsn(), 100u);
  EXPECT_EQ(engine_->DeclaredTypes(), (std::vector<std::string>{"A", "B"}));
  std::vector<Fact> facts;
  ASSERT_OK(engine_->ReadFacts(engine_->PartitionOf("key"), 0, 1000, &facts));
  ASSERT_EQ(facts.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(facts[i].id, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(facts[i].payload, "payload-" + std::to_string(i));
  }
  std::string value;
  ASSERT_OK(engine_->Get("t", "k99", &value));
  EXPECT_EQ(value, "99");
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Emit("A", "key", "after"));
  CommitResult result;
  ASSERT_OK(txn.Commit(&result));
  EXPECT_EQ(result.first_fact_id, 101u);
}

// Many producer threads commit concurrently; every commit is durable once acknowledged and fact
// ids are unique and dense.
TEST_P(EngineTest, ConcurrentProducersGetUniqueDenseIds) {
  Open();
  ASSERT_OK(engine_->DeclareTypes({"T"}));
  constexpr int kThreads = 8, kCommits = 300;
  std::vector<std::vector<uint64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCommits; ++i) {
        Txn txn = engine_->Begin();
        EXPECT_OK(txn.Emit("T", std::to_string(i), "x"));
        EXPECT_OK(txn.Emit("T", std::to_string(i), "y"));
        CommitResult result;
        EXPECT_OK(txn.Commit(&result));
        EXPECT_EQ(result.last_fact_id, result.first_fact_id + 1);
        EXPECT_LE(result.last_fact_id, engine_->durable_lsn());
        ids[t].push_back(result.first_fact_id);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::vector<uint64_t> all;
  for (auto& v : ids) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), size_t{kThreads * kCommits});
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], 1 + 2 * i);
  EXPECT_EQ(engine_->durable_lsn(), uint64_t{2 * kThreads * kCommits});
}

// CommitAsync calls back exactly once with the outcome; the callback runs on an engine thread.
TEST_P(EngineTest, CommitAsyncCallsBackOnce) {
  Open();
  ASSERT_OK(engine_->DeclareTypes({"T"}));
  constexpr int kCommits = 500;
  std::atomic<int> called{0};
  std::atomic<uint64_t> max_id{0};
  for (int i = 0; i < kCommits; ++i) {
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Emit("T", "k", "p"));
    ASSERT_OK(txn.CommitAsync([&](const Status& s, const CommitResult& r) {
      EXPECT_OK(s);
      uint64_t seen = max_id.load();
      while (r.last_fact_id > seen && !max_id.compare_exchange_weak(seen, r.last_fact_id)) {
      }
      // A blocking commit from a callback would deadlock and is refused.
      Txn inner = engine_->Begin();
      EXPECT_OK(inner.Put("t", "k", "v"));
      EXPECT_TRUE(inner.Commit().IsInvalidArgument());
      called++;
    }));
    EXPECT_TRUE(txn.CommitAsync([](const Status&, const CommitResult&) {}).IsInvalidArgument());
  }
  for (int i = 0; i < 10000 && called.load() < kCommits; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_OK(engine_->Close());
  EXPECT_EQ(called.load(), kCommits);
  EXPECT_EQ(max_id.load(), uint64_t{kCommits});
}

// Every bad input named in the contract is refused with a message naming the problem, and what
// was stored before is untouched.
TEST_P(EngineTest, BadInputIsRefusedClearly) {
  Open();
  ASSERT_OK(engine_->DeclareTypes({"T"}));
  Txn good = engine_->Begin();
  ASSERT_OK(good.Put("t", "k", "v"));
  ASSERT_OK(good.Emit("T", "k", "p"));
  ASSERT_OK(good.Commit());

  auto expect_invalid = [](const Status& s, const std::string& needle) {
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  };
  Txn txn = engine_->Begin();
  expect_invalid(txn.Put("", "k", "v"), "table name is empty");
  expect_invalid(txn.Put(std::string(256, 't'), "k", "v"), "table name of 256 bytes");
  expect_invalid(txn.Put("t", "", "v"), "key is empty");
  expect_invalid(txn.Put("t", std::string(kKeyBytesMax + 1, 'k'), "v"), "key of 4097 bytes");
  expect_invalid(txn.Put("t", "k", std::string(kValueBytesMax + 1, 'v')), "value of");
  expect_invalid(txn.Put(std::string("a\0b", 3), "k", "v"), "NUL");
  expect_invalid(txn.Emit("", "k", "p"), "fact type is empty");
  expect_invalid(txn.Emit(std::string(256, 'T'), "k", "p"), "fact type of 256 bytes");
  expect_invalid(txn.Emit("Nope", "k", "p"), "'Nope' is not declared");
  expect_invalid(txn.Emit("T", "k", ""), "payload is empty");
  expect_invalid(txn.Emit("T", std::string(kKeyBytesMax + 1, 'k'), "p"), "fact key of");
  expect_invalid(txn.Emit("T", "k", std::string(kValueBytesMax + 1, 'p')), "fact payload of");
  expect_invalid(txn.Emit("T", "k", "p", {.headers = {}, .deliver_at_ms = -1}), "deliver_at_ms");
  EXPECT_EQ(txn.fact_count(), 0u);
  EXPECT_EQ(txn.write_count(), 0u);
  ASSERT_OK(txn.Put("t", "k2", "v2"));
  ASSERT_OK(txn.Commit());
  expect_invalid(txn.Commit(), "already committed");
  expect_invalid(txn.Put("t", "k", "v"), "already committed");

  EngineOptions options;
  expect_invalid(ParseEngineOptions("bogus=1", &options), "unknown engine option 'bogus'");
  expect_invalid(ParseEngineOptions("partitions=abc", &options), "partitions");
  expect_invalid(ParseEngineOptions("durability=maybe", &options), "sync | buffered");
  expect_invalid(ParseEngineOptions("io", &options), "no '=value'");
  expect_invalid(ParseEngineOptions("block_cache_bytes=1000", &options), "block_cache_bytes");
  EXPECT_EQ(options.partitions, 0u);  // the stored value, or 16 at creation
  EXPECT_FALSE(options.ordering.has_value());
  ASSERT_OK(ParseEngineOptions(" partitions = 8 ; io=posix; block_cache_bytes=8388608", &options));
  EXPECT_EQ(options.partitions, 8u);
  EXPECT_EQ(options.io, IoBackend::kPosix);
  EXPECT_EQ(options.block_cache_bytes, 8u << 20);
  expect_invalid(engine_->DeclareTypes({""}), "fact type is empty");

  std::string value;
  ASSERT_OK(engine_->Get("t", "k", &value));
  EXPECT_EQ(value, "v");
  std::vector<Fact> facts;
  ASSERT_OK(engine_->ReadFacts(engine_->PartitionOf("k"), 0, 10, &facts));
  EXPECT_EQ(facts.size(), 1u);

  // After close, everything answers Closed.
  Txn late = engine_->Begin();
  ASSERT_OK(late.Put("t", "k3", "v"));
  ASSERT_OK(engine_->Close());
  EXPECT_TRUE(late.Commit().IsClosed());
  EXPECT_TRUE(engine_->Get("t", "k", &value).IsClosed());
  EXPECT_TRUE(engine_->Begin().Put("t", "k", "v").IsClosed());
  EXPECT_TRUE(engine_->ReadFacts(0, 0, 1, &facts).IsClosed());
}

// State keys, fact keys, payloads and header values are bytes: NUL bytes, 8-byte big-endian
// integers and non-UTF-8 bytes are taken whole, kept apart from their prefixes, and survive a
// reopen. A missing binary key is named in hex.
TEST_P(EngineTest, BinaryKeysAndValuesAreTakenWhole) {
  Open();
  ASSERT_OK(engine_->DeclareTypes({"T"}));
  auto be64 = [](uint64_t value) {
    std::string key;
    codec::PutFixed64BE(&key, value);
    return key;
  };
  const std::vector<std::string> keys = {be64(1),
                                         be64(256),
                                         std::string("\0", 1),
                                         std::string("a\0b", 3),
                                         "a",
                                         std::string("\xff\xfe", 2)};
  Txn txn = engine_->Begin();
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_OK(txn.Put("t", keys[i], std::string("v\0", 2) + std::to_string(i)));
  }
  const std::string fact_key("\0k\xff", 3), payload("\0p\0", 3), header("\0h", 2);
  ASSERT_OK(txn.Emit("T", fact_key, payload, {.headers = {{"h", header}}}));
  ASSERT_OK(txn.Commit());

  auto verify = [&] {
    for (size_t i = 0; i < keys.size(); ++i) {
      std::string value;
      ASSERT_OK(engine_->Get("t", keys[i], &value)) << i;
      EXPECT_EQ(value, std::string("v\0", 2) + std::to_string(i)) << i;
    }
    std::vector<Fact> facts;
    ASSERT_OK(engine_->ReadFacts(engine_->PartitionOf(fact_key), 0, 10, &facts));
    ASSERT_EQ(facts.size(), 1u);
    EXPECT_EQ(facts[0].key, fact_key);
    EXPECT_EQ(facts[0].payload, payload);
    ASSERT_EQ(facts[0].headers.size(), 1u);
    EXPECT_EQ(facts[0].headers[0].second, header);
  };
  verify();
  Reopen();
  verify();

  Txn removal = engine_->Begin();
  ASSERT_OK(removal.Delete("t", std::string("a\0b", 3)));
  ASSERT_OK(removal.Commit());
  std::string value;
  Status s = engine_->Get("t", std::string("a\0b", 3), &value);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("0x610062"), std::string::npos) << s.ToString();
  ASSERT_OK(engine_->Get("t", "a", &value));  // its prefix is another key
  EXPECT_EQ(value, std::string("v\0", 2) + "4");
}

// Names (fact types, tables, header names, consumer ids) are valid UTF-8 without NUL: anything
// else is refused naming what and where, before it is stored.
TEST_P(EngineTest, NamesMustBeUtf8WithoutNul) {
  Open();
  ASSERT_OK(engine_->DeclareTypes({"T", "Commandé"}));
  const std::string bad[] = {"\xff", "a\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ab\xe2\x82"};
  auto expect_invalid = [](const Status& s, const std::string& needle) {
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  };
  Txn txn = engine_->Begin();
  for (const std::string& name : bad) {
    expect_invalid(engine_->DeclareTypes({name}), "fact type 0x");
    expect_invalid(txn.Put(name, "k", "v"), "table name 0x");
    expect_invalid(txn.Emit("T", "k", "p", {.headers = {{name, "v"}}}), "not valid UTF-8");
    expect_invalid(SetCursor(*engine_, name, 0), "consumer id 0x");
  }
  const std::string with_nul("a\0b", 3);
  expect_invalid(txn.Put(with_nul, "k", "v"), "contains a NUL byte");
  expect_invalid(txn.Emit("T", "k", "p", {.headers = {{with_nul, "v"}}}), "header name");
  expect_invalid(engine_->DeclareTypes({with_nul}), "fact type");
  EXPECT_EQ(txn.write_count() + txn.fact_count(), 0u);
  ASSERT_OK(txn.Put("tablé", "k", "v"));
  ASSERT_OK(txn.Emit("Commandé", "k", "p", {.headers = {{"en-tête", "v"}}}));
  ASSERT_OK(txn.Commit());
  EXPECT_EQ(engine_->DeclaredTypes(), (std::vector<std::string>{"Commandé", "T"}));
}

// A second engine on the same directory is refused; so is a partition count that differs from
// the stored one, and a directory that holds some other RocksDB database.
TEST_P(EngineTest, RefusesConflictingOpens) {
  EngineOptions options = Options();
  options.partitions = 4;
  Open(options);
  std::unique_ptr<Engine> second;
  Status s = Engine::Open(dir_.db(), Options(), &second);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("in use"), std::string::npos) << s.ToString();
  ASSERT_OK(engine_->Close());
  engine_.reset();
  options.partitions = 8;
  s = Engine::Open(dir_.db(), options, &engine_);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("4 partitions"), std::string::npos) << s.ToString();
  Open();  // the default keeps what is stored
  EXPECT_EQ(engine_->partitions(), 4u);
  ASSERT_OK(engine_->Close());
  engine_.reset();

  // Explicit options that contradict the stored database fail the open naming both values, also
  // when they are the creation defaults (16 partitions, ordering=partition); defaults take what
  // is stored; explicit options that agree are accepted.
  TempDir two;
  EngineOptions created = Options();
  ASSERT_OK(ParseEngineOptions("partitions=2;ordering=none", &created));
  ASSERT_OK(Engine::Open(two.db(), created, &engine_));
  ASSERT_OK(engine_->Close());
  engine_.reset();
  struct Contradiction {
    const char* text;
    const char* stored;
    const char* given;
  };
  for (const Contradiction& c :
       {Contradiction{"partitions=16", "2 partitions", "partitions=16"},
        Contradiction{"ordering=partition", "ordering=none", "ordering=partition"},
        Contradiction{"partitions=2;ordering=global", "ordering=none", "ordering=global"}}) {
    EngineOptions explicit_options = Options();
    ASSERT_OK(ParseEngineOptions(c.text, &explicit_options));
    s = Engine::Open(two.db(), explicit_options, &engine_);
    EXPECT_TRUE(s.IsInvalidArgument()) << c.text << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.stored), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(c.given), std::string::npos) << s.ToString();
  }
  for (const char* text : {"", "partitions=2;ordering=none"}) {
    EngineOptions agreeing = Options();
    ASSERT_OK(ParseEngineOptions(text, &agreeing));
    ASSERT_OK(Engine::Open(two.db(), agreeing, &engine_)) << text;
    EXPECT_EQ(engine_->partitions(), 2u);
    EXPECT_EQ(engine_->ordering(), Ordering::kNone);
    ASSERT_OK(engine_->Close());
    engine_.reset();
  }
  // A new database gets the creation defaults.
  TempDir fresh;
  ASSERT_OK(Engine::Open(fresh.db(), Options(), &engine_));
  EXPECT_EQ(engine_->partitions(), kDefaultPartitions);
  EXPECT_EQ(engine_->ordering(), Ordering::kPartition);
  ASSERT_OK(engine_->Close());
  engine_.reset();

  std::string other = dir_.path() + "/other";
  {
    rocksdb::Options rocks;
    rocks.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocks, other, &db).ok());
    delete db;
  }
  std::unique_ptr<Engine> foreign;
  s = Engine::Open(other, Options(), &foreign);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("not a Wharf database"), std::string::npos);
  EngineOptions no_create = Options();
  no_create.create_if_missing = false;
  s = Engine::Open(dir_.path() + "/missing", no_create, &foreign);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
}

// Opens the engine's RocksDB directly, to tamper with stored records as a bad disk would.
void WithRawDb(
    const std::string& path,
    const std::function<void(rocksdb::DB*, std::vector<rocksdb::ColumnFamilyHandle*>&)>& fn) {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
  for (int cf = 0; cf < internal::kCfCount; ++cf) {
    descriptors.emplace_back(internal::CfName(static_cast<internal::Cf>(cf)),
                             rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), path, descriptors, &handles, &db).ok());
  fn(db, handles);
  for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
  delete db;
}

// A record whose bytes changed on disk is reported as corruption naming the fact, never returned.
TEST_P(EngineTest, ChecksumMismatchIsReportedAsCorruption) {
  Open();
  ASSERT_OK(engine_->DeclareTypes({"T"}));
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Put("t", "k", "value"));
  ASSERT_OK(txn.Emit("T", "key", "payload"));
  ASSERT_OK(txn.Commit());
  uint32_t partition = engine_->PartitionOf("key");
  ASSERT_OK(engine_->Close());
  engine_.reset();

  WithRawDb(dir_.db(), [&](rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
    auto* outbox = handles[1 + internal::kOutbox];
    auto* state = handles[1 + internal::kState];
    std::string key = tables::outbox::Key(partition, 1), record;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), outbox, key, &record).ok());
    record.back() ^= 0x01;  // one flipped bit in the payload
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), outbox, key, record).ok());
    std::string state_key = tables::state::Key("t", "k"), value;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), state, state_key, &value).ok());
    value[3] ^= 0x40;  // inside the checksum
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), state, state_key, value).ok());
  });

  Open();
  std::vector<Fact> facts;
  Status s = engine_->ReadFacts(partition, 0, 10, &facts);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("fact 1"), std::string::npos) << s.ToString();
  std::string value;
  s = engine_->Get("t", "k", &value);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
}

// A database written by a newer format version is refused with a clear error.
TEST_P(EngineTest, NewerFormatVersionIsRefused) {
  Open();
  ASSERT_OK(engine_->Close());
  engine_.reset();
  WithRawDb(dir_.db(), [&](rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
    std::string body;
    codec::PutFixed64BE(&body, internal::kFormatVersion + 1);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[1 + internal::kMeta],
                        tables::meta::kFormatVersion, codec::Seal(body))
                    .ok());
  });
  Status s = Engine::Open(dir_.db(), Options(), &engine_);
  EXPECT_EQ(s.code(), Status::Code::kNotSupported) << s.ToString();
  EXPECT_NE(s.message().find("newer than this Wharf supports"), std::string::npos);
}

// With the queue full (capacity 1, taken by a commit whose sync is held at the gate), another
// commit waits for space under when_full=block (the default) and then commits; under
// when_full=error it is refused at once with Busy. Nothing is lost either way.
TEST_P(EngineTest, FullQueueIsBusyOrBlocks) {
  for (WhenFull when_full : {WhenFull::kBlock, WhenFull::kError}) {
    SCOPED_TRACE(when_full == WhenFull::kBlock ? "block" : "error");
    EngineOptions options = Options();
    options.queue_capacity = 1;
    EXPECT_EQ(options.when_full, WhenFull::kBlock);  // the default
    options.when_full = when_full;
    OpenHooked(options);
    ASSERT_NO_FATAL_FAILURE(CommitNewWhileSyncHeld());  // holds the only slot
    std::atomic<bool> second_done{false};
    Status second;
    std::thread producer([&] {
      Txn txn = engine_->Begin();
      EXPECT_OK(txn.Emit("T", "k", "second"));
      second = txn.Commit();
      second_done = true;
    });
    if (when_full == WhenFull::kBlock) {
      // It must wait for space: it cannot finish while the slot is held.
      const internal::Committer* committer = internal::EngineInternal::Core(*engine_)->committer();
      while (!second_done.load() && committer->space_waiters() == 0) std::this_thread::yield();
      EXPECT_FALSE(second_done.load()) << second.ToString();
      gate_.Open();
      producer.join();
      EXPECT_OK(second);
    } else {
      producer.join();
      EXPECT_TRUE(second.IsBusy()) << second.ToString();
      EXPECT_NE(second.message().find("queue is full"), std::string::npos);
      gate_.Open();
    }
    writer_.join();
    ASSERT_OK(writer_status_);
    std::vector<Fact> facts;
    ASSERT_OK(engine_->ReadFacts(engine_->PartitionOf("k"), 0, 10, &facts));
    // Cumulative over both halves: the held commit's fact each time, the waiting one's once.
    EXPECT_EQ(facts.size(), when_full == WhenFull::kBlock ? 2u : 3u);
    ASSERT_OK(engine_->Close());
    engine_.reset();
  }
}

// Buffered durability acknowledges a commit once written, before any sync: a power cut before
// buffered_sync_ms has passed loses it, and until then it is not durable (durable_lsn, which
// consumers see up to, stays below it). Once a sync on the interval has run, it survives a cut;
// and Close() syncs what is left.
TEST_P(EngineTest, BufferedDurabilityPersistsOnClose) {
  OpenHooked(Options());  // created and declared durably (sync mode)
  ASSERT_OK(engine_->Close());
  EngineOptions options = Options();
  options.durability = Durability::kBuffered;
  auto commit_50 = [&](const std::string& payload) {
    for (int i = 0; i < 50; ++i) {
      Txn txn = engine_->Begin();
      ASSERT_OK(txn.Emit("T", "k", payload));
      ASSERT_OK(txn.Commit());
    }
  };
  auto cut_and_count = [&](const std::string& payload) -> size_t {
    fs_->Cut();
    engine_->Close().PermitUncheckedError();  // the final sync fails: the power is gone
    engine_.reset();
    EXPECT_TRUE(fs_->DropUnsyncedData().ok());
    OpenHooked(Options());
    std::vector<Fact> facts;
    EXPECT_OK(engine_->ReadFacts(engine_->PartitionOf("k"), 0, SIZE_MAX, &facts));
    EXPECT_OK(engine_->Close());
    return std::count_if(facts.begin(), facts.end(),
                         [&](const Fact& fact) { return fact.payload == payload; });
  };

  // 1. Acknowledged before any sync: an interval longer than the test means none ran.
  options.buffered_sync_ms = 3'600'000;
  OpenHooked(options);
  const uint64_t syncs_before =
      internal::EngineInternal::Core(*engine_)->committer()->stats().syncs;
  ASSERT_NO_FATAL_FAILURE(commit_50("before-interval"));
  EXPECT_LT(engine_->durable_lsn(), engine_->last_lsn());  // acknowledged, not durable yet
  // One sync: the id reservation's, before the first commit was written (none since).
  EXPECT_EQ(internal::EngineInternal::Core(*engine_)->committer()->stats().syncs, syncs_before + 1);
  EXPECT_GT(fs_->unsynced_bytes(), 0u);
  EXPECT_EQ(cut_and_count("before-interval"), 0u);

  // 2. After the interval: once the interval's sync has made every written byte durable (the
  // fault-injecting file system's account; no commit waits for it), everything acknowledged
  // survives the cut.
  options.buffered_sync_ms = 5;
  OpenHooked(options);
  ASSERT_NO_FATAL_FAILURE(commit_50("after-interval"));
  // (The round counts itself in stats() just after the file system recorded its sync.)
  const internal::Committer* committer = internal::EngineInternal::Core(*engine_)->committer();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((fs_->unsynced_bytes() > 0 || committer->stats().syncs == 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(fs_->unsynced_bytes(), 0u) << "no sync on the interval";
  EXPECT_GT(committer->stats().syncs, 0u);
  EXPECT_EQ(cut_and_count("after-interval"), 50u);

  // 3. Close syncs what no interval has.
  options.buffered_sync_ms = 3'600'000;
  OpenHooked(options);
  ASSERT_NO_FATAL_FAILURE(commit_50("closed"));
  ASSERT_OK(engine_->Close());
  engine_.reset();
  ASSERT_TRUE(fs_->DropUnsyncedData().ok());  // a power cut after the close
  OpenHooked(Options());
  std::vector<Fact> facts;
  ASSERT_OK(engine_->ReadFacts(engine_->PartitionOf("k"), 0, SIZE_MAX, &facts));
  EXPECT_EQ(std::count_if(facts.begin(), facts.end(),
                          [](const Fact& fact) { return fact.payload == "closed"; }),
            50);
}

// commit_ms is the time the transaction committed, read once for the whole transaction: not the
// time of each Emit.
TEST_P(EngineTest, CommitMsIsStampedAtCommit) {
  auto now_ms = std::make_shared<std::atomic<int64_t>>(1'000);
  internal::EngineHooks hooks;
  hooks.clock_ms = [now_ms] { return now_ms->load(); };
  Open(Options(), hooks);
  ASSERT_OK(engine_->DeclareTypes({"T"}));
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Emit("T", "k", "first"));
  *now_ms = 2'000;
  ASSERT_OK(txn.Emit("T", "k", "second"));
  *now_ms = 3'000;
  ASSERT_OK(txn.Commit());
  *now_ms = 4'000;
  std::vector<Fact> facts;
  ASSERT_OK(engine_->ReadFacts(engine_->PartitionOf("k"), 0, 10, &facts));  // checksums verified
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[0].commit_ms, 3'000);
  EXPECT_EQ(facts[1].commit_ms, 3'000);
  Reopen();
  facts.clear();
  ASSERT_OK(engine_->ReadFacts(engine_->PartitionOf("k"), 0, 10, &facts));
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[1].commit_ms, 3'000);
}

// With wal_prefill_bytes, new WAL files are zero-filled spares that the WAL overwrites. A crash
// leaves such a WAL with zeros after its last record, which recovery must read as the end of the
// log, losing nothing acknowledged. The "crash" is a copy of the directory taken while the engine
// is open: every commit was acknowledged (so synced) and nothing is being written.
TEST_P(EngineTest, WalSpareZeroTailReadsAsTheEndAfterACrash) {
  ASSERT_NO_FATAL_FAILURE(OpenAndCommitUntilSpareWal());
  for (int i = 0; i < 10; ++i) CommitOne();
  const EngineOptions options = SpareOptions();
  const uint64_t last = committed_ - 1;

  // The newest WAL holds a few records, then zeros up to the spare's size.
  std::filesystem::path newest;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.db())) {
    if (entry.path().extension() == ".log" && entry.path().filename() > newest.filename()) {
      newest = entry.path();
    }
  }
  ASSERT_FALSE(newest.empty());
  ASSERT_GE(std::filesystem::file_size(newest), options.wal_prefill_bytes);
  std::ifstream wal(newest, std::ios::binary);
  wal.seekg(-4096, std::ios::end);
  std::string tail(4096, 'x');
  wal.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  EXPECT_EQ(tail, std::string(4096, '\0'));

  const std::filesystem::path crashed = dir_.path() + "/crashed";
  // The files as a crash leaves them. The live engine's admin socket is no file to copy (a crash
  // leaves it behind, stale, and the next open replaces it).
  std::filesystem::create_directories(crashed);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_.db())) {
    const auto target = crashed / std::filesystem::relative(entry.path(), dir_.db());
    if (entry.is_directory()) std::filesystem::create_directories(target);
    if (entry.is_regular_file()) std::filesystem::copy_file(entry.path(), target);
  }
  std::unique_ptr<Engine> recovered;
  ASSERT_OK(Engine::Open(crashed, options, &recovered));
  EXPECT_EQ(recovered->durable_lsn(), committed_);
  std::vector<Fact> facts;
  ASSERT_OK(recovered->ReadFacts(recovered->PartitionOf("key"), 0, SIZE_MAX, &facts));
  ASSERT_EQ(facts.size(), committed_);
  EXPECT_EQ(facts.back().payload, std::to_string(last) + std::string(1000, 'p'));
  std::string value;
  ASSERT_OK(recovered->Get("t", "k" + std::to_string(last), &value));
  EXPECT_EQ(value, std::to_string(last));
  ASSERT_OK(recovered->Close());
}

// A tool tailing the database (the CLI's --follow: a RocksDB secondary instance, CatchUp) must see
// records written into a spare WAL's zeros after it caught up, though they land where it already
// read zeros.
TEST_P(EngineTest, InspectorFollowsASpareWal) {
  ASSERT_NO_FATAL_FAILURE(OpenAndCommitUntilSpareWal());
  std::unique_ptr<Inspector> inspector;
  ASSERT_OK(Inspector::Open(dir_.db(), &inspector));
  const uint32_t partition = engine_->PartitionOf("key");
  for (int round = 0; round < 3; ++round) {
    ASSERT_OK(inspector->CatchUp());
    std::vector<Fact> facts;
    ASSERT_OK(inspector->ReadFacts(partition, 0, SIZE_MAX, &facts));
    ASSERT_EQ(facts.size(), committed_) << "round " << round;
    for (int i = 0; i < 5; ++i) CommitOne();
  }
}

// Reads from outside a consumer return only durable state: a read
// that saw a commit whose sync is in flight waits for it, and never returns what a power cut
// then takes back.
// The read sees the value whose sync is held, so it waits; once the sync completes it returns
// that value, by then acknowledged durable. With nothing in flight a read does not wait at all.
TEST_P(EngineTest, ReadWaitsForTheSyncOfWhatItSaw) {
  OpenHooked(Options());
  ASSERT_NO_FATAL_FAILURE(CommitNewWhileSyncHeld());
  std::string value;
  uint64_t durable_after_read = 0;
  std::thread reader([&] {
    EXPECT_OK(engine_->Get("t", "k", &value));
    durable_after_read = engine_->durable_lsn();
  });
  gate_.Open();
  reader.join();
  writer_.join();
  ASSERT_OK(writer_status_);
  EXPECT_EQ(value, "new");
  EXPECT_GE(durable_after_read, writer_result_.last_fact_id) << "returned before the sync";
  // Nothing in flight now: Engine::Get and Txn::Get answer at once.
  EXPECT_OK(engine_->Get("t", "k", &value));
  EXPECT_EQ(value, "new");
  Txn txn = engine_->Begin();
  EXPECT_OK(txn.Get("t", "k", &value));
  EXPECT_EQ(value, "new");
}

// The power goes while the sync is held: the read, which saw the unsynced value, must not return
// it (it reports that durability could not be established), and after the cut the value is gone
// while the acknowledged one is there.
TEST_P(EngineTest, ReadNeverReturnsWhatAPowerCutTakesBack) {
  OpenHooked(Options());
  ASSERT_NO_FATAL_FAILURE(CommitNewWhileSyncHeld());
  std::string value;
  Status read;
  std::thread reader([&] { read = engine_->Get("t", "k", &value); });
  fs_->Cut();
  gate_.Open();
  reader.join();
  writer_.join();
  EXPECT_FALSE(writer_status_.ok());
  EXPECT_FALSE(read.ok() && value == "new") << "returned state the power cut takes back";
  EXPECT_TRUE(read.IsIOError() || read.IsClosed()) << read.ToString();
  engine_->Close().PermitUncheckedError();
  engine_.reset();
  ASSERT_TRUE(fs_->DropUnsyncedData().ok());
  OpenHooked(Options());
  ASSERT_OK(engine_->Get("t", "k", &value));
  EXPECT_EQ(value, "old");
}

INSTANTIATE_TEST_SUITE_P(Backends, EngineTest,
                         ::testing::Values(IoBackend::kPosix, IoBackend::kUring),
                         [](const auto& param_info) {
                           return std::string(ToString(param_info.param));
                         });

}  // namespace
}  // namespace wharf
