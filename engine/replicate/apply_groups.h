// ApplyGroup: writes one group of the group stream into a copy of the database (a standby, or a
// database restored from a snapshot catching up), so that the copy then holds exactly what the
// primary held after that group.
//
// Groups are applied one by one, in order, with nothing in between: each is checked to be the
// next one (its number is `expected_number`, the copy's last group + 1) and of this database (its
// id and format version are the copy's) before its WriteBatch is written, synced. Column family
// ids in the batch are the primary's; they are the same in every Wharf database of one format
// version (the families are created in one order, engine/store/store.cc), so the batch applies
// as it is.
//
// Takes the copy's Store (opened as any Wharf database is): its database, and its families, which
// are the only ones a batch may name.
//
// Thread safety: one caller per database at a time (the order check would race otherwise).
// Errors (nothing is written then): InvalidArgument when the group is not the next one ("gap")
// or of another database or format version; Corruption when the bytes are not a WriteBatch;
// IOError (from RocksDB) when the write fails.
#pragma once

#include <cstdint>
#include <string>

#include "engine/replicate/group.h"
#include "wharf/status.h"

namespace wharf::internal {

class Store;

// The copy a group is applied to: its store, its id (32 hex) and its format version.
struct GroupCopy {
  const Store* store = nullptr;
  std::string database_id;
  uint64_t format_version = 0;
};

// `sync`: the write is synced (a standby's every group). A restore syncs only its last one: a
// crash before then leaves a prefix of the groups (the WAL keeps their order), which the copy
// catches up on when it is opened or restored again.
Status ApplyGroup(const GroupCopy& copy, uint64_t expected_number, const Group& group,
                  bool sync = true);

}  // namespace wharf::internal
