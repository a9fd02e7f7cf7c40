// Status: the result of every Wharf operation that can fail.
//
// Wharf never lets an exception escape its API. Operating errors (bad input, I/O failure, a closed
// engine) come back as a Status whose message names the problem; programmer errors that would
// corrupt data are caught by assertions. Status is a value type: cheap to copy when OK (no
// allocation), thread-compatible (distinct objects may be used from distinct threads).
//
// The numeric codes are part of the C ABI (wharf_status in wharf.h) and are never renumbered.
//
// Checked statuses: built with WHARF_ASSERT_STATUS_CHECKED defined (the debug, asan and tsan
// presets define it), an error Status that is destroyed or overwritten before anyone looked at it
// (ok(), code(), Is...(), message(), ToString(), or PermitUncheckedError() for a deliberate
// ignore) aborts, naming it: an error nobody checked is a bug. (An OK status may go unread.) A
// copy or move hands the duty to check to the new object. The struct's layout is the same with
// and without the macro, so code built either way links together.
#pragma once

// The C++ API needs C++20 or later (wharf++.pc and the CMake target wharf::wharf++ require it
// without choosing the standard): say so before the first C++20 construct fails.
#if !defined(__cplusplus) || __cplusplus < 202002L
#error "wharf/*.h (the C++ API) needs C++20 or later (-std=c++20); C programs use wharf.h"
#endif

#include <cstdint>
#include <string>
#include <string_view>
#ifdef WHARF_ASSERT_STATUS_CHECKED
#include <cstdio>
#include <cstdlib>
#endif

namespace wharf {

class [[nodiscard]] Status {
 public:
  enum class Code : uint8_t {
    kOk = 0,
    kInvalidArgument = 1,  // bad input from the caller: the message names the argument
    kNotFound = 2,         // a key, consumer or table that does not exist
    kIOError = 3,          // the disk refused (EIO, ENOSPC...); see retryable()
    kCorruption = 4,       // a checksum or format check failed on read
    kBusy = 5,             // back-pressure: the commit queue is full (when_full=error)
    kClosed = 6,           // the engine (or runtime) was closed
    kConflict = 7,         // a compare-and-set or fencing check refused the commit
    kNotSupported = 8,     // e.g. io=uring on a kernel without io_uring
    kInternal = 9,         // a bug in Wharf; please report it
  };

  // Why, where the code alone does not say enough to act on (as RocksDB's Status::SubCode). Code
  // branches on the code and subcode, never on message text, which may be reworded at any time.
  // Part of the C ABI (wharf_status_subcode); never renumbered.
  enum class SubCode : uint8_t {
    kNone = 0,
    kLeaseFenced = 1,     // Conflict: the consumer's lease epoch changed (another holder took it)
    kCursorMoved = 2,     // Conflict: a cursor changed since the transaction read it
    kDatabaseLocked = 3,  // IOError: another engine (in this process or another) holds it
    kAlreadyExists = 4,   // InvalidArgument: the target exists (e.g. cursor copy without force)
    kTimedOut = 5,        // IOError: no answer within the caller's timeout (AdminClient)
    kReadConflict = 6,    // Conflict: a key or range the transaction read was written since its
                          // snapshot (or the snapshot is older than the committer keeps track of)
    kPrimaryFenced = 7,   // Conflict: another primary extended the replication stream; this
                         // database commits nothing more (restore it from the stream, or follow it)
  };

  Status() = default;  // OK
#ifdef WHARF_ASSERT_STATUS_CHECKED
  Status(const Status& other)
      : code_(other.code_),
        subcode_(other.subcode_),
        retryable_(other.retryable_),
        message_(other.message_) {
    other.MarkChecked();
  }
  Status(Status&& other) noexcept
      : code_(other.code_),
        subcode_(other.subcode_),
        retryable_(other.retryable_),
        message_(std::move(other.message_)) {
    other.MarkChecked();
  }
  Status& operator=(const Status& other) {
    if (this == &other) return *this;
    MustHaveBeenChecked();
    code_ = other.code_;
    subcode_ = other.subcode_;
    retryable_ = other.retryable_;
    message_ = other.message_;
    checked_ = false;
    other.MarkChecked();
    return *this;
  }
  Status& operator=(Status&& other) noexcept {
    if (this == &other) return *this;
    MustHaveBeenChecked();
    code_ = other.code_;
    subcode_ = other.subcode_;
    retryable_ = other.retryable_;
    message_ = std::move(other.message_);
    checked_ = false;
    other.MarkChecked();
    return *this;
  }
  ~Status() { MustHaveBeenChecked(); }
#endif

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string_view msg) { return {Code::kInvalidArgument, msg}; }
  static Status NotFound(std::string_view msg) { return {Code::kNotFound, msg}; }
  static Status IOError(std::string_view msg, bool retryable = false) {
    Status s(Code::kIOError, msg);
    s.retryable_ = retryable;
    return s;
  }
  static Status Corruption(std::string_view msg) { return {Code::kCorruption, msg}; }
  static Status Busy(std::string_view msg) { return {Code::kBusy, msg}; }
  static Status Closed(std::string_view msg) { return {Code::kClosed, msg}; }
  static Status Conflict(std::string_view msg) { return {Code::kConflict, msg}; }
  static Status NotSupported(std::string_view msg) { return {Code::kNotSupported, msg}; }
  static Status Internal(std::string_view msg) { return {Code::kInternal, msg}; }

  bool ok() const {
    MarkChecked();
    return code_ == Code::kOk;
  }
  Code code() const {
    MarkChecked();
    return code_;
  }
  bool IsInvalidArgument() const {
    MarkChecked();
    return code_ == Code::kInvalidArgument;
  }
  bool IsNotFound() const {
    MarkChecked();
    return code_ == Code::kNotFound;
  }
  bool IsIOError() const {
    MarkChecked();
    return code_ == Code::kIOError;
  }
  bool IsCorruption() const {
    MarkChecked();
    return code_ == Code::kCorruption;
  }
  bool IsBusy() const {
    MarkChecked();
    return code_ == Code::kBusy;
  }
  bool IsClosed() const {
    MarkChecked();
    return code_ == Code::kClosed;
  }
  bool IsConflict() const {
    MarkChecked();
    return code_ == Code::kConflict;
  }
  // True when repeating the same operation later may succeed (e.g. disk full, then space freed).
  bool retryable() const {
    MarkChecked();
    return retryable_;
  }
  SubCode subcode() const {
    MarkChecked();
    return subcode_;
  }
  // This status with another message (the code, subcode and retryability unchanged): an error
  // passed up with what the caller was doing in front.
  Status WithMessage(std::string_view msg) const {
    Status s = *this;
    s.message_ = msg;
    return s;
  }
  // This status with `subcode` (the code, message and retryability unchanged).
  Status WithSubCode(SubCode subcode) const {
    Status s = *this;
    s.subcode_ = subcode;
    return s;
  }

  const std::string& message() const {
    MarkChecked();
    return message_;
  }
  // "<code name>: <message>", or "OK".
  std::string ToString() const;
  static const char* CodeName(Code code);

  // Marks an error as deliberately ignored.
  void PermitUncheckedError() const { MarkChecked(); }

 private:
  Status(Code code, std::string_view msg) : code_(code), message_(msg) {}
  void MarkChecked() const {
#ifdef WHARF_ASSERT_STATUS_CHECKED
    checked_ = true;
#endif
  }
  void MustHaveBeenChecked() const {
#ifdef WHARF_ASSERT_STATUS_CHECKED
    if (!checked_ && code_ != Code::kOk) {
      std::fprintf(stderr, "wharf: a Status was never checked: %s: %s\n", CodeName(code_),
                   message_.c_str());
      std::abort();
    }
#endif
  }

  Code code_ = Code::kOk;
  SubCode subcode_ = SubCode::kNone;
  bool retryable_ = false;
  std::string message_;
  // Set when looked at (see "Checked statuses" above); present in every build, used only with
  // WHARF_ASSERT_STATUS_CHECKED.
  [[maybe_unused]] mutable bool checked_ = false;
};

}  // namespace wharf
