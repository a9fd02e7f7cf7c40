// Store's side of the WAL spares: a switch is declined while the previous switch's flush of the
// meta family is still running (another would fill the family's last write buffer and stall every
// commit until that flush ends).
#include "engine/store/store.h"

#include <gtest/gtest.h>
#include <rocksdb/file_system.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "test_util.h"

namespace wharf::internal {
namespace {

constexpr auto kPatience = std::chrono::seconds(30);  // a hang fails, not a slow machine

// Holds every SST file creation (so every flush) while its gate is shut.
class SstGateFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit SstGateFileSystem(std::shared_ptr<rocksdb::FileSystem> base)
      : FileSystemWrapper(std::move(base)) {}
  static const char* kClassName() { return "SstGateFileSystem"; }
  const char* Name() const override { return kClassName(); }

  void Shut() {
    std::lock_guard lock(mu_);
    shut_ = true;
  }
  void Open() {
    std::lock_guard lock(mu_);
    shut_ = false;
    cv_.notify_all();
  }
  // Waits until a flush is held at the gate.
  bool WaitForHeldFlush() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kPatience, [this] { return held_ > 0; });
  }

  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    if (fname.size() > 4 && fname.compare(fname.size() - 4, 4, ".sst") == 0) {
      std::unique_lock lock(mu_);
      ++held_;
      cv_.notify_all();
      cv_.wait(lock, [this] { return !shut_; });
      --held_;
    }
    return target()->NewWritableFile(fname, options, result, dbg);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool shut_ = false;
  int held_ = 0;
};

uint64_t ImmutableMetaMemtables(const Store& store) {
  uint64_t count = 0;
  EXPECT_TRUE(store.db()->GetIntProperty(store.cf(kMeta),
                                         rocksdb::DB::Properties::kNumImmutableMemTable, &count));
  return count;
}

void PutMeta(const Store& store, const std::string& value) {
  ASSERT_TRUE(
      store.db()->Put(rocksdb::WriteOptions(), store.cf(kMeta), "store_test_key", value).ok());
}

TEST(StoreTest, DeclinesAWalSwitchWhileTheLastOneIsFlushing) {
  testing::TempDir dir;
  auto gate = std::make_shared<SstGateFileSystem>(rocksdb::FileSystem::Default());
  EngineOptions options;
  options.wal_prefill_bytes = 0;  // no spares' thread: this test alone asks for switches
  StoreHooks hooks;
  hooks.base_fs = gate;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.db(), options, hooks, &store).ok());

  gate->Shut();
  PutMeta(*store, "first");
  EXPECT_TRUE(store->SwitchWal());
  ASSERT_TRUE(gate->WaitForHeldFlush());
  EXPECT_EQ(ImmutableMetaMemtables(*store), 1u);

  // The first switch's flush cannot finish: a second switch is declined, and switches nothing.
  PutMeta(*store, "second");
  EXPECT_FALSE(store->SwitchWal());
  EXPECT_EQ(ImmutableMetaMemtables(*store), 1u);

  gate->Open();
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (ImmutableMetaMemtables(*store) > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(ImmutableMetaMemtables(*store), 0u);
  EXPECT_TRUE(store->SwitchWal());
  EXPECT_TRUE(store->Close().ok());
}

}  // namespace
}  // namespace wharf::internal
