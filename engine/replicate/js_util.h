// Small nats.c helpers shared by the snapshot stream, the group reader and their tests: the text
// of a failed JetStream call, typed header reads, the subjects of the two streams.
//
// Thread safety: pure functions (NatsText reads nats.c's per-thread last error).
#pragma once

#include <nats/nats.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "wharf/status.h"

namespace wharf::internal {

// NatsStatusText (engine/replicate/nats_link.h) and, when given, " (JetStream error <code>)".
std::string NatsText(natsStatus status, jsErrCode code = static_cast<jsErrCode>(0));

// The subject of the groups of `stream` ("<stream>.groups") and the name of its snapshot stream
// ("<stream>_SNAPSHOTS").
std::string GroupSubject(const std::string& stream);
std::string SnapshotStreamName(const std::string& stream);

// Header `key` of `msg`; false when it has none.
bool HeaderText(natsMsg* msg, const char* key, std::string* value);
// Header `key` as a decimal u64; false when missing or not a number.
bool HeaderU64(natsMsg* msg, const char* key, uint64_t* value);

// A decimal u64 (digits only, no sign, no overflow); false otherwise.
bool ParseU64(std::string_view text, uint64_t* value);

// Whether `id` is a database id as the streams carry it: 32 lowercase hex digits.
bool IsDatabaseId(std::string_view id);

// The message's data as a view (valid while `msg` lives).
inline std::string_view MsgData(natsMsg* msg) {
  const int bytes = natsMsg_GetDataLength(msg);
  return bytes > 0 ? std::string_view(natsMsg_GetData(msg), static_cast<size_t>(bytes))
                   : std::string_view();
}

}  // namespace wharf::internal
