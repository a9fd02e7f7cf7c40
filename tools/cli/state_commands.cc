// `wharf state get` and `wharf state scan`: durable state, read by Engine::Get and Engine::Scan.
// Engine::Scan needs the Engine: this process opens it exclusively when nobody holds the database,
// else the engine of the process that holds it runs the read (its admin socket, AdminClient::Get
// and ::Scan). Neither is part of a transaction: nothing is validated, nothing is changed.
//
// Output: a row is one line, "KEY<TAB>VALUE", each printable UTF-8 as text (\n, \r and \t
// escaped, so the tab is unambiguous) and anything else as 0x + hex (Display). --json: one
// document; bytes as in every --json output, text when printable UTF-8, else lower-case hex, told
// by the field NAME_encoding ("text" or "hex").
#include <fmt/format.h>

#include <cstdio>

#include "tools/cli/commands.h"
#include "tools/cli/output.h"

namespace wharf::cli {
namespace {

// An argument given with --hex: hex digits, two per byte, with or without a leading 0x.
bool DecodeHex(std::string_view text, std::string* bytes) {
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  if (text.size() % 2 != 0) return false;
  bytes->clear();
  auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < text.size(); i += 2) {
    const int high = digit(text[i]), low = digit(text[i + 1]);
    if (high < 0 || low < 0) return false;
    bytes->push_back(static_cast<char>(high << 4 | low));
  }
  return true;
}

// The bytes of argument `name` (its text, or with --hex its hex); false (the error printed) when
// it is not hex.
bool ArgBytes(const StateArgs& args, const char* name, const std::string& text, std::string* out,
              int* code) {
  if (!args.hex) {
    *out = text;
    return true;
  }
  if (DecodeHex(text, out)) return true;
  *code = Fail(kExitError, fmt::format("{} '{}' is not hex (--hex: two hex digits per byte, with "
                                       "or without 0x)",
                                       name, Display(text, 80)));
  return false;
}

// Either an engine this process opened or the engine of the process holding the database.
struct Reader {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<AdminClient> client;

  Status Get(const std::string& table, const std::string& key, std::string* value) {
    return client ? client->Get(table, key, value) : engine->Get(table, key, value);
  }
  Status Scan(const std::string& table, const KeyRange& range, size_t limit, const RowFn& row,
              ScanResult* result) {
    return client ? client->Scan(table, range, limit, row, result)
                  : engine->Scan(table, range, limit, row, result);
  }
};

int ReadFailed(const Context& context, const Status& status) {
  if (int code = FailIfUnavailable(context, status)) return code;
  return Fail(kExitError, status.ToString());
}

}  // namespace

int StateGet(const Context& context, const StateArgs& args) {
  int code = kExitOk;
  std::string key;
  if (!ArgBytes(args, "KEY", args.key, &key, &code)) return code;
  Reader reader;
  if ((code = OpenEngineOrClient(context, /*changes=*/false, &reader.engine, &reader.client))) {
    return code;
  }
  std::string value;
  Status s = reader.Get(args.table, key, &value);
  if (s.IsNotFound()) {
    return Fail(kExitError,
                fmt::format("table '{}' has no key {}", Display(args.table), Display(key, 80)));
  }
  if (!s.ok()) return ReadFailed(context, s);
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("table").String(args.table).BytesField("key", key);
    json.BytesField("value", value).EndObject();
    Print(json.str() + "\n");
  } else {
    Print(Display(value) + "\n");
  }
  return kExitOk;
}

int StateScan(const Context& context, const StateArgs& args) {
  const uint64_t limit = args.limit.value_or(kStateScanLimitDefault);
  if (limit == 0 || limit > kScanLimitMax) {
    return Fail(kExitError, fmt::format("--limit {} is out of range: 1..{} rows per command (a "
                                        "longer walk continues with --from)",
                                        limit, kScanLimitMax));
  }
  int code = kExitOk;
  std::string prefix, from, to;
  if (!ArgBytes(args, "--prefix", args.prefix, &prefix, &code) ||
      !ArgBytes(args, "--from", args.from.value_or(""), &from, &code) ||
      !ArgBytes(args, "--to", args.to.value_or(""), &to, &code)) {
    return code;
  }
  if (!from.empty() && !to.empty() && from >= to) {
    return Fail(kExitError, fmt::format("--from {} is not below --to {}: the range [from, to) "
                                        "holds no key",
                                        Display(from, 80), Display(to, 80)));
  }
  // The range is the keys with the prefix that also lie in [from, to) (std::string compares as
  // unsigned bytes, as the engine orders keys).
  KeyRange range = prefix.empty() ? KeyRange::All() : KeyRange::Prefix(prefix);
  if (from > range.from) range.from = from;
  if (!to.empty() && (range.to.empty() || to < range.to)) range.to = to;
  const bool empty_range = !range.to.empty() && range.from >= range.to;

  Reader reader;
  if ((code = OpenEngineOrClient(context, /*changes=*/false, &reader.engine, &reader.client))) {
    return code;
  }
  // Rows are printed as they come (memory does not grow with --limit); with --json the document
  // opens at the first row, once the engine took the table name.
  bool opened = false;
  auto open_document = [&] {
    if (opened || !context.json) return;
    opened = true;
    wire::JsonWriter head;
    head.BeginObject().Key("table").String(args.table);
    Print(head.str() + ",\"rows\":[");
  };
  ScanResult result;
  if (!empty_range) {
    Status s = reader.Scan(
        args.table, range, static_cast<size_t>(limit),
        [&](std::string_view key, std::string_view value) {
          if (context.json) {
            const bool first = !opened;
            open_document();
            wire::JsonWriter row;
            row.BeginObject().BytesField("key", key).BytesField("value", value).EndObject();
            Print((first ? "" : ",") + row.str());
          } else {
            Print(Display(key) + "\t" + Display(value) + "\n");
          }
          return true;
        },
        &result);
    if (!s.ok()) {
      if (opened) Print("\n");  // the document stays unfinished: the exit status says why
      return ReadFailed(context, s);
    }
  }
  if (context.json) {
    open_document();
    wire::JsonWriter tail;
    tail.BeginObject().Key("row_count").Uint(result.rows).Key("more").Bool(result.more);
    if (result.more) {
      tail.BytesField("resume_from", result.resume_from);
    } else {
      tail.Key("resume_from").Null().Key("resume_from_encoding").Null();
    }
    tail.EndObject();
    // The fields after "rows": the object's own braces dropped.
    const std::string& fields = tail.str();
    Print("]," + fields.substr(1) + "\n");
  }
  if (result.rows == 0 && !context.json) {
    std::fprintf(stderr, "wharf: note: no rows in table '%s'%s\n", Display(args.table).c_str(),
                 range.from.empty() && range.to.empty() ? "" : " in that range");
  }
  if (result.more) {
    // The continuation, every bound in hex: the resume key ends with a 0x00 byte.
    std::string next = "--hex --from " + Hex(result.resume_from);
    if (!prefix.empty()) next += " --prefix " + Hex(prefix);
    if (!to.empty()) next += " --to " + Hex(to);
    std::fprintf(stderr, "wharf: note: %llu rows shown (--limit); more remain: continue with %s\n",
                 static_cast<unsigned long long>(result.rows), next.c_str());
  }
  return kExitOk;
}

}  // namespace wharf::cli
