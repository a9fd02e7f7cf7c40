// The engine's admin socket (engine/admin/socket/server.cc) and its client (wharf/admin_client.h):
// where the socket is and who may use it, every admin function through it with the same results
// and errors as in-process, and a socket that hostile or broken clients cannot disturb (malformed,
// oversized and silent requests, a thousand clients at once, while commits go on).
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "engine/admin/socket/server.h"
#include "engine/core/engine_core.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/admin_client.h"
#include "wharf/backup.h"
#include "wharf/metrics.h"

namespace wharf {
namespace {

using internal::admin_socket::AdminServer;
using internal::admin_socket::ServerLimits;
using testing::TempDir;

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (part) << "' not in: " << (text)

// A raw connection to a socket path (short paths only), for requests no client would send.
class Raw {
 public:
  explicit Raw(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    EXPECT_LT(path.size(), sizeof(addr.sun_path));
    std::memcpy(addr.sun_path, path.data(), path.size());
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    connect_errno_ = errno;
    // A server that never answers fails the test instead of hanging it (no timing is asserted).
    timeval limit{60, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  }
  ~Raw() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return connected_; }
  int connect_errno() const { return connect_errno_; }
  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // The next line the server sends (without its newline); "" at end of stream.
  std::string Line() {
    while (true) {
      size_t newline = in_.find('\n');
      if (newline != std::string::npos) {
        std::string line = in_.substr(0, newline);
        in_.erase(0, newline + 1);
        return line;
      }
      char buffer[4096];
      ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return "";
      in_.append(buffer, static_cast<size_t>(n));
    }
  }
  // True when the server closed the connection (after any lines it sent).
  bool Closed() {
    char buffer[4096];
    while (true) {
      ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return false;
    }
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  int connect_errno_ = 0;
  std::string in_;
};

class AdminSocketTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kPartitions = 4;

  void Open(const std::string& admin_socket = "on") {
    EngineOptions options;
    options.partitions = kPartitions;
    options.admin_socket = admin_socket;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
  }
  std::string Socket() const { return dir_.db() + "/admin.sock"; }
  uint64_t Emit(std::string_view key, std::string_view payload) {
    Txn txn = engine_->Begin();
    EXPECT_OK(txn.Emit("OrderCreated", key, payload));
    CommitResult result;
    EXPECT_OK(txn.Commit(&result));
    return result.first_fact_id;
  }
  void Build() {
    ASSERT_OK(engine_->DeclareTypes({"OrderCreated"}));
    for (int i = 0; i < 12; ++i) Emit("k" + std::to_string(i), "order " + std::to_string(i));
    ASSERT_OK(SetCursor(*engine_, "mailer", 6));
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

// The default socket is <db>/admin.sock, a socket of mode 0600, removed at close; admin_socket=off
// creates nothing; a custom path is used instead, and the client finds either.
TEST_F(AdminSocketTest, WhereTheSocketIsAndItsMode) {
  Open();
  struct stat st;
  ASSERT_EQ(::lstat(Socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(dir_.db(), &client));
  EXPECT_EQ(client->socket_path(), Socket());
  EXPECT_EQ(client->database_path(), std::filesystem::canonical(dir_.db()).string());
  ASSERT_OK(engine_->Close());
  EXPECT_NE(::lstat(Socket().c_str(), &st), 0);  // removed
  Status s = AdminClient::Connect(dir_.db(), &client);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_CONTAINS(s.message(), "no engine answers at the admin socket " + Socket());

  Open("off");
  EXPECT_NE(::lstat(Socket().c_str(), &st), 0);
  ASSERT_OK(engine_->Close());

  std::string custom = dir_.path() + "/custom.sock";
  Open(custom);
  EXPECT_NE(::lstat(Socket().c_str(), &st), 0);
  ASSERT_EQ(::lstat(custom.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_OK(AdminClient::Connect(custom, &client));
  ASSERT_OK(engine_->DeclareTypes({"OrderCreated"}));
  Emit("a", "one");
  std::vector<CursorMove> moves;
  ASSERT_OK(client->SetCursor("mailer", 1, {}, &moves));
  ASSERT_EQ(moves.size(), kPartitions);
  uint64_t fact_id = 0;
  ASSERT_OK(GetCursor(*engine_, "mailer", engine_->PartitionOf("a"), &fact_id));
  EXPECT_EQ(fact_id, 1u);
  ASSERT_OK(engine_->Close());
  EXPECT_NE(::lstat(custom.c_str(), &st), 0);
}

// A stale socket (its engine died) is replaced; a file that is not a socket is never removed:
// the open is refused, naming it. A custom path another engine serves is refused too.
TEST_F(AdminSocketTest, StaleSocketReplacedOtherFilesRefused) {
  std::filesystem::create_directories(dir_.db());
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, Socket().data(), Socket().size());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);  // bound, never unlinked: what a killed engine leaves
  }
  Open();
  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(dir_.db(), &client));
  ASSERT_OK(engine_->Close());

  { std::ofstream(Socket()) << "precious"; }
  EngineOptions options;
  Status s = Engine::Open(dir_.db(), options, &engine_);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_CONTAINS(s.message(), Socket() + " exists and is not a socket");
  std::ifstream in(Socket());
  std::string kept;
  in >> kept;
  EXPECT_EQ(kept, "precious");
  std::filesystem::remove(Socket());

  // Two databases configured with one socket path: the second is refused while the first runs.
  std::string shared = dir_.path() + "/shared.sock";
  Open(shared);
  TempDir other;
  options.admin_socket = shared;
  std::unique_ptr<Engine> second;
  s = Engine::Open(other.db(), options, &second);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_CONTAINS(s.message(), "another process serves an admin socket at " + shared);
  ASSERT_OK(AdminClient::Connect(shared, &client));  // the first one's, untouched
}

// A database path longer than a Unix socket address holds (107 bytes) still gets its socket, and
// the client reaches it.
TEST_F(AdminSocketTest, LongDatabasePath) {
  std::string db = dir_.path();
  while (db.size() < 200) db += "/a-rather-long-directory-name";
  std::filesystem::create_directories(db);
  db += "/db";
  ASSERT_GT(db.size() + std::strlen("/admin.sock"), sizeof(sockaddr_un::sun_path));
  EngineOptions options;
  options.partitions = kPartitions;
  ASSERT_OK(Engine::Open(db, options, &engine_));
  struct stat st;
  ASSERT_EQ(::lstat((db + "/admin.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(db, &client));
  ASSERT_OK(engine_->DeclareTypes({"OrderCreated"}));
  Emit("a", "one");
  ASSERT_OK(client->SetCursor("mailer", 1));
  std::vector<CursorInfo> cursors;
  ASSERT_OK(client->ListCursors(&cursors));
  EXPECT_EQ(cursors.size(), kPartitions);
  ASSERT_OK(engine_->Close());
  EXPECT_NE(::lstat((db + "/admin.sock").c_str(), &st), 0);
}

// Every admin function through the client gives what it gives in-process: results, and errors
// with their code, subcode and message.
TEST_F(AdminSocketTest, ClientMirrorsTheAdminFunctions) {
  Open();
  Build();
  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(dir_.db(), &client));

  std::vector<CursorInfo> local, remote;
  ASSERT_OK(ListCursors(*engine_, &local));
  ASSERT_OK(client->ListCursors(&remote));
  ASSERT_EQ(remote.size(), local.size());
  for (size_t i = 0; i < local.size(); ++i) {
    EXPECT_EQ(remote[i].consumer, local[i].consumer);
    EXPECT_EQ(remote[i].partition, local[i].partition);
    EXPECT_EQ(remote[i].fact_id, local[i].fact_id);
    EXPECT_EQ(remote[i].epoch, local[i].epoch);
  }
  uint64_t fact_id = 0, expected = 0;
  ASSERT_OK(client->GetCursor("mailer", 2, &fact_id));
  ASSERT_OK(GetCursor(*engine_, "mailer", 2, &expected));
  EXPECT_EQ(fact_id, expected);

  // Errors round-trip exactly.
  Status remote_error = client->GetCursor("mailer", 99, &fact_id);
  Status local_error = GetCursor(*engine_, "mailer", 99, &expected);
  EXPECT_TRUE(remote_error.IsInvalidArgument()) << remote_error.ToString();
  EXPECT_EQ(remote_error.message(), local_error.message());
  remote_error = client->CopyCursor("nobody", "other", false);
  EXPECT_TRUE(remote_error.IsNotFound()) << remote_error.ToString();
  EXPECT_EQ(remote_error.message(), "consumer 'nobody' has no cursors");
  ASSERT_OK(client->CopyCursor("mailer", "audit", false));
  remote_error = client->CopyCursor("mailer", "audit", false);
  EXPECT_TRUE(remote_error.IsInvalidArgument());
  EXPECT_EQ(remote_error.subcode(), Status::SubCode::kAlreadyExists);
  remote_error = client->DeleteCursor(std::string("bad\0id", 6));
  EXPECT_TRUE(remote_error.IsInvalidArgument());
  EXPECT_CONTAINS(remote_error.message(), "contains a NUL byte");
  remote_error = client->ReleaseLease("mailer");
  EXPECT_TRUE(remote_error.IsNotFound());
  EXPECT_EQ(remote_error.message(), "consumer 'mailer' holds no lease");

  // Dry run: the moves, nothing changed.
  std::vector<CursorMove> moves;
  SetCursorOptions dry;
  dry.dry_run = true;
  ASSERT_OK(client->SetCursor("mailer", 0, dry, &moves));
  ASSERT_EQ(moves.size(), kPartitions);
  std::vector<CursorInfo> after;
  ASSERT_OK(ListCursors(*engine_, &after));
  for (const CursorMove& move : moves) {
    EXPECT_TRUE(move.existed);
    EXPECT_EQ(move.to_fact_id, 0u);
    uint64_t now = 0;
    ASSERT_OK(GetCursor(*engine_, "mailer", move.partition, &now));
    EXPECT_EQ(move.from_fact_id, now);  // unchanged
  }
  ASSERT_OK(client->SetCursor("mailer", 0));
  ASSERT_OK(GetCursor(*engine_, "mailer", 2, &fact_id));
  EXPECT_EQ(fact_id, 0u);
  ASSERT_OK(client->DeleteCursor("audit"));

  // Trim (dry run, then for real) with progress.
  TrimReport report;
  TrimOptions trim;
  trim.dry_run = true;
  uint32_t progress_calls = 0;
  trim.progress = [&](uint32_t done, uint32_t total) {
    ++progress_calls;
    EXPECT_LE(done, total);
  };
  ASSERT_OK(client->SetCursor("mailer", 6));
  ASSERT_OK(client->TrimPassed(&report, trim));
  EXPECT_EQ(report.consumer_count, 1u);
  EXPECT_EQ(report.partitions.size(), kPartitions);
  EXPECT_GT(report.fact_count, 0u);
  EXPECT_EQ(progress_calls, kPartitions);
  std::vector<Fact> facts;
  ASSERT_OK(engine_->ReadFacts(engine_->PartitionOf("k0"), 1, 100, &facts));
  EXPECT_EQ(facts.front().id, 1u);  // nothing removed

  // The stat snapshot and the leases, as the engine reads them.
  StatSnapshot remote_stat, local_stat;
  ASSERT_OK(client->ReadStat(&remote_stat));
  ASSERT_OK(ReadStat(*engine_, &local_stat));
  EXPECT_TRUE(remote_stat.durable_lsn_known);
  EXPECT_EQ(remote_stat.durable_lsn, local_stat.durable_lsn);
  EXPECT_EQ(remote_stat.fact_count, local_stat.fact_count);
  EXPECT_EQ(remote_stat.fact_bytes, local_stat.fact_bytes);
  ASSERT_EQ(remote_stat.partitions.size(), kPartitions);
  EXPECT_EQ(remote_stat.partitions[1].last_id, local_stat.partitions[1].last_id);
  ASSERT_EQ(remote_stat.consumers.size(), local_stat.consumers.size());
  ASSERT_FALSE(remote_stat.consumers.empty());
  EXPECT_EQ(remote_stat.consumers[0].consumer, "mailer");
  EXPECT_EQ(remote_stat.consumers[0].fact_id_max, local_stat.consumers[0].fact_id_max);
  EXPECT_EQ(remote_stat.consumers[0].facts_behind, local_stat.consumers[0].facts_behind);
  ASSERT_EQ(remote_stat.consumers[0].partitions.size(), kPartitions);
  std::vector<LeaseInfo> leases;
  ASSERT_OK(client->ListLeases(&leases));
  EXPECT_TRUE(leases.empty());

  std::vector<RetentionLoss> losses;
  ASSERT_OK(client->ListRetentionLosses(&losses));
  EXPECT_TRUE(losses.empty());
  std::vector<DeadLetter> letters;
  ASSERT_OK(client->ListDeadLetters("", &letters));
  EXPECT_TRUE(letters.empty());
  std::vector<RetriedLetter> retried;
  remote_error = client->RetryDeadLetters("mailer", {}, &retried);
  EXPECT_TRUE(remote_error.IsNotFound());
  uint64_t purged = 0;
  remote_error = client->PurgeDeadLetters("mailer", {7}, &purged);
  EXPECT_TRUE(remote_error.IsNotFound());
}

// State reads through the socket: Get and Scan as the engine runs them (the same rows, values and
// errors), a scan longer than one reply continued reply by reply without losing or repeating a
// row, a stop from the row function resumed exactly, and bad input refused by name.
TEST_F(AdminSocketTest, StateGetAndScanMirrorTheEngine) {
  Open();
  // 40 rows of 32 KiB: 1.25 MiB, more than one reply's worth (kStateScanReplyBytesMax).
  const std::string big(32 << 10, 'v');
  Txn txn = engine_->Begin();
  for (int i = 0; i < 40; ++i) {
    char key[8];
    std::snprintf(key, sizeof(key), "r%02d", i);
    ASSERT_OK(txn.Put("rows", key, big + std::to_string(i)));
  }
  ASSERT_OK(txn.Put("rows", std::string("\0bin", 4), std::string("\xff\0", 2)));
  ASSERT_OK(txn.Put("other", "r00", "elsewhere"));
  ASSERT_OK(txn.Commit());
  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(dir_.db(), &client));

  std::string value;
  ASSERT_OK(client->Get("rows", std::string("\0bin", 4), &value));
  EXPECT_EQ(value, std::string("\xff\0", 2));
  Status remote_error = client->Get("rows", "absent", &value);
  EXPECT_TRUE(remote_error.IsNotFound()) << remote_error.ToString();
  EXPECT_EQ(remote_error.message(), engine_->Get("rows", "absent", &value).message());

  using Rows = std::vector<std::pair<std::string, std::string>>;
  auto collect = [](Rows* rows, size_t stop_after = SIZE_MAX) {
    return [rows, stop_after](std::string_view key, std::string_view row_value) {
      rows->emplace_back(key, row_value);
      return rows->size() < stop_after;
    };
  };
  Rows local, remote;
  ScanResult local_result, remote_result;
  ASSERT_OK(engine_->Scan("rows", KeyRange::All(), kScanLimitMax, collect(&local), &local_result));
  ASSERT_OK(client->Scan("rows", KeyRange::All(), kScanLimitMax, collect(&remote), &remote_result));
  ASSERT_EQ(local.size(), 41u);
  EXPECT_EQ(remote, local);  // every row once, in order, across the replies
  EXPECT_EQ(remote_result.rows, 41u);
  EXPECT_FALSE(remote_result.more);

  // A limit inside the range, and a row function that stops: resume where they say.
  remote.clear();
  ASSERT_OK(client->Scan("rows", KeyRange::Prefix("r"), 25, collect(&remote), &remote_result));
  ASSERT_EQ(remote.size(), 25u);
  EXPECT_EQ(remote.back().first, "r24");
  EXPECT_EQ(remote_result.rows, 25u);
  EXPECT_TRUE(remote_result.more);
  EXPECT_EQ(remote_result.resume_from, std::string("r24\0", 4));
  Rows rest;
  KeyRange next = KeyRange::Prefix("r");
  next.from = remote_result.resume_from;
  ASSERT_OK(client->Scan("rows", next, 100, collect(&rest, 3), &remote_result));
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest[0].first, "r25");
  EXPECT_TRUE(remote_result.more);
  EXPECT_EQ(remote_result.resume_from, std::string("r27\0", 4));
  // The last row of the range, at the limit: nothing remains.
  rest.clear();
  next.from = "r39";
  ASSERT_OK(client->Scan("rows", next, 1, collect(&rest), &remote_result));
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_FALSE(remote_result.more);

  // An unknown table has no rows; bad input is refused as the engine refuses it.
  rest.clear();
  ASSERT_OK(client->Scan("nothing", KeyRange::All(), 10, collect(&rest), &remote_result));
  EXPECT_TRUE(rest.empty());
  EXPECT_EQ(remote_result.rows, 0u);
  KeyRange reversed{"b", "a"};
  for (const auto& [table, range, limit] :
       {std::tuple{std::string("rows"), reversed, size_t{10}},
        std::tuple{std::string("rows"), KeyRange::All(), size_t{0}},
        std::tuple{std::string("rows"), KeyRange::All(), kScanLimitMax + 1},
        std::tuple{std::string("a\0b", 3), KeyRange::All(), size_t{10}},
        std::tuple{std::string("bad\xff"), KeyRange::All(), size_t{10}},
        std::tuple{std::string(), KeyRange::All(), size_t{10}}}) {
    rest.clear();
    Status local_error = engine_->Scan(table, range, limit, collect(&rest));
    remote_error = client->Scan(table, range, limit, collect(&rest));
    EXPECT_TRUE(local_error.IsInvalidArgument()) << local_error.ToString();
    EXPECT_TRUE(remote_error.IsInvalidArgument()) << remote_error.ToString();
    EXPECT_TRUE(rest.empty());
  }
  EXPECT_CONTAINS(client->Get(std::string("a\0b", 3), "k", &value).message(), "NUL");
}

// Malformed requests get an error naming the problem, and the connection stays usable.
TEST_F(AdminSocketTest, MalformedRequestsAreRefusedByName) {
  Open();
  Build();
  Raw raw(Socket());
  ASSERT_TRUE(raw.connected());
  const std::pair<std::string, std::string> cases[] = {
      {"not json", "not valid JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"op":"hello"})", "no field 'v'"},
      {R"({"v":1,"op":"hello"})",
       "this request speaks protocol v1, this engine speaks v2: use the wharf program"},
      {R"({"v":"2","op":"hello"})", "is not supported (this engine speaks version 2)"},
      {R"({"v":2})", "no field 'op'"},
      {R"({"v":2,"op":7})", "field 'op' must be a string"},
      {R"({"v":2,"op":"drop_everything"})", "unknown op 'drop_everything'"},
      {R"({"v":2,"op":"cursor_set","consumer":"mailer"})", "needs field 'fact_id'"},
      {R"({"v":2,"op":"cursor_set","consumer":"mailer","fact_id":-1})",
       "'fact_id' of op 'cursor_set' must be a whole number"},
      {R"({"v":2,"op":"cursor_set","consumer":"mailer","fact_id":1.5})", "must be a whole number"},
      {R"({"v":2,"op":"cursor_get","consumer":"mailer","partition":4294967296})",
       "must be a whole number in [0, 4294967295]"},
      {R"({"v":2,"op":"cursor_set","consumer":"mailer","fact_id":1,"force":true})",
       "op 'cursor_set' takes no field 'force'"},
      {R"({"v":2,"op":"cursor_delete","consumer":"mailer","consumer":"x"})",
       "field 'consumer' is given twice"},
      {R"({"v":2,"op":"cursor_delete","consumer":""})", "consumer id is empty"},
      {R"({"v":2,"op":"cursor_delete","consumer":"a\u0000b"})", "contains a NUL byte"},
      {R"({"v":2,"op":"cursor_delete","consumer":7})", "field 'consumer' of op 'cursor_delete'"},
      {R"({"v":2,"op":"dead_purge","consumer":"m","fact_ids":[1,"x"]})", "fact_ids[]"},
      {R"({"v":2,"op":"trim","dry_run":"yes"})", "must be true or false"},
      {"{\"v\":1,\"op\":\"cursor_delete\",\"consumer\":\"\xff\"}", "not valid JSON"},
      {R"({"v":2,"op":"state_scan","table":"t","limit":100001})",
       "'limit' of op 'state_scan' must be a whole number in [0, 100000]"},
      {R"({"v":2,"op":"state_scan","table":"t","limit":0})", "limit"},
      {R"({"v":2,"op":"state_scan","table":"t","from_hex":"b","to_hex":"a","limit":1})",
       "must be a string of hex digits"},
      {R"({"v":2,"op":"state_scan","table":"t","from_hex":"62","to_hex":"61","limit":1})", "from"},
      {R"({"v":2,"op":"state_get","table":"a\u0000b","key_hex":"6b"})", "NUL"},
      {R"({"v":2,"op":"migrate"})", "op 'migrate' needs field 'table'"},
      {R"({"v":2,"op":"migrate","table":"t","batch_rows":0})",
       "field 'batch_rows' of op 'migrate' must be a whole number in [1, 100000], not 0"},
      {R"({"v":2,"op":"migrate","table":"a\u0000b"})", "NUL"},
  };
  for (const auto& [request, problem] : cases) {
    ASSERT_TRUE(raw.Send(request + "\n"));
    std::string reply = raw.Line();
    EXPECT_CONTAINS(reply, "\"ok\":false");
    EXPECT_CONTAINS(reply, "\"code\":\"InvalidArgument\"");
    EXPECT_CONTAINS(reply, problem);
  }
  // Still served, and nothing changed.
  ASSERT_TRUE(raw.Send(R"({"v":2,"op":"cursor_get","consumer":"mailer","partition":0})"
                       "\n"));
  EXPECT_CONTAINS(raw.Line(), "\"ok\":true");
  uint64_t fact_id = 0;
  ASSERT_OK(GetCursor(*engine_, "mailer", engine_->PartitionOf("k0"), &fact_id));
  EXPECT_GT(fact_id, 0u);
}

// A request longer than the limit gets an error and the connection is closed; so is one that
// never comes (a client that connects and sends nothing), without holding up anyone else.
TEST_F(AdminSocketTest, OversizedAndSilentClients) {
  Open("off");
  ServerLimits limits;
  limits.idle_ms = 300;
  std::unique_ptr<AdminServer> server;
  std::string path = dir_.path() + "/test.sock";
  ASSERT_OK(AdminServer::Start(engine_.get(), path, limits, &server));

  Raw oversized(path);
  std::string huge(100 * 1024, ' ');
  huge = "{\"v\":1,\"op\":\"hello\",\"pad\":\"" + huge + "\"}\n";
  oversized.Send(huge);  // may stop early: the server closes once past the limit
  std::string reply = oversized.Line();
  EXPECT_CONTAINS(reply, "longer than the limit of 65536 bytes");
  EXPECT_TRUE(oversized.Closed());

  Raw silent(path);
  ASSERT_TRUE(silent.connected());
  // Served meanwhile, while the silent one is open.
  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(path, &client));
  Raw partial(path);
  ASSERT_TRUE(partial.Send("{\"v\":1,"));  // half a request, never finished
  EXPECT_CONTAINS(silent.Line(), "no whole request within 300 ms");
  EXPECT_TRUE(silent.Closed());
  EXPECT_CONTAINS(partial.Line(), "no whole request within 300 ms");
  EXPECT_TRUE(partial.Closed());
  ASSERT_OK(AdminClient::Connect(path, &client));
  server->Stop();
}

// A thousand clients at once: the first connections are served, the others refused (Busy) at
// once; nothing crashes and commits succeed meanwhile.
TEST_F(AdminSocketTest, AThousandClientsAtOnce) {
  Open();
  Build();
  std::atomic<bool> done{false};
  std::atomic<uint64_t> commits{0};
  std::thread producer([&] {
    while (!done.load()) {
      Txn txn = engine_->Begin();
      if (!txn.Emit("OrderCreated", "p", "during the storm").ok()) break;
      if (!txn.Commit().ok()) break;
      commits.fetch_add(1);
    }
  });
  std::vector<std::unique_ptr<Raw>> clients;
  for (int i = 0; i < 1000; ++i) {
    clients.push_back(std::make_unique<Raw>(Socket()));
    ASSERT_TRUE(clients.back()->connected())
        << i << ": " << std::strerror(clients.back()->connect_errno());
  }
  const uint64_t commits_before = commits.load();
  size_t served = 0, busy = 0;
  for (auto& client : clients) {
    client->Send(R"({"v":2,"op":"cursor_list"})"
                 "\n");  // refused ones may be closed already
    std::string reply = client->Line();
    if (reply.find("\"ok\":true") != std::string::npos) {
      ++served;
    } else {
      EXPECT_CONTAINS(reply, "\"code\":\"Busy\"");
      EXPECT_CONTAINS(reply, "the limit; try again");
      ++busy;
    }
  }
  EXPECT_EQ(served + busy, 1000u);
  EXPECT_GE(served, 1u);
  EXPECT_GE(busy, 1u);
  clients.clear();
  // Commits went on (the producer commits between and after), and the socket still serves.
  while (commits.load() < commits_before + 10) std::this_thread::yield();
  done.store(true);
  producer.join();
  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(dir_.db(), &client));
}

// The metrics op: the client's snapshot is the engine's (ReadMetrics in-process), and a thousand
// requests (from four threads at once, while a producer commits) are all answered, each snapshot
// at or past the commits acknowledged before it was asked for. Malformed metrics requests (bad
// JSON, unknown fields, a huge line) get an error naming the problem and the socket serves on.
TEST_F(AdminSocketTest, MetricsOverTheSocket) {
  Open();
  Build();
  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(dir_.db(), &client));
  MetricsSnapshot remote, local;
  ASSERT_OK(client->ReadMetrics(&remote));
  ASSERT_OK(ReadMetrics(*engine_, &local));
  EXPECT_TRUE(remote.live);
  EXPECT_EQ(remote.io_backend, local.io_backend);
  EXPECT_EQ(remote.partitions, kPartitions);
  EXPECT_EQ(remote.commits.last_lsn, 12u);
  EXPECT_EQ(remote.commits.durable_lsn, local.commits.durable_lsn);
  EXPECT_EQ(remote.commits.transactions_total, local.commits.transactions_total);
  EXPECT_EQ(remote.commits.commit_seconds.upper_bounds, local.commits.commit_seconds.upper_bounds);
  EXPECT_EQ(remote.commits.sync_seconds.upper_bounds, local.commits.sync_seconds.upper_bounds);
  EXPECT_LE(remote.taken_ms, local.taken_ms);
  Status s = client->ReadMetrics(nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();

  std::atomic<bool> done{false};
  std::atomic<uint64_t> acknowledged{0};
  std::thread producer([&] {
    while (!done.load()) {
      Txn txn = engine_->Begin();
      CommitResult result;
      if (!txn.Emit("OrderCreated", "p", "during the requests").ok()) break;
      if (!txn.Commit(&result).ok()) break;
      acknowledged.store(result.first_fact_id);
    }
  });
  constexpr int kThreads = 4, kRequestsEach = 250;
  std::atomic<int> answered{0};
  std::vector<std::string> problems(kThreads);
  std::vector<std::thread> askers;
  for (int t = 0; t < kThreads; ++t) {
    askers.emplace_back([&, t] {
      std::unique_ptr<AdminClient> own;
      Status status = AdminClient::Connect(dir_.db(), &own);
      for (int i = 0; status.ok() && i < kRequestsEach; ++i) {
        const uint64_t before = acknowledged.load();
        MetricsSnapshot snapshot;
        status = own->ReadMetrics(&snapshot);
        if (status.ok() && snapshot.commits.durable_lsn < before) {
          status = Status::Internal("durable_lsn " + std::to_string(snapshot.commits.durable_lsn) +
                                    " < " + std::to_string(before) + " acknowledged before");
        }
        if (status.ok()) answered.fetch_add(1);
      }
      if (!status.ok()) problems[t] = status.ToString();
    });
  }
  for (std::thread& asker : askers) asker.join();
  done.store(true);
  producer.join();
  for (const std::string& problem : problems) EXPECT_EQ(problem, "");
  EXPECT_EQ(answered.load(), kThreads * kRequestsEach);
  EXPECT_GT(acknowledged.load(), 12u);  // commits went on meanwhile

  Raw raw(Socket());
  ASSERT_TRUE(raw.connected());
  const std::pair<std::string, std::string> cases[] = {
      {R"({"v":2,"op":"metrics")", "not valid JSON"},
      {R"({"v":2,"op":"metrics","consumer":"mailer"})",
       "op 'metrics' takes no field 'consumer' (its fields: none)"},
      {R"({"v":2,"op":"metrics","live":true})", "op 'metrics' takes no field 'live'"},
      {R"({"v":2,"op":"metrics","op":"metrics"})", "field 'op' is given twice"},
      {R"({"v":2,"op":"Metrics"})", "unknown op 'Metrics'"},
      {R"({"v":"1","op":"metrics"})", "is not supported (this engine speaks version 2)"},
  };
  for (const auto& [request, problem] : cases) {
    ASSERT_TRUE(raw.Send(request + "\n"));
    std::string reply = raw.Line();
    EXPECT_CONTAINS(reply, "\"ok\":false");
    EXPECT_CONTAINS(reply, "\"code\":\"InvalidArgument\"");
    EXPECT_CONTAINS(reply, problem);
  }
  ASSERT_TRUE(raw.Send(R"({"v":2,"op":"metrics"})"
                       "\n"));
  std::string reply = raw.Line();
  EXPECT_CONTAINS(reply, "\"ok\":true");
  EXPECT_CONTAINS(reply, "\"commits\":{");

  Raw huge(Socket());
  std::string line(200 * 1024, ' ');
  huge.Send("{\"v\":1,\"op\":\"metrics\"," + line + "}\n");  // may stop early: the server closes
  EXPECT_CONTAINS(huge.Line(), "longer than the limit of 65536 bytes");
  EXPECT_TRUE(huge.Closed());

  MetricsSnapshot after;
  ASSERT_OK(client->ReadMetrics(&after));
  EXPECT_GE(after.commits.durable_lsn, acknowledged.load());
}

// Runs `body` in a child process under uid/gid 65534 (nobody); returns its exit status. The
// child only makes system calls (the parent has threads: no allocation after fork).
int AsNobody(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(100);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Whether the backup functions are built (they answer NotSupported until they are).
bool BackupBuilt() {
  std::vector<BackupInfo> backups;
  return ListBackups("/nonexistent-wharf-backups", &backups).code() != Status::Code::kNotSupported;
}

// A backup request is answered (here with an error: a target inside the database, or whatever
// the engine says) and the same connection then serves its next request, sent along with it; a
// relative target is refused by name (the engine's working directory is not the client's), and
// the client refuses an empty one before sending anything.
TEST_F(AdminSocketTest, BackupRequestAnsweredThenTheConnectionServesOn) {
  Open();
  Build();
  Raw raw(Socket());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.Send(R"({"v":2,"op":"backup","progress":true,"target":")" + dir_.db() +
                       "/inside\"}\n" +
                       R"({"v":2,"op":"cursor_get","consumer":"mailer","partition":0})" + "\n"));
  std::string line = raw.Line();
  while (line.find("\"progress\"") != std::string::npos) line = raw.Line();
  EXPECT_CONTAINS(line, "\"ok\":false");
  line = raw.Line();
  EXPECT_CONTAINS(line, "\"ok\":true");
  EXPECT_CONTAINS(line, "\"fact_id\":");
  ASSERT_TRUE(raw.Send(R"({"v":2,"op":"backup","target":"relative/dir"})"
                       "\n"));
  line = raw.Line();
  EXPECT_CONTAINS(line, "\"code\":\"InvalidArgument\"");
  EXPECT_CONTAINS(line, "must be an absolute path");

  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(dir_.db(), &client));
  Status s = client->Backup("", BackupOptions(), nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

// A backup runs on a thread of its own: while a slow one (rate-limited) copies, the socket serves
// other requests, tells the client its progress (at least every second, so a long backup does not
// time out a client waiting 3 s per line), and refuses a second backup with Busy. Closing the
// engine stops the backup and waits for its thread: nothing partial is listed, and the next
// backup into the target succeeds.
TEST_F(AdminSocketTest, BackupRunsBesideOtherRequestsOneAtATime) {
  if (!BackupBuilt()) GTEST_SKIP() << "the backup functions are not built yet";
  Open();
  ASSERT_OK(engine_->DeclareTypes({"OrderCreated"}));
  // About 4 MiB that does not compress, copied at 1 MiB/s.
  std::mt19937_64 random(7);
  uint64_t last_id = 0;
  for (int batch = 0; batch < 40; ++batch) {
    Txn txn = engine_->Begin();
    for (int i = 0; i < 100; ++i) {
      std::string payload(1024, '\0');
      for (char& c : payload) c = static_cast<char>(random());
      ASSERT_OK(txn.Emit("OrderCreated", "k" + std::to_string(i), payload));
    }
    CommitResult result;
    ASSERT_OK(txn.Commit(&result));
    last_id = result.last_fact_id;
  }
  const std::string target = dir_.path() + "/backups";
  std::atomic<int> progress_lines{0};
  std::atomic<bool> slow_ended{false};
  Status first;
  std::thread slow([&] {
    std::unique_ptr<AdminClient> client;
    AdminClientOptions options;
    options.timeout_ms = 3000;  // below the copy's length: progress lines keep it waiting
    first = AdminClient::Connect(dir_.db(), options, &client);
    if (!first.ok()) return;
    BackupOptions backup;
    backup.rate_limit_bytes_per_s = 1 << 20;
    backup.progress = [&](uint64_t, uint64_t) { progress_lines.fetch_add(1); };
    BackupInfo info;
    first = client->Backup(target, backup, &info);
    slow_ended.store(true);
  });
  while (progress_lines.load() == 0 && !slow_ended.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (slow_ended.load()) {
    slow.join();
    FAIL() << "the backup ended before any progress line: " << first.ToString();
  }

  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(dir_.db(), &client));
  StatSnapshot stat;
  EXPECT_OK(client->ReadStat(&stat));  // served while the backup runs
  EXPECT_EQ(stat.last_lsn, last_id);
  Status s = client->Backup(dir_.path() + "/other", BackupOptions(), nullptr);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_CONTAINS(s.message(), "already running");

  ASSERT_OK(engine_->Close());  // stops the backup, and waits for its thread
  engine_.reset();
  slow.join();
  // The slow client saw the stopped backup's reply, or the connection closed with the engine.
  EXPECT_TRUE(first.IsClosed() || first.IsIOError()) << first.ToString();
  std::vector<BackupInfo> backups;
  Status listed = ListBackups(target, &backups);
  EXPECT_TRUE(listed.ok() || listed.IsNotFound()) << listed.ToString();
  EXPECT_TRUE(backups.empty());

  Open();
  BackupInfo info;
  ASSERT_OK(engine_->Backup(target, BackupOptions(), &info));
  EXPECT_EQ(info.last_fact_id, last_id);
  EXPECT_GE(info.size_bytes, 4000u * 1024);
  ASSERT_OK(ListBackups(target, &backups));
  EXPECT_EQ(backups.size(), 1u);
}

// A state table with `rows` rows written at version 1 ("r00" = "v1-0", ...), then declared at
// version 2 with a migration that prefixes "v2:" (and refuses the row `refused`, when given).
void TableAtVersion1(Engine& engine, const std::string& table, int rows,
                     const std::string& refused = "") {
  Txn txn = engine.Begin();
  for (int i = 0; i < rows; ++i) {
    char key[8];
    std::snprintf(key, sizeof(key), "r%02d", i);
    ASSERT_OK(txn.Put(table, key, "v1-" + std::to_string(i)));
  }
  ASSERT_OK(txn.Commit());
  ASSERT_OK(engine.DeclareTable(table, 2));
  ASSERT_OK(engine.RegisterMigration(table, 1, [refused](std::string_view row) {
    if (!refused.empty() && row == refused) throw std::runtime_error("row " + refused + " is bad");
    return "v2:" + std::string(row);
  }));
}

// MigrateTable through the socket runs in the engine, with the migrations its process
// registered: a dry run counts and changes nothing, a run migrates every row in batches, a second
// run finds nothing older; a refused row fails with the engine's NotSupported and the counts of
// the batches committed before it; bad input is refused as the engine refuses it.
TEST_F(AdminSocketTest, MigrateRunsInTheEngineWithItsMigrations) {
  Open();
  TableAtVersion1(*engine_, "rows", 10);
  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(dir_.db(), &client));

  MigrateOptions options;
  options.batch_rows = 3;
  options.dry_run = true;
  MigrateReport report;
  for (int run = 0; run < 2; ++run) {  // the dry run changed nothing: the same counts again
    ASSERT_OK(client->MigrateTable("rows", options, &report));
    EXPECT_EQ(report.version, 2u);
    EXPECT_EQ(report.rows, 10u);
    EXPECT_EQ(report.migrated, 10u);
    EXPECT_EQ(report.batches, 4u);
    EXPECT_TRUE(report.done);
  }
  options.dry_run = false;
  ASSERT_OK(client->MigrateTable("rows", options, &report));
  EXPECT_EQ(report.rows, 10u);
  EXPECT_EQ(report.migrated, 10u);
  EXPECT_EQ(report.batches, 4u);
  EXPECT_TRUE(report.done);
  EXPECT_TRUE(report.resume_from.empty());
  std::string value;
  ASSERT_OK(engine_->Get("rows", "r07", &value));
  EXPECT_EQ(value, "v2:v1-7");
  ASSERT_OK(client->MigrateTable("rows", options, &report));
  EXPECT_EQ(report.rows, 10u);
  EXPECT_EQ(report.migrated, 0u);  // written back: nothing older is left
  // From a key on (from_hex), as the engine's options say.
  options.from = "r05";
  ASSERT_OK(client->MigrateTable("rows", options, &report));
  EXPECT_EQ(report.rows, 5u);
  options.from.clear();
  // A table at version 1: nothing to visit.
  ASSERT_OK(client->MigrateTable("plain", options, &report));
  EXPECT_EQ(report.version, 1u);
  EXPECT_EQ(report.rows, 0u);
  EXPECT_TRUE(report.done);

  // A refused row: the batches before it are committed, and counted in the reply.
  TableAtVersion1(*engine_, "strict", 6, "v1-4");
  options.batch_rows = 2;
  Status s = client->MigrateTable("strict", options, &report);
  EXPECT_EQ(s.code(), Status::Code::kNotSupported) << s.ToString();
  EXPECT_CONTAINS(s.message(), "table 'strict', key 'r04'");
  EXPECT_CONTAINS(s.message(), "row v1-4 is bad");
  EXPECT_EQ(report.rows, 4u);
  EXPECT_EQ(report.migrated, 4u);
  EXPECT_EQ(report.batches, 2u);
  EXPECT_FALSE(report.done);
  MigrateReport local;
  Status local_error = engine_->MigrateTable("strict", options, &local);
  EXPECT_EQ(local_error.message(), s.message());
  EXPECT_EQ(local.migrated, 0u);  // the first two batches were committed by the remote run

  // Bad input: as the engine refuses it (the table name before anything is sent).
  options.batch_rows = 0;
  s = client->MigrateTable("rows", options, &report);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_CONTAINS(s.message(), "batch_rows");
  options.batch_rows = kScanLimitMax + 1;
  s = client->MigrateTable("rows", options, &report);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_CONTAINS(s.message(), "batch_rows");
  options.batch_rows = 3;
  for (const std::string& table : {std::string(), std::string("a\0b", 3), std::string("bad\xff")}) {
    s = client->MigrateTable(table, options, &report);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_TRUE(engine_->MigrateTable(table, options, nullptr).IsInvalidArgument());
  }
}

// A migration runs on a thread of its own, like a backup: a slow one (rate-bound) tells its client
// the rows visited at least every second, the socket serves other requests meanwhile and refuses
// a second migration with Busy; a client whose progress callback says stop ends it after the batch
// in progress (a later run goes on); closing the engine stops a running one at once, not after
// its rate bound's wait.
TEST_F(AdminSocketTest, MigrateRunsBesideOtherRequestsOneAtATime) {
  Open();
  TableAtVersion1(*engine_, "rows", 40);
  MigrateOptions slow;
  slow.batch_rows = 4;
  slow.rows_per_second = 8;  // a batch every half second: 5 s for the table
  std::atomic<uint64_t> told_rows{0};
  std::atomic<bool> ended{false};
  MigrateReport stopped;
  Status first;
  std::thread runner([&] {
    std::unique_ptr<AdminClient> client;
    AdminClientOptions client_options;
    client_options.timeout_ms = 3000;  // below the migration's length: progress keeps it waiting
    first = AdminClient::Connect(dir_.db(), client_options, &client);
    if (!first.ok()) return;
    MigrateOptions options = slow;
    options.progress = [&](const MigrateReport& so_far) {
      EXPECT_GT(so_far.rows, told_rows.load());  // told when the count grew
      told_rows.store(so_far.rows);
      return so_far.rows < 16;  // past the first line (about 8 rows): the checks below run
    };
    first = client->MigrateTable("rows", options, &stopped);
    ended.store(true);
  });
  while (told_rows.load() == 0 && !ended.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::unique_ptr<AdminClient> client;
  ASSERT_OK(AdminClient::Connect(dir_.db(), &client));
  if (!ended.load()) {
    StatSnapshot stat;
    EXPECT_OK(client->ReadStat(&stat));  // served while the migration runs
    Status busy = client->MigrateTable("rows", MigrateOptions(), nullptr);
    EXPECT_TRUE(busy.IsBusy()) << busy.ToString();
    EXPECT_CONTAINS(busy.message(), "a migration is already running");
  }
  runner.join();
  ASSERT_OK(first);
  EXPECT_FALSE(stopped.done);
  EXPECT_GE(stopped.rows, 16u);
  EXPECT_LT(stopped.rows, 40u);
  EXPECT_TRUE(stopped.resume_from.empty());  // options.from: the run started at the first key

  // The engine ends the stopped migration after its batch; then a run goes on to the end.
  MigrateReport report;
  Status s;
  for (int i = 0; i < 500; ++i) {
    s = client->MigrateTable("rows", MigrateOptions(), &report);
    if (!s.IsBusy()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_OK(s);
  EXPECT_TRUE(report.done);
  EXPECT_EQ(report.rows, 40u);
  EXPECT_GE(report.migrated, 1u);
  EXPECT_LE(report.migrated, 40u - 16u);

  // Closing the engine stops a running migration at once, even in its rate bound's wait.
  TableAtVersion1(*engine_, "more", 40);
  std::atomic<bool> started{false};
  std::thread closing_runner([&] {
    std::unique_ptr<AdminClient> other;
    first = AdminClient::Connect(dir_.db(), &other);
    if (!first.ok()) return;
    MigrateOptions options;
    options.batch_rows = 20;
    options.rows_per_second = 1;  // 20 s per batch
    options.progress = [&](const MigrateReport&) {
      started.store(true);
      return true;
    };
    first = other->MigrateTable("more", options, &report);
  });
  while (!started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto close_started = std::chrono::steady_clock::now();
  ASSERT_OK(engine_->Close());
  EXPECT_LT(std::chrono::steady_clock::now() - close_started, std::chrono::seconds(10));
  engine_.reset();
  closing_runner.join();
  // The reply (stopped before the end), or the connection closed with the engine.
  EXPECT_TRUE((first.ok() && !report.done) || first.IsIOError()) << first.ToString();
}

// Another user cannot connect (mode 0600); with the mode opened up, the engine still refuses the
// peer by its uid (SO_PEERCRED) and changes nothing. Root and the engine's user are served.
TEST_F(AdminSocketTest, OtherUsersAreRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a client under another uid";
  Open();
  Build();
  const std::string path = Socket();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const char request[] = "{\"v\":1,\"op\":\"cursor_delete\",\"consumer\":\"mailer\"}\n";
  static char reply[4096];
  // Exit 0: connect refused with EACCES; 1: connected.
  int code = AsNobody([&] {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return 1;
    return errno == EACCES ? 0 : 2;
  });
  EXPECT_EQ(code, 0);

  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  // Exit 0: the server answered with its refusal and closed; the reply is checked by the parent
  // through a pipe.
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  code = AsNobody([&] {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return 3;
    ::send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL);
    ssize_t total = 0, n = 0;
    while ((n = ::recv(fd, reply + total, sizeof(reply) - 1 - total, 0)) > 0) total += n;
    if (::write(pipe_fds[1], reply, total) != total) return 4;
    return 0;
  });
  ::close(pipe_fds[1]);
  EXPECT_EQ(code, 0);
  std::string seen;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) seen.append(buffer, n);
  ::close(pipe_fds[0]);
  EXPECT_CONTAINS(seen, "\"code\":\"IOError\"");
  EXPECT_CONTAINS(seen, "permission denied");
  EXPECT_CONTAINS(seen, "not uid 65534");
  uint64_t fact_id = 0;
  ASSERT_OK(GetCursor(*engine_, "mailer", engine_->PartitionOf("k0"), &fact_id));
  EXPECT_GT(fact_id, 0u);  // not deleted

  std::unique_ptr<AdminClient> client;  // root (this process) is served
  ASSERT_OK(AdminClient::Connect(dir_.db(), &client));
}

// An engine that does not answer (its process stopped or stuck): the kernel still takes the
// connection into the socket's backlog and the request into its buffer, and nothing replies; or,
// the backlog full, a connect would block. Either way AdminClient gives up after timeout_ms with
// IOError, subcode kTimedOut, naming the socket, the process and what to check.
TEST(AdminClientTimeoutTest, AnEngineThatNeverAnswersTimesOut) {
  TempDir dir;
  const std::string path = dir.path() + "/silent.sock";
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.data(), path.size());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 1), 0);  // never accepts

  AdminClientOptions options;
  options.timeout_ms = 300;
  std::unique_ptr<AdminClient> client;
  auto start = std::chrono::steady_clock::now();
  Status s = AdminClient::Connect(path, options, &client);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ(s.subcode(), Status::SubCode::kTimedOut) << s.ToString();
  EXPECT_TRUE(s.retryable());
  EXPECT_CONTAINS(s.message(), path);
  EXPECT_CONTAINS(s.message(), "within 300 ms");
  EXPECT_CONTAINS(s.message(), "pid " + std::to_string(::getpid()));  // the listening process
  EXPECT_CONTAINS(s.message(), "kill -CONT");
  EXPECT_GE(took, std::chrono::milliseconds(290));
  EXPECT_LT(took, std::chrono::seconds(3));
  EXPECT_EQ(client, nullptr);

  // The backlog full (connections nobody accepted): the connect itself would wait.
  std::vector<int> queued;
  for (int i = 0; i < 64; ++i) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    queued.push_back(fd);
    if (rc != 0) break;  // EAGAIN: full
  }
  start = std::chrono::steady_clock::now();
  s = AdminClient::Connect(path, options, &client);
  took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.subcode(), Status::SubCode::kTimedOut) << s.ToString();
  EXPECT_CONTAINS(s.message(), "could not connect to the engine");
  EXPECT_GE(took, std::chrono::milliseconds(290));
  EXPECT_LT(took, std::chrono::seconds(3));
  for (int fd : queued) ::close(fd);

  options.timeout_ms = -1;
  s = AdminClient::Connect(path, options, &client);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_CONTAINS(s.message(), "timeout_ms -1");
  ::close(listener);
}

}  // namespace
}  // namespace wharf
