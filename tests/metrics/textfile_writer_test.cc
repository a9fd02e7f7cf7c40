// The metrics textfile (engine option metrics_textfile, engine/metrics/textfile_writer.h): written
// at open, on its interval and at close; promtool accepts it; a reader never sees a partial file
// and no temp file is left; failures are logged once per kind and never fail a commit.
#include "engine/metrics/textfile_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "metrics/metrics_test_util.h"
#include "test_util.h"

namespace wharf {
namespace {

using testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

size_t TempFilesIn(const std::string& directory) {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) ++count;
  }
  return count;
}

void Commit(Engine& engine, int count) {
  for (int i = 0; i < count; ++i) {
    Txn txn = engine.Begin();
    ASSERT_OK(txn.Emit("A", "k" + std::to_string(i), "p"));
    ASSERT_OK(txn.Commit());
  }
}

TEST(TextfileWriterTest, WrittenAtOpenAndAtCloseAndPromtoolAcceptsIt) {
  TempDir dir;
  const std::string path = dir.path() + "/wharf.prom";
  EngineOptions options;
  options.admin_socket = "off";
  options.metrics_textfile = path;
  options.metrics_interval_ms = 3'600'000;  // only the writes at open and close
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  std::string text = ReadFile(path);
  EXPECT_NE(text.find("\nwharf_durable_lsn 0\n"), std::string::npos) << text;
  ASSERT_OK(engine->DeclareTypes({"A"}));
  Commit(*engine, 3);
  ASSERT_OK(engine->Close());
  text = ReadFile(path);
  EXPECT_NE(text.find("\nwharf_durable_lsn 3\n"), std::string::npos) << text;
  EXPECT_TRUE(testing::PromtoolAccepts(text, dir.path()));
  EXPECT_EQ(TempFilesIn(dir.path()), 0u);
}

TEST(TextfileWriterTest, RewrittenOnItsInterval) {
  TempDir dir;
  const std::string path = dir.path() + "/wharf.prom";
  EngineOptions options;
  options.admin_socket = "off";
  options.metrics_textfile = path;
  options.metrics_interval_ms = 100;
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  ASSERT_OK(engine->DeclareTypes({"A"}));
  Commit(*engine, 2);
  // The interval's writes show the commits while the engine stays open (no deadline: polled).
  bool seen = false;
  for (int i = 0; i < 600 && !seen; ++i) {
    seen = ReadFile(path).find("\nwharf_durable_lsn 2\n") != std::string::npos;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(seen);
  ASSERT_OK(engine->Close());
}

// A reader polling the file while it is rewritten as fast as possible sees whole files only.
TEST(TextfileWriterTest, AReaderNeverSeesAPartialFile) {
  TempDir dir;
  const std::string path = dir.path() + "/wharf.prom";
  EngineOptions options;
  options.admin_socket = "off";
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  std::unique_ptr<internal::TextfileWriter> writer;
  ASSERT_OK(internal::TextfileWriter::Start(engine.get(), path, 3'600'000, {}, &writer));
  const std::string whole = ReadFile(path);
  ASSERT_FALSE(whole.empty());
  const auto lines = std::count(whole.begin(), whole.end(), '\n');
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::atomic<int> partial{0};
  std::thread reader([&] {
    while (!stop.load()) {
      const std::string text = ReadFile(path);
      reads.fetch_add(1);
      // Nothing commits, so every whole file has the lines of the first (a value such as the
      // directory's bytes may move); a partial one ends early or mid-line.
      if (std::count(text.begin(), text.end(), '\n') != lines || text.back() != '\n') {
        partial.fetch_add(1);
      }
    }
  });
  for (int i = 0; i < 300; ++i) ASSERT_OK(writer->WriteOnce());
  stop.store(true);
  reader.join();
  EXPECT_EQ(partial.load(), 0) << "of " << reads.load() << " reads";
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(writer->writes(), 301u);
  writer->Stop();
  EXPECT_EQ(TempFilesIn(dir.path()), 0u);
}

TEST(TextfileWriterTest, FailuresAreLoggedOncePerKindAndNeverFailCommits) {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  std::filesystem::create_directories(out);
  const std::string path = out + "/wharf.prom";
  EngineOptions options;
  options.admin_socket = "off";
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  ASSERT_OK(engine->DeclareTypes({"A"}));
  std::mutex mutex;
  std::vector<std::string> lines;
  auto log = [&](const std::string& line) {
    std::lock_guard lock(mutex);
    lines.push_back(line);
  };
  std::unique_ptr<internal::TextfileWriter> writer;
  ASSERT_OK(internal::TextfileWriter::Start(engine.get(), path, 3'600'000, log, &writer));
  std::filesystem::remove_all(out);  // the directory goes away
  for (int i = 0; i < 3; ++i) {
    Status s = writer->WriteOnce();
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    Commit(*engine, 1);  // commits do not notice
  }
  {
    std::lock_guard lock(mutex);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("cannot create the temp file: No such file or directory"),
              std::string::npos)
        << lines[0];
    EXPECT_NE(lines[0].find(path), std::string::npos) << lines[0];
  }
  std::filesystem::create_directories(out);  // back: written again, and said so
  ASSERT_OK(writer->WriteOnce());
  EXPECT_NE(ReadFile(path).find("\nwharf_durable_lsn 3\n"), std::string::npos);
  {
    std::lock_guard lock(mutex);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_NE(lines[1].find("written again"), std::string::npos) << lines[1];
  }
  writer->Stop();
  EXPECT_EQ(TempFilesIn(out), 0u);

  // A directory that does not exist at Open is a configuration error.
  TempDir other;
  options.metrics_textfile = other.path() + "/missing/wharf.prom";
  std::unique_ptr<Engine> second;
  Status s = Engine::Open(other.db(), options, &second);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("'metrics_textfile'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace wharf
