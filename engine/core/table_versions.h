// TableVersions: the state tables a database declares above version 1, and the migrations that
// lift a row written at an older version to the declared one.
//
// A table is at version 1 until it is declared higher (persisted: tables::meta "table:"), and its
// version never goes back. Every row records the version it was written at (tables/state.h). A
// read lifts an older row one step at a time through the migrations registered on the engine (not
// persisted: the application registers them on every open); a transaction that read it writes the
// lifted row back when it commits (engine/core/txn_reads.cc).
//
// Thread safety: a TableVersions is immutable. The engine core swaps in a new one on every change
// (declare, register); a scan reads one snapshot for all its rows.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/base/string_hash.h"
#include "wharf/engine.h"
#include "wharf/status.h"

namespace wharf::internal {

class TableVersions {
 public:
  struct Table {
    uint32_t version = 1;                      // rows are written at it, and read lifted to it
    std::map<uint32_t, Migration> migrations;  // by the version each one lifts from
  };

  const Table* Find(std::string_view name) const;
  // The declared version of `name`: 1 for a table never declared above it.
  uint32_t VersionOf(std::string_view name) const;
  // The tables declared above version 1, in name order.
  std::vector<DeclaredTable> List() const;
  // Some table is declared above version 1: only then can a row need migrating.
  bool versioned() const { return !tables_.empty(); }

  // The tables a database declares (as read from its meta records), without migrations.
  static std::shared_ptr<const TableVersions> Of(const std::map<std::string, uint32_t>& declared);
  // A copy with `name` declared as `table` (added or replaced).
  std::shared_ptr<const TableVersions> With(std::string_view name, Table table) const;

  // Lifts *row of table `name`, key `key`, written at `stored_v`, to the declared version.
  // NotSupported, naming the table, the key and the step, when a step has no migration or its
  // migration throws (*row is then unspecified). A row at (or above) the declared version is left
  // as it is.
  Status Migrate(std::string_view name, std::string_view key, uint32_t stored_v,
                 std::string* row) const;

 private:
  std::unordered_map<std::string, Table, StringViewHash, std::equal_to<>> tables_;
};

}  // namespace wharf::internal
