// Time arguments of the CLI (`cursor set --to-time`): ISO 8601 or milliseconds since the epoch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace wharf::cli {

// An example every time argument accepts, for messages and help.
inline constexpr const char* kTimeExample = "2026-12-06T10:15:00Z";

// Parses `text` as a point in time, in ms since the Unix epoch (UTC):
//   1796552100000                     ms since the epoch (digits only)
//   2026-12-06T10:15:00Z              ISO 8601 date and time in UTC ('T' or a space between;
//   2026-12-06T12:15:00.250+02:00     'z' too), or with an offset (+HH:MM, +HHMM or +HH); minutes
//   2026-12-06T10:15Z                 and seconds, seconds optional, a fraction of up to 9 digits
//                                     (cut to ms)
//   2026-12-06                        a date alone: its midnight UTC
// A date and time without Z or an offset is refused (local time would depend on the machine), as
// are times before 1970 and fields out of range (2026-02-30, 24:00). Returns false with *error
// naming `argument` and showing accepted examples.
bool ParseTimeArgument(std::string_view argument, std::string_view text, int64_t* time_ms,
                       std::string* error);

}  // namespace wharf::cli
