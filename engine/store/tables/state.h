// The state family: applications' tables of key → value.
//   key    table · 0x00 · user key   (table names hold no NUL; user keys may hold any byte)
//   value  sealed: the user's value
#pragma once

#include <string>
#include <string_view>

namespace wharf::tables::state {

std::string Key(std::string_view table, std::string_view key);

}  // namespace wharf::tables::state
