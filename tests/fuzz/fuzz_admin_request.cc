// Fuzz target: the admin socket's protocol (engine/admin/socket/protocol.h). Every line a client
// may send gives a request or an InvalidArgument naming the problem, never a crash, a hang or a
// huge allocation; a request that parses encodes back to one that parses the same (round trip).
// The same bytes are also read as a reply to every op (what a client reads from the engine); one
// that reads encodes to a line that reads back to the same line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/admin/socket/protocol.h"

namespace {

using namespace wharf::internal::admin_socket;

// Two requests carry the same op and fields: they encode alike (every field their op takes, from
// the one field list both directions use).
bool Same(const Request& a, const Request& b) {
  return a.op == b.op && EncodeRequest(a) == EncodeRequest(b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Request request;
  wharf::Status s = ParseRequest(text, &request);
  if (!s.ok()) {
    if (!s.IsInvalidArgument() || s.message().empty()) __builtin_trap();
  } else {
    std::string line = EncodeRequest(request);
    if (line.empty() || line.back() != '\n') __builtin_trap();
    line.pop_back();
    Request again;
    if (!ParseRequest(line, &again).ok() || !Same(request, again)) __builtin_trap();
  }
  for (int op = 0; op <= static_cast<int>(kLastOp); ++op) {
    bool progress = false;
    uint32_t done = 0, total = 0;
    Reply reply;
    s = DecodeReply(static_cast<Op>(op), text, &progress, &done, &total, &reply);
    reply.status.PermitUncheckedError();
    if (!s.ok() || progress) continue;
    std::string line = EncodeReply(static_cast<Op>(op), reply);
    line.pop_back();
    Reply again;
    if (!DecodeReply(static_cast<Op>(op), line, &progress, &done, &total, &again).ok()) {
      __builtin_trap();
    }
    again.status.PermitUncheckedError();
    // Read back, it writes the same line: no field is lost or changed on the way.
    if (EncodeReply(static_cast<Op>(op), again) != line + "\n") __builtin_trap();
  }
  return 0;
}
