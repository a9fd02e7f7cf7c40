#include "engine/replicate/apply_groups.h"

#include "engine/base/assert.h"
#include "engine/store/store.h"

namespace wharf::internal {

Status ApplyGroup(const GroupCopy& copy, uint64_t expected_number, const Group& group, bool sync) {
  WHARF_ASSERT(copy.store != nullptr);
  WHARF_ASSERT(expected_number > 0);
  const std::string which = "replicate: group " + std::to_string(group.number);
  if (group.database_id != copy.database_id) {
    return Status::InvalidArgument(which + " is another database's (database " + group.database_id +
                                   ", this copy's " + copy.database_id + ")");
  }
  if (group.format_version != copy.format_version) {
    return Status::InvalidArgument(which + " has format version " +
                                   std::to_string(group.format_version) + ", this copy " +
                                   std::to_string(copy.format_version));
  }
  if (group.number != expected_number) {
    return Status::InvalidArgument(which + " is not the next one: the copy holds groups up to " +
                                   std::to_string(expected_number - 1) + " and needs group " +
                                   std::to_string(expected_number) +
                                   (group.number > expected_number
                                        ? " (a gap: the groups in between are missing)"
                                        : " (already applied)"));
  }
  // The store checks the batch's families before it writes any of it.
  return copy.store->WriteShipped(group.bytes, group.number, sync, which);
}

}  // namespace wharf::internal
