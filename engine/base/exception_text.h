// What a caught exception says, safe to build a reason or a message from. A handler or callback
// is the application's code: its exception class may return NULL from what(), and a std::string
// or std::string_view built from NULL is undefined (in practice a crash) — inside the very catch
// block meant to settle the call as failed.
#pragma once

#include <exception>

namespace wharf {

inline const char* ExceptionText(const std::exception& e) noexcept {
  const char* text = e.what();
  return text != nullptr ? text : "(an exception whose what() is NULL)";
}

}  // namespace wharf
