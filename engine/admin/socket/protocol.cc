#include "engine/admin/socket/protocol.h"

#include <simdjson.h>

#include <algorithm>
#include <concepts>
#include <limits>
#include <optional>
#include <set>
#include <type_traits>

#include "engine/admin/consumer_id.h"
#include "engine/base/assert.h"
#include "engine/base/bytes_text.h"
#include "engine/wire/json_writer.h"
#include "engine/wire/schema.h"
#include "wharf/engine.h"

namespace wharf::internal::admin_socket {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;
using wire::JsonWriter;

// Every field a request may carry besides "v" and "op", each once: the op specs below say which
// of them each op takes. `v(name, member, max)` bounds a number below its type's own limit.
template <class V>
void Describe(V& v, Request& r) {
  v("consumer", r.consumer);
  v("from", r.from);
  v("to", r.to);
  v("partition", r.partition);
  v("fact_id", r.fact_id);
  v("force", r.force);
  v("dry_run", r.dry_run);
  v("progress", r.progress);
  v("fact_ids", r.fact_ids);
  v("table", r.table);
  v.Hex("key_hex", r.key);
  v.Hex("from_hex", r.key_from);
  v.Hex("to_hex", r.key_to);
  // Up to the engine's bound: a larger limit is refused here, naming the field; 0 reaches
  // Engine::Scan, which refuses it as it refuses every caller's.
  v("limit", r.limit, kScanLimitMax);
  v("target", r.target);
  v("keep", r.keep);
  v("rate_limit_bytes_per_s", r.rate_limit_bytes_per_s);
  // 1..kScanLimitMax, checked by ValidateNames (0 is out of range too, and said so).
  v("batch_rows", r.batch_rows);
  v("rows_per_second", r.rows_per_second);
}

// An error reply's fields beside "ok": false (the names of kCodes and kSubCodes below).
struct WireError {
  std::string code, subcode;
  bool retryable = false;
  std::string message;
};

template <class V>
void Describe(V& v, WireError& e) {
  v("code", e.code);
  v("subcode", e.subcode);
  v("retryable", e.retryable);
  v("message", e.message);
}

// A progress line's counts (trim: partitions; backup: bytes; migrate: rows visited, total 0).
struct Progress {
  uint64_t done = 0, total = 0;
};

template <class V>
void Describe(V& v, Progress& p) {
  v("done", p.done);
  v("total", p.total);
}

struct FieldSpec {
  const char* name;  // as Describe(Request) names it
  bool required;
};

struct OpSpec {
  Op op;
  const char* name;
  std::vector<FieldSpec> fields;
};

const std::vector<OpSpec>& Specs() {
  static const std::vector<OpSpec> specs = {
      {Op::kHello, "hello", {}},
      {Op::kCursorList, "cursor_list", {}},
      {Op::kCursorGet, "cursor_get", {{"consumer", true}, {"partition", true}}},
      {Op::kCursorSet, "cursor_set", {{"consumer", true}, {"fact_id", true}, {"dry_run", false}}},
      {Op::kCursorCopy, "cursor_copy", {{"from", true}, {"to", true}, {"force", false}}},
      {Op::kCursorDelete, "cursor_delete", {{"consumer", true}}},
      {Op::kDeadList, "dead_list", {{"consumer", false}}},
      {Op::kDeadRetry, "dead_retry", {{"consumer", true}, {"fact_ids", false}}},
      {Op::kDeadPurge, "dead_purge", {{"consumer", true}, {"fact_ids", false}}},
      {Op::kLeaseRelease, "lease_release", {{"consumer", true}}},
      {Op::kTrim, "trim", {{"dry_run", false}, {"progress", false}}},
      {Op::kRetentionLosses, "retention_losses", {}},
      {Op::kLeaseList, "lease_list", {}},
      {Op::kStat, "stat", {}},
      {Op::kMetrics, "metrics", {}},
      {Op::kStateGet, "state_get", {{"table", true}, {"key_hex", true}}},
      {Op::kStateScan,
       "state_scan",
       {{"table", true}, {"from_hex", false}, {"to_hex", false}, {"limit", true}}},
      {Op::kBackup,
       "backup",
       {{"target", true}, {"keep", false}, {"rate_limit_bytes_per_s", false}, {"progress", false}}},
      {Op::kMigrate,
       "migrate",
       {{"table", true},
        {"from_hex", false},
        {"batch_rows", false},
        {"rows_per_second", false},
        {"dry_run", false},
        {"progress", false}}},
  };
  return specs;
}

const OpSpec& SpecOf(Op op) {
  for (const OpSpec& spec : Specs()) {
    if (spec.op == op) return spec;
  }
  WHARF_ASSERT(false);  // every Op has a spec
  return Specs().front();
}

bool Takes(const OpSpec& spec, std::string_view name) {
  return std::any_of(spec.fields.begin(), spec.fields.end(),
                     [&](const FieldSpec& field) { return name == field.name; });
}

// A field name (or any text from the request) for a message: quoted when printable, else hex; cut
// so that a huge key does not make a huge message.
std::string Named(std::string_view text) {
  constexpr size_t kShownMax = 64;
  if (text.size() <= kShownMax) return DescribeBytes(text);
  return DescribeBytes(text.substr(0, kShownMax)) + "...";
}

std::string ListOf(const std::vector<FieldSpec>& fields) {
  if (fields.empty()) return "none";
  std::string list;
  for (const FieldSpec& spec : fields) list += (list.empty() ? "" : ", ") + std::string(spec.name);
  return list;
}

std::string OpNames() {
  std::string list;
  for (const OpSpec& spec : Specs()) list += (list.empty() ? "" : ", ") + std::string(spec.name);
  return list;
}

Status Refuse(std::string message) { return Status::InvalidArgument("admin request: " + message); }

// Reads the one request field named `name` from `value` (the visitor passes over every field of
// Describe(Request) and acts on that one).
class RequestFieldReader {
 public:
  RequestFieldReader(const OpSpec& spec, std::string_view name, element value)
      : spec_(spec), name_(name), value_(value) {}

  template <class T>
  void operator()(const char* name, T& member,
                  uint64_t max = std::numeric_limits<uint64_t>::max()) {
    if (name != name_) return;
    if constexpr (std::same_as<T, bool>) {
      if (value_.get_bool().get(member)) Refuse(name, "must be true or false");
    } else if constexpr (std::unsigned_integral<T>) {
      ReadUint(name, value_, std::min<uint64_t>(max, std::numeric_limits<T>::max()), &member);
    } else if constexpr (std::same_as<T, std::string>) {
      std::string_view text;
      if (value_.get_string().get(text)) {
        Refuse(name, "must be a string");
      } else {
        member.assign(text);
      }
    } else {
      static_assert(std::same_as<T, std::vector<uint64_t>>);
      array items;
      if (value_.get_array().get(items)) return Refuse(name, "must be an array of whole numbers");
      const std::string item_name = std::string(name) + "[]";
      for (element item : items) {
        if (!ReadUint(item_name.c_str(), item, UINT64_MAX, &member.emplace_back())) return;
      }
    }
  }
  // Bytes sent as hex (state keys): any bytes, exactly.
  void Hex(const char* name, std::string& bytes) {
    if (name != name_) return;
    std::string_view text;
    if (value_.get_string().get(text) || !FromHex(text, &bytes)) {
      Refuse(name, "must be a string of hex digits (two per byte)");
    }
  }

  Status status() const { return status_; }

 private:
  void Refuse(const char* name, const std::string& what) {
    if (status_.ok()) {
      status_ = admin_socket::Refuse("field '" + std::string(name) + "' of op '" + spec_.name +
                                     "' " + what);
    }
  }
  template <class T>
  bool ReadUint(const char* name, element value, uint64_t max, T* out) {
    uint64_t number = 0;
    if (value.get_uint64().get(number) || number > max) {
      Refuse(name, "must be a whole number in [0, " + std::to_string(max) + "]");
      return false;
    }
    *out = static_cast<T>(number);
    return true;
  }

  const OpSpec& spec_;
  std::string_view name_;
  element value_;
  Status status_;
};

// Writes the request fields its op takes, in the order of Describe(Request).
struct RequestFieldWriter {
  const OpSpec& spec;
  JsonWriter& json;

  template <class T>
  void operator()(const char* name, const T& member, uint64_t = 0) {
    if (!Takes(spec, name)) return;
    json.Key(name);
    wire::FieldWriter{json}.Value(member);
  }
  void Hex(const char* name, const std::string& bytes) {
    if (Takes(spec, name)) json.Key(name).String(wire::Hex(bytes));
  }
};

// The consumer ids a request names, checked as the admin functions check them.
Status ValidateNames(const Request& request) {
  switch (request.op) {
    case Op::kCursorGet:
    case Op::kCursorSet:
    case Op::kCursorDelete:
    case Op::kDeadRetry:
    case Op::kDeadPurge:
    case Op::kLeaseRelease:
      return ValidateConsumer(request.consumer);
    case Op::kDeadList:
      return request.consumer.empty() ? Status::OK() : ValidateConsumer(request.consumer);
    case Op::kCursorCopy: {
      Status s = ValidateConsumer(request.from);
      return s.ok() ? ValidateConsumer(request.to) : s;
    }
    case Op::kBackup:
      // The engine's process has its own working directory: a relative path would name another
      // directory than the one the client meant.
      if (request.target.empty() || request.target.front() != '/') {
        return Refuse("field 'target' of op 'backup' must be an absolute path, not " +
                      Named(request.target));
      }
      return Status::OK();
    case Op::kMigrate:
      if (request.batch_rows == 0 || request.batch_rows > kScanLimitMax) {
        return Refuse("field 'batch_rows' of op 'migrate' must be a whole number in [1, " +
                      std::to_string(kScanLimitMax) + "], not " +
                      std::to_string(request.batch_rows));
      }
      return Status::OK();
    default:
      return Status::OK();
  }
}

// ---- Status codes on the wire ----

constexpr std::pair<Status::Code, const char*> kCodes[] = {
    {Status::Code::kOk, "OK"},
    {Status::Code::kInvalidArgument, "InvalidArgument"},
    {Status::Code::kNotFound, "NotFound"},
    {Status::Code::kIOError, "IOError"},
    {Status::Code::kCorruption, "Corruption"},
    {Status::Code::kBusy, "Busy"},
    {Status::Code::kClosed, "Closed"},
    {Status::Code::kConflict, "Conflict"},
    {Status::Code::kNotSupported, "NotSupported"},
    {Status::Code::kInternal, "Internal"},
};
constexpr std::pair<Status::SubCode, const char*> kSubCodes[] = {
    {Status::SubCode::kNone, "None"},
    {Status::SubCode::kLeaseFenced, "LeaseFenced"},
    {Status::SubCode::kCursorMoved, "CursorMoved"},
    {Status::SubCode::kDatabaseLocked, "DatabaseLocked"},
    {Status::SubCode::kAlreadyExists, "AlreadyExists"},
    {Status::SubCode::kTimedOut, "TimedOut"},
    {Status::SubCode::kReadConflict, "ReadConflict"},
    {Status::SubCode::kPrimaryFenced, "PrimaryFenced"},
};

template <typename T, size_t N>
const char* NameIn(const std::pair<T, const char*> (&table)[N], T value) {
  for (const auto& [entry, name] : table) {
    if (entry == value) return name;
  }
  return "Unknown";
}

Status MakeStatus(Status::Code code, const std::string& message, bool retryable) {
  switch (code) {
    case Status::Code::kOk:
      return Status::OK();
    case Status::Code::kInvalidArgument:
      return Status::InvalidArgument(message);
    case Status::Code::kNotFound:
      return Status::NotFound(message);
    case Status::Code::kIOError:
      return Status::IOError(message, retryable);
    case Status::Code::kCorruption:
      return Status::Corruption(message);
    case Status::Code::kBusy:
      return Status::Busy(message);
    case Status::Code::kClosed:
      return Status::Closed(message);
    case Status::Code::kConflict:
      return Status::Conflict(message);
    case Status::Code::kNotSupported:
      return Status::NotSupported(message);
    case Status::Code::kInternal:
      return Status::Internal(message);
  }
  return Status::Internal(message);
}

void WriteStatus(const Status& status, JsonWriter* json) {
  json->Key("ok").Bool(status.ok());
  if (status.ok()) return;
  const WireError error{NameIn(kCodes, status.code()), NameIn(kSubCodes, status.subcode()),
                        status.retryable(), status.message()};
  wire::WriteFields(*json, error);
}

// ---- Results ----

// The fields of each op's result object (the result's own fields for trim, stat, metrics and
// migrate).
template <class V>
void DescribeResult(V& v, Op op, Reply& r) {
  switch (op) {
    case Op::kHello:
      v("version", r.version);
      v("path", r.path);
      break;
    case Op::kCursorList:
      v("cursors", r.cursors);
      break;
    case Op::kCursorGet:
      v("fact_id", r.fact_id);
      break;
    case Op::kCursorSet:
      v("moves", r.moves);
      break;
    case Op::kDeadList:
      v("dead_letters", r.dead_letters);
      break;
    case Op::kDeadRetry:
      v("retried", r.retried);
      break;
    case Op::kDeadPurge:
      v("purged", r.purged);
      break;
    case Op::kTrim:
      wire::Describe(v, r.trim);
      break;
    case Op::kRetentionLosses:
      v("losses", r.losses);
      break;
    case Op::kLeaseList:
      v("leases", r.leases);
      break;
    case Op::kStat:
      wire::Describe(v, r.stat);
      break;
    case Op::kMetrics:
      wire::Describe(v, r.metrics);
      break;
    case Op::kStateGet:
      v.Hex("value_hex", r.value);
      break;
    case Op::kStateScan:
      v.HexPairs("rows", r.rows, "key_hex", "value_hex");
      v("more", r.more);
      v.Hex("resume_from_hex", r.resume_from);
      break;
    case Op::kBackup:
      v("backup", r.backup);
      break;
    case Op::kMigrate:
      wire::Describe(v, r.migrate);
      break;
    case Op::kCursorCopy:
    case Op::kCursorDelete:
    case Op::kLeaseRelease:
      break;
  }
}

// Whether replies to `op` carry a result object.
bool HasResult(Op op) {
  return op != Op::kCursorCopy && op != Op::kCursorDelete && op != Op::kLeaseRelease;
}

void WriteResult(Op op, const Reply& reply, JsonWriter* json) {
  json->BeginObject();
  wire::FieldWriter writer{*json};
  DescribeResult(writer, op, const_cast<Reply&>(reply));  // the writer only reads
  json->EndObject();
}

// ---- Reading replies (the client) ----

Status Malformed(const std::string& what) {
  return Status::Internal("malformed reply from the engine's admin socket: " + what);
}

// Reads the fields a Describe names from one object of a reply, whatever their nesting: every one
// must be there with its type (other fields are ignored); the first problem is kept in status(),
// naming where it is ("result.consumers[].partitions[] field 'lag_facts' is not ...").
class FieldReader {
 public:
  // `value` absent: a missing field (reported by whoever looked it up).
  FieldReader(std::optional<element> value, std::string where) : where_(std::move(where)) {
    if (!value || value->get_object().get(object_)) Fail("is not an object");
  }

  template <class T>
  void operator()(const char* name, T& member) {
    if (std::optional<element> value = At(name)) Read(name, *value, member);
  }
  void Hex(const char* name, std::string& bytes) {
    if (std::optional<element> value = At(name)) ReadHex(name, *value, &bytes);
  }
  void HexPairs(const char* name, std::vector<std::pair<std::string, std::string>>& pairs,
                const char* first, const char* second) {
    std::optional<element> value = At(name);
    array items;
    if (!value) return;
    if (value->get_array().get(items)) return Fail(name, "an array");
    for (element item : items) {
      if (!ok()) return;  // the first problem is the one reported
      FieldReader inner(item, where_ + "." + name + "[]");
      auto& [a, b] = pairs.emplace_back();
      inner.Hex(first, a);
      inner.Hex(second, b);
      Absorb(inner);
    }
  }

  bool Has(const char* key) {
    element value;
    return ok() && !object_[key].get(value);
  }
  std::optional<element> At(const char* key) {
    element value;
    if (!ok()) return std::nullopt;
    if (object_[key].get(value)) {
      Fail(key, "present");
      return std::nullopt;
    }
    return value;
  }
  bool ok() const { return status_.ok(); }
  Status status() const { return status_; }
  // Takes over the first problem of a nested reader.
  void Absorb(const FieldReader& inner) {
    if (ok() && !inner.ok()) status_ = inner.status_;
  }

 private:
  template <class T>
  void Read(const std::string& name, element value, T& out) {
    if (!ok()) return;
    if constexpr (std::same_as<T, bool>) {
      if (value.get_bool().get(out)) Fail(name, "true or false");
    } else if constexpr (std::floating_point<T>) {
      // null: what the writer makes of a value that is not finite.
      if (value.is_null()) {
        out = std::numeric_limits<T>::quiet_NaN();
      } else if (value.get_double().get(out)) {
        Fail(name, "a number");
      }
    } else if constexpr (std::unsigned_integral<T>) {
      uint64_t number = 0;
      if (value.get_uint64().get(number)) return Fail(name, "an unsigned integer");
      if (number > std::numeric_limits<T>::max()) {
        return Fail(name, "an unsigned integer of " + std::to_string(sizeof(T) * 8) + " bits");
      }
      out = static_cast<T>(number);
    } else if constexpr (std::signed_integral<T>) {
      int64_t number = 0;
      if (value.get_int64().get(number)) return Fail(name, "an integer");
      out = static_cast<T>(number);
    } else if constexpr (std::same_as<T, std::string>) {
      std::string_view text;
      if (value.get_string().get(text)) return Fail(name, "a string");
      out.assign(text);
    } else if constexpr (requires {
                           typename T::value_type;
                           out.emplace_back();
                         }) {
      array items;
      if (value.get_array().get(items)) return Fail(name, "an array");
      for (element item : items) Read(name + "[]", item, out.emplace_back());
    } else {
      FieldReader inner(value, where_ + "." + name);
      using wire::Describe;  // the public types' lists; this file's own (Progress) by ADL
      Describe(inner, out);
      Absorb(inner);
    }
  }
  void ReadHex(const std::string& name, element value, std::string* bytes) {
    std::string_view text;
    if (ok() && (value.get_string().get(text) || !FromHex(text, bytes))) Fail(name, "hex");
  }
  void Fail(const std::string& what) {
    if (ok()) status_ = Malformed(where_ + " " + what);
  }
  void Fail(const std::string& key, const std::string& type) {
    Fail("field '" + key + "' is not " + type);
  }

  std::string where_;
  object object_;
  Status status_;
};

Status ReadResult(Op op, std::optional<element> value, Reply* reply) {
  FieldReader result(value, "result");
  DescribeResult(result, op, *reply);
  return result.status();
}

}  // namespace

const char* OpName(Op op) { return SpecOf(op).name; }

bool OpFromName(std::string_view name, Op* op) {
  for (const OpSpec& spec : Specs()) {
    if (name == spec.name) {
      *op = spec.op;
      return true;
    }
  }
  return false;
}

Status ParseRequest(std::string_view line, Request* request) {
  *request = Request();
  if (line.size() > kRequestBytesMax) {
    return Refuse("request of " + std::to_string(line.size()) +
                  " bytes is longer than the limit of " + std::to_string(kRequestBytesMax));
  }
  simdjson::dom::parser parser;
  element document;
  if (auto error = parser.parse(line.data(), line.size()).get(document)) {
    return Refuse(std::string("not valid JSON: ") + simdjson::error_message(error));
  }
  object fields;
  if (document.get_object().get(fields)) return Refuse("not a JSON object");
  std::set<std::string_view> seen;
  for (simdjson::dom::key_value_pair field : fields) {
    if (!seen.insert(field.key).second)
      return Refuse("field " + Named(field.key) + " is given twice");
  }
  element version;
  if (fields["v"].get(version)) {
    return Refuse("no field 'v' (the protocol version: " + std::to_string(kProtocolVersion) + ")");
  }
  uint64_t number = 0;
  const bool whole = !version.get_uint64().get(number);
  if (!whole) {
    return Refuse("protocol version " + Named(simdjson::minify(version)) +
                  " is not supported (this engine speaks version " +
                  std::to_string(kProtocolVersion) + ")");
  }
  if (number != kProtocolVersion) {
    return Refuse("this request speaks protocol v" + std::to_string(number) +
                  ", this engine speaks v" + std::to_string(kProtocolVersion) +
                  ": use the wharf program (or libwharf) of the same release as the engine");
  }
  std::string_view op_name;
  element op_value;
  if (fields["op"].get(op_value)) return Refuse("no field 'op' (one of: " + OpNames() + ")");
  if (op_value.get_string().get(op_name)) return Refuse("field 'op' must be a string");
  if (!OpFromName(op_name, &request->op)) {
    return Refuse("unknown op " + Named(op_name) + " (one of: " + OpNames() + ")");
  }
  const OpSpec& spec = SpecOf(request->op);
  for (simdjson::dom::key_value_pair field : fields) {
    if (field.key == "v" || field.key == "op") continue;
    if (!Takes(spec, field.key)) {
      return Refuse("op '" + std::string(spec.name) + "' takes no field " + Named(field.key) +
                    " (its fields: " + ListOf(spec.fields) + ")");
    }
    RequestFieldReader reader(spec, field.key, field.value);
    Describe(reader, *request);
    if (!reader.status().ok()) return reader.status();
  }
  for (const FieldSpec& known : spec.fields) {
    if (known.required && !seen.contains(known.name)) {
      return Refuse("op '" + std::string(spec.name) + "' needs field '" + known.name + "'");
    }
  }
  return ValidateNames(*request);
}

std::string EncodeRequest(const Request& request) {
  const OpSpec& spec = SpecOf(request.op);
  JsonWriter json;
  json.BeginObject().Key("v").Uint(kProtocolVersion).Key("op").String(spec.name);
  RequestFieldWriter writer{spec, json};
  Describe(writer, const_cast<Request&>(request));  // the writer only reads
  std::string line = json.EndObject().Take();
  line.push_back('\n');
  return line;
}

std::string EncodeReply(Op op, const Reply& reply) {
  JsonWriter json;
  json.BeginObject().Key("v").Uint(kProtocolVersion);
  WriteStatus(reply.status, &json);
  if (HasResult(op)) {
    json.Key("result");
    WriteResult(op, reply, &json);
  }
  std::string line = json.EndObject().Take();
  line.push_back('\n');
  return line;
}

std::string EncodeError(const Status& status) {
  WHARF_ASSERT(!status.ok());
  JsonWriter json;
  json.BeginObject().Key("v").Uint(kProtocolVersion);
  WriteStatus(status, &json);
  std::string line = json.EndObject().Take();
  line.push_back('\n');
  return line;
}

std::string EncodeProgress(uint64_t done, uint64_t total) {
  JsonWriter json;
  json.BeginObject().Key("v").Uint(kProtocolVersion).Key("progress");
  wire::WriteObject(json, Progress{done, total});
  std::string line = json.EndObject().Take();
  line.push_back('\n');
  return line;
}

Status DecodeReply(Op op, std::string_view line, bool* progress, uint32_t* done, uint32_t* total,
                   Reply* reply) {
  uint64_t done_64 = 0, total_64 = 0;
  Status s = DecodeReply(op, line, progress, &done_64, &total_64, reply);
  if (s.ok() && *progress && (done_64 > UINT32_MAX || total_64 > UINT32_MAX)) {
    *progress = false;
    return Malformed("progress counts beyond 32 bits for op '" + std::string(OpName(op)) + "'");
  }
  *done = static_cast<uint32_t>(done_64);
  *total = static_cast<uint32_t>(total_64);
  return s;
}

Status DecodeReply(Op op, std::string_view line, bool* progress, uint64_t* done, uint64_t* total,
                   Reply* reply) {
  *progress = false;
  *reply = Reply();
  simdjson::dom::parser parser;
  element document;
  if (auto error = parser.parse(line.data(), line.size()).get(document)) {
    return Malformed(std::string("not valid JSON: ") + simdjson::error_message(error));
  }
  FieldReader fields(document, "reply");
  uint64_t version = 0;
  fields("v", version);
  if (!fields.ok()) return fields.status();
  if (version != kProtocolVersion) {
    // Not malformed: another release's engine. Say which, and what to do.
    return Status::NotSupported("the engine's admin socket speaks protocol v" +
                                std::to_string(version) + ", this wharf speaks v" +
                                std::to_string(kProtocolVersion) +
                                ": use the wharf program (or libwharf) of the same release as the "
                                "engine");
  }
  if (fields.Has("progress")) {
    Progress counts;
    fields("progress", counts);
    if (!fields.ok()) return fields.status();
    *done = counts.done;
    *total = counts.total;
    *progress = true;
    return Status::OK();
  }
  bool ok = false;
  fields("ok", ok);
  if (!fields.ok()) return fields.status();
  if (!ok) {
    WireError error;
    Describe(fields, error);
    if (!fields.ok()) return fields.status();
    auto code = std::find_if(std::begin(kCodes), std::end(kCodes),
                             [&](const auto& entry) { return error.code == entry.second; });
    auto subcode = std::find_if(std::begin(kSubCodes), std::end(kSubCodes),
                                [&](const auto& entry) { return error.subcode == entry.second; });
    if (code == std::end(kCodes) || code->first == Status::Code::kOk) {
      return Malformed("unknown error code " + Named(error.code));
    }
    if (subcode == std::end(kSubCodes)) return Malformed("unknown subcode " + Named(error.subcode));
    reply->status =
        MakeStatus(code->first, error.message, error.retryable).WithSubCode(subcode->first);
  }
  if (HasResult(op) && fields.Has("result")) {
    Status s = ReadResult(op, fields.At("result"), reply);
    if (!s.ok()) {
      reply->status.PermitUncheckedError();
      return s;
    }
  } else if (HasResult(op) && ok) {
    return Malformed("no field 'result'");
  }
  return Status::OK();
}

}  // namespace wharf::internal::admin_socket
