#include "wharf/status.h"

namespace wharf {

const char* Status::CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "invalid argument";
    case Code::kNotFound:
      return "not found";
    case Code::kIOError:
      return "I/O error";
    case Code::kCorruption:
      return "corruption";
    case Code::kBusy:
      return "busy";
    case Code::kClosed:
      return "closed";
    case Code::kConflict:
      return "conflict";
    case Code::kNotSupported:
      return "not supported";
    case Code::kInternal:
      return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  MarkChecked();
  if (ok()) return "OK";
  std::string text = CodeName(code_);
  if (!message_.empty()) {
    text += ": ";
    text += message_;
  }
  return text;
}

}  // namespace wharf
