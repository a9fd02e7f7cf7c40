#include "engine/replicate/js_util.h"

#include <charconv>

#include "engine/replicate/nats_link.h"

namespace wharf::internal {

std::string NatsText(natsStatus status, jsErrCode code) {
  std::string text = NatsStatusText(status);
  if (code != 0) text += " (JetStream error " + std::to_string(static_cast<int>(code)) + ")";
  return text;
}

std::string GroupSubject(const std::string& stream) { return stream + ".groups"; }

std::string SnapshotStreamName(const std::string& stream) { return stream + "_SNAPSHOTS"; }

bool HeaderText(natsMsg* msg, const char* key, std::string* value) {
  const char* found = nullptr;
  if (natsMsgHeader_Get(msg, key, &found) != NATS_OK || found == nullptr) return false;
  *value = found;
  return true;
}

bool HeaderU64(natsMsg* msg, const char* key, uint64_t* value) {
  std::string text;
  return HeaderText(msg, key, &text) && ParseU64(text, value);
}

bool ParseU64(std::string_view text, uint64_t* value) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [at, error] = std::from_chars(text.data(), end, *value, 10);
  return error == std::errc() && at == end;
}

bool IsDatabaseId(std::string_view id) {
  if (id.size() != 32) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace wharf::internal
