// SnapshotStream against a real nats-server -js: a real backup (an engine with state and facts)
// uploaded in chunks, downloaded, restored and opened with its data; the rate limit and progress;
// a stream without direct gets read from its leader; snapshots without their done message
// invisible (an unfinished upload, a damaged backup refused); a chunk damaged in the stream found
// and named; pruning keeps the newest snapshots and deletes the rest (an unfinished upload too);
// the manifest parser. About 6 s in release, 16 s under ASan (a
// server, an engine and a ~1.5 MB backup per test).
#include "engine/replicate/snapshot_stream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "engine/replicate/snapshot_manifest.h"
#include "replicate/replicate_nats.h"
#include "wharf/backup.h"
#include "wharf/engine.h"

namespace wharf::internal {
namespace {

namespace fs = std::filesystem;
using testing::kDatabaseId;

constexpr const char* kStream = "orders";
constexpr int kRows = 1000;
constexpr size_t kRowBytes = 1500;  // random: ~1.5 MB of table file, more than two chunks

std::string RandomBytes(std::mt19937_64& random, size_t n) {
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>('a' + random() % 26);
  return bytes;
}

std::string Header(natsMsg* msg, const char* key) {
  const char* value = nullptr;
  return natsMsgHeader_Get(msg, key, &value) == NATS_OK ? value : "";
}

class SnapshotStreamTest : public testing::NatsFixture {
 protected:
  void SetUp() override {
    NatsFixture::SetUp();
    target_ = dir_.path() + "/backups";
    // An engine with facts and state rows, backed up once.
    EngineOptions options;
    options.partitions = 2;
    options.admin_socket = "off";
    std::unique_ptr<Engine> engine;
    ASSERT_OK(Engine::Open(dir_.path() + "/db", options, &engine));
    ASSERT_OK(engine->DeclareTypes({"A"}));
    std::mt19937_64 random(7);
    for (int i = 0; i < kRows; i += 50) {
      Txn txn = engine->Begin();
      for (int j = i; j < i + 50; ++j) {
        const std::string value = RandomBytes(random, kRowBytes);
        rows_["row-" + std::to_string(j)] = value;
        ASSERT_OK(txn.Put("rows", "row-" + std::to_string(j), value));
        ASSERT_OK(txn.Emit("A", "key-" + std::to_string(j % 4), "fact-" + std::to_string(j)));
      }
      ASSERT_OK(txn.Commit());
    }
    ASSERT_OK(engine->Backup(target_, {}, &backup_));
    ASSERT_OK(engine->Close());
    snapshots_ = std::make_unique<SnapshotStream>(connection_, kStream);
    ASSERT_OK(snapshots_->Ensure(1));
  }

  Status Upload(uint64_t covered_group, SnapshotInfo* info) {
    return snapshots_->Upload(target_, backup_.id, covered_group, backup_.last_fact_id, kDatabaseId,
                              backup_.format_version, info);
  }

  // Publishes a copy of `original`'s messages under the snapshot id `id`, with one byte of the
  // first chunk of `damaged_file` flipped (none when empty). Returns the copy's description.
  SnapshotInfo Republish(const SnapshotInfo& original, const std::string& id,
                         const std::string& damaged_file) {
    SnapshotInfo copy = original;
    copy.id = id;
    copy.first_sequence = 0;
    const std::string subject = std::string(kStream) + ".snapshots." + id + ".file";
    for (uint64_t seq = original.first_sequence; seq <= original.done_sequence; ++seq) {
      natsMsg* read = nullptr;
      EXPECT_EQ(js_GetMsg(&read, js_, snapshots_->name().c_str(), seq, nullptr, nullptr), NATS_OK);
      if (read == nullptr) continue;
      const bool done = seq == original.done_sequence;
      std::string data(natsMsg_GetData(read), static_cast<size_t>(natsMsg_GetDataLength(read)));
      const std::string file = Header(read, "Wharf-File");
      if (!done && file == damaged_file && Header(read, "Wharf-Offset") == "0") {
        data[data.size() / 2] ^= 0x5a;
      }
      const std::string target_subject =
          done ? std::string(kStream) + ".snapshots." + id + ".done" : subject;
      natsMsg* msg = nullptr;
      EXPECT_EQ(natsMsg_Create(&msg, target_subject.c_str(), nullptr, data.data(),
                               static_cast<int>(data.size())),
                NATS_OK);
      for (const char* key : {"Wharf-File", "Wharf-Offset", "Wharf-File-Bytes", "Wharf-Backup-Id",
                              "Wharf-Group", "Wharf-Last-Fact-Id", "Wharf-Database", "Wharf-Format",
                              "Wharf-Bytes", "Wharf-Files", "Wharf-Chunks"}) {
        const std::string value = Header(read, key);
        if (!value.empty()) natsMsgHeader_Set(msg, key, value.c_str());
      }
      natsMsgHeader_Set(msg, "Wharf-Snapshot", id.c_str());
      if (done) {
        natsMsgHeader_Set(msg, "Wharf-First-Seq", std::to_string(copy.first_sequence).c_str());
      }
      jsPubAck* ack = nullptr;
      EXPECT_EQ(js_PublishMsg(&ack, js_, msg, nullptr, nullptr), NATS_OK);
      if (ack != nullptr) {
        if (copy.first_sequence == 0) copy.first_sequence = ack->Sequence;
        if (done) copy.done_sequence = ack->Sequence;
        jsPubAck_Destroy(ack);
      }
      natsMsg_Destroy(msg);
      natsMsg_Destroy(read);
    }
    return copy;
  }

  // The messages of the snapshot stream under `subject_filter`.
  uint64_t Messages(const std::string& subject_filter) {
    jsOptions options;
    jsOptions_Init(&options);
    options.Stream.Info.SubjectsFilter = subject_filter.c_str();
    jsStreamInfo* info = nullptr;
    EXPECT_EQ(js_GetStreamInfo(&info, js_, snapshots_->name().c_str(), &options, nullptr), NATS_OK);
    uint64_t count = 0;
    if (info != nullptr && info->State.Subjects != nullptr) {
      for (int i = 0; i < info->State.Subjects->Count; ++i) {
        count += info->State.Subjects->List[i].Msgs;
      }
    }
    if (info != nullptr) jsStreamInfo_Destroy(info);
    return count;
  }

  std::string target_;
  BackupInfo backup_;
  std::map<std::string, std::string> rows_;
  std::unique_ptr<SnapshotStream> snapshots_;
};

TEST_F(SnapshotStreamTest, AnUploadedBackupDownloadsRestoresAndOpensWithItsData) {
  SnapshotInfo uploaded;
  ASSERT_OK(Upload(7, &uploaded));
  EXPECT_EQ(uploaded.id.size(), 16u);
  EXPECT_EQ(uploaded.files, backup_.files);
  EXPECT_EQ(uploaded.bytes, backup_.size_bytes);
  EXPECT_GT(uploaded.chunks, uploaded.files) << "a file of more than 512 KiB is split";
  EXPECT_LT(uploaded.first_sequence, uploaded.done_sequence);

  SnapshotInfo latest;
  ASSERT_OK(snapshots_->Latest(&latest));
  EXPECT_EQ(latest.id, uploaded.id);
  EXPECT_EQ(latest.backup_id, backup_.id);
  EXPECT_EQ(latest.covered_group, 7u);
  EXPECT_EQ(latest.last_fact_id, backup_.last_fact_id);
  EXPECT_EQ(latest.database_id, kDatabaseId);
  EXPECT_EQ(latest.format_version, backup_.format_version);
  EXPECT_EQ(latest.bytes, uploaded.bytes);
  EXPECT_EQ(latest.files, uploaded.files);
  EXPECT_EQ(latest.chunks, uploaded.chunks);
  EXPECT_EQ(latest.first_sequence, uploaded.first_sequence);
  EXPECT_EQ(latest.done_sequence, uploaded.done_sequence);
  EXPECT_GT(latest.created_ms, 0);
  Manifest manifest;
  ASSERT_OK(ParseManifest(latest.manifest, &manifest));
  EXPECT_EQ(manifest.files.size(), backup_.files);

  const std::string downloaded = dir_.path() + "/downloaded";
  ASSERT_OK(snapshots_->Download(latest, downloaded));
  for (const ManifestFile& file : manifest.files) {
    EXPECT_EQ(fs::file_size(downloaded + "/" + file.name), fs::file_size(target_ + "/" + file.name))
        << file.name;
  }
  Status s = snapshots_->Download(latest, downloaded);
  EXPECT_TRUE(s.IsInvalidArgument())
      << "not into a directory that holds something: " << s.ToString();

  const std::string restored = dir_.path() + "/restored";
  RestoreReport report;
  ASSERT_OK(Restore(downloaded, restored, {}, &report));
  EXPECT_EQ(report.backup.id, backup_.id);
  EXPECT_EQ(report.backup.last_fact_id, backup_.last_fact_id);
  EngineOptions options;
  options.partitions = 0;
  options.admin_socket = "off";
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(restored, options, &engine));
  EXPECT_EQ(engine->last_lsn(), backup_.last_fact_id);
  for (const auto& [key, value] : rows_) {
    std::string read;
    ASSERT_OK(engine->Get("rows", key, &read));
    ASSERT_EQ(read, value) << key;
  }
  size_t facts = 0;
  for (uint32_t p = 0; p < engine->partitions(); ++p) {
    std::vector<Fact> read;
    ASSERT_OK(engine->ReadFacts(p, 0, SIZE_MAX, &read));
    facts += read.size();
  }
  EXPECT_EQ(facts, static_cast<size_t>(kRows));
  EXPECT_OK(engine->Close());
}

TEST_F(SnapshotStreamTest, TransfersKeepTheirRateAndReportProgress) {
  constexpr uint64_t kRate = 4 << 20;
  std::vector<std::pair<uint64_t, uint64_t>> reports;
  snapshots_->set_transfer(
      {kRate, [&](uint64_t done, uint64_t total) { reports.emplace_back(done, total); }});
  const auto began = std::chrono::steady_clock::now();
  SnapshotInfo uploaded;
  ASSERT_OK(Upload(1, &uploaded));
  const auto took = std::chrono::steady_clock::now() - began;
  EXPECT_GE(took, std::chrono::microseconds(uploaded.bytes * 1'000'000 / kRate) * 9 / 10)
      << uploaded.bytes << " bytes at " << kRate << " bytes/s";
  ASSERT_EQ(reports.size(), uploaded.chunks);
  for (size_t i = 1; i < reports.size(); ++i) EXPECT_LE(reports[i - 1].first, reports[i].first);
  EXPECT_EQ(reports.back(), std::make_pair(uploaded.bytes, uploaded.bytes));

  reports.clear();
  snapshots_->set_transfer(
      {0, [&](uint64_t done, uint64_t total) { reports.emplace_back(done, total); }});
  ASSERT_OK(snapshots_->Download(uploaded, dir_.path() + "/downloaded"));
  ASSERT_EQ(reports.size(), uploaded.chunks);
  EXPECT_EQ(reports.back(), std::make_pair(uploaded.bytes, uploaded.bytes));

  // Without the stream, the upload says what is missing.
  SnapshotStream missing(connection_, "nothing", 1000);
  Status s = missing.Upload(target_, backup_.id, 1, backup_.last_fact_id, kDatabaseId,
                            backup_.format_version, &uploaded);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("no stream stores the subject: Ensure creates it"), std::string::npos)
      << s.ToString();
}

TEST_F(SnapshotStreamTest, AStreamWithoutDirectGetsDownloadsFromTheLeader) {
  // Made by hand (or by an older Wharf) without AllowDirect: nobody answers direct gets.
  const char* subjects[] = {"legacy.snapshots.>"};
  jsStreamConfig config;
  jsStreamConfig_Init(&config);
  config.Name = "legacy_SNAPSHOTS";
  config.Subjects = subjects;
  config.SubjectsLen = 1;
  config.Storage = js_FileStorage;
  ASSERT_EQ(js_AddStream(nullptr, js_, &config, nullptr, nullptr), NATS_OK);
  SnapshotStream legacy(connection_, "legacy");
  ASSERT_OK(legacy.Ensure(1));
  SnapshotInfo uploaded;
  ASSERT_OK(legacy.Upload(target_, backup_.id, 2, backup_.last_fact_id, kDatabaseId,
                          backup_.format_version, &uploaded));
  const std::string downloaded = dir_.path() + "/downloaded";
  ASSERT_OK(legacy.Download(uploaded, downloaded));
  Manifest manifest;
  ASSERT_OK(ParseManifest(uploaded.manifest, &manifest));
  for (const ManifestFile& file : manifest.files) {
    EXPECT_EQ(fs::file_size(downloaded + "/" + file.name), fs::file_size(target_ + "/" + file.name))
        << file.name;
  }
  std::vector<BackupInfo> listed;
  ASSERT_OK(ListBackups(downloaded, &listed));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].last_fact_id, backup_.last_fact_id);
}

TEST_F(SnapshotStreamTest, ASnapshotWithoutItsDoneMessageDoesNotExist) {
  // Chunks of an upload that never finished.
  natsMsg* msg = nullptr;
  ASSERT_EQ(natsMsg_Create(&msg, "orders.snapshots.00000000deadbeef.file", nullptr, "abc", 3),
            NATS_OK);
  natsMsgHeader_Set(msg, "Wharf-Snapshot", "00000000deadbeef");
  natsMsgHeader_Set(msg, "Wharf-File", "private/1/CURRENT");
  natsMsgHeader_Set(msg, "Wharf-Offset", "0");
  natsMsgHeader_Set(msg, "Wharf-File-Bytes", "3");
  ASSERT_EQ(js_PublishMsg(nullptr, js_, msg, nullptr, nullptr), NATS_OK);
  natsMsg_Destroy(msg);
  SnapshotInfo latest;
  Status s = snapshots_->Latest(&latest);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_EQ(s.message(), "replicate: no complete snapshot in stream \"orders_SNAPSHOTS\"");

  // A damaged backup is refused while it is read: its chunks go, its done message never does.
  Manifest manifest;
  std::string text;
  {
    std::ifstream in(target_ + "/meta/" + std::to_string(backup_.id));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_OK(ParseManifest(text, &manifest));
  std::string largest;
  for (const ManifestFile& file : manifest.files) {
    if (largest.empty() ||
        fs::file_size(target_ + "/" + file.name) > fs::file_size(target_ + "/" + largest)) {
      largest = file.name;
    }
  }
  ASSERT_NO_FATAL_FAILURE(testing::FlipByte(target_ + "/" + largest, 1000));
  SnapshotInfo uploaded;
  s = Upload(3, &uploaded);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("backup file " + target_ + "/" + largest +
                             " does not match its checksum in the manifest"),
            std::string::npos)
      << s.ToString();
  s = snapshots_->Latest(&latest);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  std::vector<SnapshotInfo> all;
  ASSERT_OK(snapshots_->List(&all));
  EXPECT_TRUE(all.empty());
  EXPECT_GT(Messages("orders.snapshots.>"), 1u) << "its chunks were published";
}

TEST_F(SnapshotStreamTest, AChunkDamagedInTheStreamIsCorruptionNamingTheFile) {
  SnapshotInfo uploaded;
  ASSERT_OK(Upload(5, &uploaded));
  Manifest manifest;
  ASSERT_OK(ParseManifest(uploaded.manifest, &manifest));
  std::string damaged;
  for (const ManifestFile& file : manifest.files) {
    if (file.name.ends_with(".sst") && fs::file_size(target_ + "/" + file.name) > 4096) {
      damaged = file.name;
    }
  }
  ASSERT_FALSE(damaged.empty());
  const SnapshotInfo copy = Republish(uploaded, "0123456789abcdef", damaged);
  SnapshotInfo latest;
  ASSERT_OK(snapshots_->Latest(&latest));
  ASSERT_EQ(latest.id, "0123456789abcdef") << "the damaged copy is the newest";
  EXPECT_EQ(latest.first_sequence, copy.first_sequence);

  const std::string downloaded = dir_.path() + "/downloaded";
  Status s = snapshots_->Download(latest, downloaded);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("replicate: snapshot 0123456789abcdef: file " + damaged +
                             " does not match its checksum in the manifest"),
            std::string::npos)
      << s.ToString();
  EXPECT_TRUE(fs::is_empty(downloaded)) << "a failed download leaves nothing";

  // The same copy undamaged downloads (the test's republishing is not what failed).
  const SnapshotInfo intact = Republish(uploaded, "00000000000000aa", "");
  ASSERT_OK(snapshots_->Latest(&latest));
  ASSERT_EQ(latest.id, "00000000000000aa");
  ASSERT_OK(snapshots_->Download(latest, downloaded));
  EXPECT_TRUE(fs::exists(downloaded + "/meta/" + std::to_string(backup_.id)));
}

TEST_F(SnapshotStreamTest, PruneKeepsTheNewestAndDeletesTheRestMessageByMessage) {
  SnapshotInfo first, second, third;
  ASSERT_OK(Upload(3, &first));
  // An upload that never finished, between the first and the second.
  natsMsg* msg = nullptr;
  ASSERT_EQ(natsMsg_Create(&msg, "orders.snapshots.00000000deadbeef.file", nullptr, "abc", 3),
            NATS_OK);
  ASSERT_EQ(js_PublishMsg(nullptr, js_, msg, nullptr, nullptr), NATS_OK);
  natsMsg_Destroy(msg);
  ASSERT_OK(Upload(6, &second));
  ASSERT_OK(Upload(9, &third));
  std::vector<SnapshotInfo> all;
  ASSERT_OK(snapshots_->List(&all));
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, first.id);
  EXPECT_EQ(all[2].id, third.id);
  for (const SnapshotInfo& listed : all) {
    // Read through a consumer: its sequence and time come from the message's metadata.
    EXPECT_GT(listed.created_ms, 0) << listed.id;
    EXPECT_GT(listed.done_sequence, listed.first_sequence) << listed.id;
  }
  EXPECT_EQ(all[1].done_sequence, second.done_sequence);

  uint64_t oldest_kept_group = 0;
  Status s = snapshots_->Prune(0, &oldest_kept_group);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  ASSERT_OK(snapshots_->Prune(2, &oldest_kept_group));
  EXPECT_EQ(oldest_kept_group, 6u);
  ASSERT_OK(snapshots_->List(&all));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, second.id);
  EXPECT_EQ(all[1].id, third.id);
  EXPECT_EQ(Messages("orders.snapshots." + first.id + ".>"), 0u);
  EXPECT_EQ(Messages("orders.snapshots.00000000deadbeef.>"), 0u) << "the unfinished upload went";
  EXPECT_EQ(Messages("orders.snapshots." + second.id + ".>"), second.chunks + 1);
  EXPECT_EQ(Messages("orders.snapshots." + third.id + ".>"), third.chunks + 1);
  // The oldest kept one is whole.
  ASSERT_OK(snapshots_->Download(all[0], dir_.path() + "/downloaded"));
  ASSERT_OK(snapshots_->Prune(2, &oldest_kept_group));
  EXPECT_EQ(oldest_kept_group, 6u) << "nothing more to prune";
}

}  // namespace
}  // namespace wharf::internal

namespace wharf::internal {
namespace {

TEST(SnapshotManifestTest, ReadsBothSchemasAndRefusesNamesOutsideTheTarget) {
  Manifest manifest;
  ASSERT_OK(
      ParseManifest("1764900000\n12\nmetadata 6869\n2\nprivate/1/CURRENT crc32 7\n"
                    "shared_checksum/000012_3456_789.sst crc32 3456\n",
                    &manifest));
  ASSERT_EQ(manifest.files.size(), 2u);
  EXPECT_EQ(manifest.files[1].name, "shared_checksum/000012_3456_789.sst");
  EXPECT_EQ(manifest.files[1].crc32c, 3456u);
  EXPECT_EQ(manifest.app_metadata, "hi");

  ASSERT_OK(
      ParseManifest("schema_version 2.1\n1764900000\n12\nmetadata 6869\nni::x 1\n1\n"
                    "shared_checksum/9.sst crc32 4294967295 size 789 temp 0\n",
                    &manifest));
  ASSERT_EQ(manifest.files.size(), 1u);
  EXPECT_EQ(manifest.files[0].crc32c, 4294967295u);

  for (const char* bad : {"1\n2\n1\n../outside crc32 1\n", "1\n2\n1\n/etc/passwd crc32 1\n",
                          "1\n2\n1\nprivate/../../x crc32 1\n", "1\n2\n2\nprivate/1/A crc32 1\n",
                          "1\n2\n1\nprivate/1/A size 3\n", "1\nx\n"}) {
    Status s = ParseManifest(bad, &manifest);
    EXPECT_TRUE(s.IsCorruption()) << bad << ": " << s.ToString();
  }
}

}  // namespace
}  // namespace wharf::internal
