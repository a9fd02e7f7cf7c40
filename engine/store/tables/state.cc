#include "engine/store/tables/state.h"

#include "engine/base/assert.h"

namespace wharf::tables::state {

std::string Key(std::string_view table, std::string_view key) {
  WHARF_DASSERT(table.find('\0') == std::string_view::npos);
  std::string encoded;
  encoded.reserve(table.size() + 1 + key.size());
  encoded.append(table);
  encoded.push_back('\0');
  encoded.append(key);
  return encoded;
}

}  // namespace wharf::tables::state
