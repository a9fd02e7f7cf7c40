// RedisClient: the relay tests' Redis client (hiredis), to run commands and read back the
// entries a relay stored.
#pragma once

#include <hiredis/hiredis.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace wharf::testing {

// One stream entry as the test reads it back.
struct Entry {
  std::string id;
  std::map<std::string, std::string> fields;
  std::vector<std::pair<std::string, std::string>> headers;  // "h:NAME" fields, in order
};

class RedisClient {
 public:
  explicit RedisClient(int port) {
    timeval tv{10, 0};
    context_ = redisConnectWithTimeout("127.0.0.1", port, tv);
  }
  ~RedisClient() {
    if (context_ != nullptr) redisFree(context_);
  }
  bool ok() const { return context_ != nullptr && context_->err == 0; }
  // Runs a command; returns its reply as text for errors and status replies.
  std::string Command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const std::string& arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (reply == nullptr) return "<connection error>";
    std::string text = reply->str != nullptr ? std::string(reply->str, reply->len)
                                             : std::to_string(reply->integer);
    freeReplyObject(reply);
    return text;
  }
  std::vector<Entry> Range(const std::string& stream) {
    std::vector<Entry> entries;
    auto* reply = static_cast<redisReply*>(redisCommand(context_, "XRANGE %s - +", stream.c_str()));
    if (reply == nullptr) return entries;
    for (size_t i = 0; i < reply->elements; ++i) {
      const redisReply* item = reply->element[i];
      Entry entry;
      entry.id.assign(item->element[0]->str, item->element[0]->len);
      const redisReply* fields = item->element[1];
      for (size_t f = 0; f + 1 < fields->elements; f += 2) {
        std::string name(fields->element[f]->str, fields->element[f]->len);
        std::string value(fields->element[f + 1]->str, fields->element[f + 1]->len);
        if (name.rfind("h:", 0) == 0) {
          entry.headers.emplace_back(name.substr(2), value);
        } else {
          entry.fields[name] = value;
        }
      }
      entries.push_back(std::move(entry));
    }
    freeReplyObject(reply);
    return entries;
  }

 private:
  redisContext* context_ = nullptr;
};

}  // namespace wharf::testing
