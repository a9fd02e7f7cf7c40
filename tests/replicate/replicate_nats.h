// The replication tests' NATS: one nats-server -js on a free loopback port with its store in a
// temp directory (stopped by pid when the fixture goes), a connection that reconnects forever
// (as a replica's does), and hand-made group messages as the group stream holds them.
#pragma once

#include <gtest/gtest.h>
#include <nats/nats.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "engine/replicate/js_util.h"
#include "engine/store/store.h"
#include "test_util.h"
#include "tools/broker/broker_process.h"

namespace wharf::testing {

inline constexpr const char* kDatabaseId = "0123456789abcdef0123456789abcdef";
inline constexpr const char* kOtherDatabaseId = "fedcba9876543210fedcba9876543210";

class NatsFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start()) << "nats-server did not start";
    natsOptions* options = nullptr;
    const std::string url = "nats://127.0.0.1:" + std::to_string(server_.port());
    natsStatus s = natsOptions_Create(&options);
    if (s == NATS_OK) s = natsOptions_SetURL(options, url.c_str());
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(options, -1);
    if (s == NATS_OK) s = natsOptions_SetReconnectWait(options, 50);
    if (s == NATS_OK) s = natsOptions_SetTimeout(options, 2000);
    if (s == NATS_OK) s = natsConnection_Connect(&connection_, options);
    if (s == NATS_OK) s = natsConnection_JetStream(&js_, connection_, nullptr);
    natsOptions_Destroy(options);
    ASSERT_EQ(s, NATS_OK) << internal::NatsText(s);
  }
  void TearDown() override {
    if (js_ != nullptr) jsCtx_Destroy(js_);
    if (connection_ != nullptr) natsConnection_Destroy(connection_);
    server_.Kill();
  }

  // A group stream as the shipper creates it: "<name>.groups", file storage, one replica.
  void AddGroupStream(const std::string& name) {
    const std::string subject = internal::GroupSubject(name);
    const char* subjects[] = {subject.c_str()};
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = name.c_str();
    config.Subjects = subjects;
    config.SubjectsLen = 1;
    config.Storage = js_FileStorage;
    jsStreamInfo* info = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    natsStatus s = js_AddStream(&info, js_, &config, nullptr, &code);
    if (info != nullptr) jsStreamInfo_Destroy(info);
    ASSERT_EQ(s, NATS_OK) << internal::NatsText(s, code);
  }

  // Group `number` with the group stream's headers (and ExpectLastSeq = number - 1).
  void PublishGroup(const std::string& stream, uint64_t number, const std::string& bytes,
                    uint64_t last_fact_id, const std::string& database_id = kDatabaseId) {
    natsMsg* msg = nullptr;
    const std::string subject = internal::GroupSubject(stream);
    natsStatus s = natsMsg_Create(&msg, subject.c_str(), nullptr, bytes.data(),
                                  static_cast<int>(bytes.size()));
    const std::string number_text = std::to_string(number);
    const std::string fact_text = std::to_string(last_fact_id);
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Wharf-Database", database_id.c_str());
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Wharf-Group", number_text.c_str());
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Wharf-Last-Fact-Id", fact_text.c_str());
    const std::string format_text = std::to_string(internal::kFormatVersion);
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Wharf-Format", format_text.c_str());
    jsPubOptions options;
    jsPubOptions_Init(&options);
    const std::string msg_id = database_id + ":" + number_text;
    options.MsgId = msg_id.c_str();
    options.ExpectLastSeq = number - 1;
    options.MaxWait = 5000;
    jsErrCode code = static_cast<jsErrCode>(0);
    jsPubAck* ack = nullptr;
    // Right after a server restart the stream may not be back yet: try again for a while.
    for (int attempt = 0; s == NATS_OK && attempt < 100; ++attempt) {
      s = js_PublishMsg(&ack, js_, msg, &options, &code);
      if (s != NATS_NO_RESPONDERS && s != NATS_TIMEOUT) break;
      s = NATS_OK;
      ::usleep(50'000);
    }
    if (s == NATS_OK && ack != nullptr) {
      EXPECT_EQ(ack->Sequence, number) << "stream sequence == group number";
    }
    if (ack != nullptr) jsPubAck_Destroy(ack);
    natsMsg_Destroy(msg);
    ASSERT_EQ(s, NATS_OK) << internal::NatsText(s, code);
  }

  // Removes the messages of `stream` below `sequence` (a single server: a purge is safe here).
  void PurgeBelow(const std::string& stream, uint64_t sequence) {
    jsOptions options;
    jsOptions_Init(&options);
    options.Stream.Purge.Sequence = sequence;
    ASSERT_EQ(js_PurgeStream(js_, stream.c_str(), &options, nullptr), NATS_OK);
  }
  // The first and last sequence of `stream`.
  std::pair<uint64_t, uint64_t> Sequences(const std::string& stream) {
    jsStreamInfo* info = nullptr;
    natsStatus s = js_GetStreamInfo(&info, js_, stream.c_str(), nullptr, nullptr);
    EXPECT_EQ(s, NATS_OK) << internal::NatsText(s);
    if (s != NATS_OK) return {0, 0};
    std::pair<uint64_t, uint64_t> sequences{info->State.FirstSeq, info->State.LastSeq};
    jsStreamInfo_Destroy(info);
    return sequences;
  }

  TempDir dir_;
  broker::BrokerProcess server_{
      [this](int port) { return broker::NatsArgv(dir_.path() + "/nats", port); }};
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
};

}  // namespace wharf::testing
