// Group: one group of the group stream "<stream>.groups" as a reader sees it (GroupReader) and a
// copy applies it (ApplyGroup). The committer writes each group as one RocksDB WriteBatch; the
// stream stores its bytes with the headers Wharf-Group, Wharf-Database, Wharf-Last-Fact-Id and
// Wharf-Format, and stream sequence == group number.
#pragma once

#include <cstdint>
#include <string>

namespace wharf::internal {

struct Group {
  uint64_t number = 0;        // 1, 2, ... over the database's life (== the stream sequence)
  std::string bytes;          // the WriteBatch (StoreBatch::Data())
  uint64_t last_fact_id = 0;  // the highest fact id written once this group is in
  std::string database_id;    // 32 hex digits
  uint64_t format_version = 0;
  std::string term_hex;  // the primary's term (header Wharf-Term; "" when absent)
};

}  // namespace wharf::internal
