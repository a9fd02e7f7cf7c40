// ParseTimeArgument (time_arg.h): a small strict parser, so that a typo is an error naming the
// argument rather than a time silently read another way.
#include "tools/cli/time_arg.h"

#include <charconv>

namespace wharf::cli {
namespace {

// Days from 1970-01-01 to the proleptic Gregorian date y-m-d (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

unsigned DaysInMonth(int64_t year, unsigned month) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

// Reads exactly `digits` decimal digits at *text into *value, advancing *text.
bool Digits(std::string_view* text, size_t digits, unsigned* value) {
  if (text->size() < digits) return false;
  *value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const char c = (*text)[i];
    if (c < '0' || c > '9') return false;
    *value = *value * 10 + static_cast<unsigned>(c - '0');
  }
  text->remove_prefix(digits);
  return true;
}

bool Char(std::string_view* text, char c) {
  if (text->empty() || (*text)[0] != c) return false;
  text->remove_prefix(1);
  return true;
}

// ISO 8601 as documented in time_arg.h; "" on success, else what is wrong.
std::string ParseIso(std::string_view text, int64_t* time_ms) {
  unsigned year = 0, month = 0, day = 0;
  if (!Digits(&text, 4, &year) || !Char(&text, '-') || !Digits(&text, 2, &month) ||
      !Char(&text, '-') || !Digits(&text, 2, &day)) {
    return "not a date YYYY-MM-DD";
  }
  if (month < 1 || month > 12) return "month " + std::to_string(month) + " is not in 1..12";
  if (day < 1 || day > DaysInMonth(year, month)) {
    return "day " + std::to_string(day) + " is not in that month";
  }
  int64_t ms = DaysFromCivil(year, month, day) * 86'400'000;
  if (text.empty()) {
    *time_ms = ms;
    return "";
  }
  if (text[0] != 'T' && text[0] != 't' && text[0] != ' ') return "the date is followed by junk";
  text.remove_prefix(1);
  unsigned hour = 0, minute = 0, second = 0;
  if (!Digits(&text, 2, &hour) || !Char(&text, ':') || !Digits(&text, 2, &minute)) {
    return "not a time HH:MM[:SS]";
  }
  if (Char(&text, ':') && !Digits(&text, 2, &second)) return "not a time HH:MM:SS";
  if (hour > 23 || minute > 59 || second > 59) return "the time is out of range";
  ms += (hour * 3600 + minute * 60 + second) * int64_t{1000};
  if (Char(&text, '.') || Char(&text, ',')) {
    size_t digits = 0;
    int64_t fraction_ms = 0;
    while (!text.empty() && text[0] >= '0' && text[0] <= '9') {
      if (digits < 3) fraction_ms = fraction_ms * 10 + (text[0] - '0');
      ++digits;
      text.remove_prefix(1);
    }
    if (digits == 0 || digits > 9) return "a fraction of a second has 1 to 9 digits";
    for (size_t i = digits; i < 3; ++i) fraction_ms *= 10;
    ms += fraction_ms;
  }
  if (Char(&text, 'Z') || Char(&text, 'z')) {
    // UTC
  } else if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    const int sign = text[0] == '+' ? 1 : -1;
    text.remove_prefix(1);
    unsigned offset_hours = 0, offset_minutes = 0;
    if (!Digits(&text, 2, &offset_hours)) return "not an offset +HH:MM";
    if (Char(&text, ':')) {
      if (!Digits(&text, 2, &offset_minutes)) return "not an offset +HH:MM";
    } else if (!text.empty() && !Digits(&text, 2, &offset_minutes)) {
      return "not an offset +HH:MM";
    }
    if (offset_hours > 23 || offset_minutes > 59) return "the offset is out of range";
    ms -= sign * static_cast<int64_t>(offset_hours * 60 + offset_minutes) * 60'000;
  } else {
    return text.empty() ? "a date and time needs Z or an offset (+02:00): local time would "
                          "depend on this machine"
                        : "the time is followed by junk";
  }
  if (!text.empty()) return "the time is followed by junk";
  *time_ms = ms;
  return "";
}

}  // namespace

bool ParseTimeArgument(std::string_view argument, std::string_view text, int64_t* time_ms,
                       std::string* error) {
  const std::string examples = std::string(" (accepted: ISO 8601 such as ") + kTimeExample +
                               ", 2026-12-06T12:15:00.250+02:00 or 2026-12-06 (midnight UTC), or "
                               "ms since the epoch such as 1796552100000)";
  const std::string quoted = std::string(argument) + " '" + std::string(text) + "'";
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos) {
    uint64_t value = 0;
    auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (code != std::errc() || end != text.data() + text.size() || value > INT64_MAX) {
      *error = quoted + " is too large" + examples;
      return false;
    }
    *time_ms = static_cast<int64_t>(value);
    return true;
  }
  int64_t ms = 0;
  const std::string why = ParseIso(text, &ms);
  if (!why.empty()) {
    *error = quoted + " is not a time: " + why + examples;
    return false;
  }
  if (ms < 0) {
    *error = quoted + " is before 1970-01-01T00:00:00Z" + examples;
    return false;
  }
  *time_ms = ms;
  return true;
}

}  // namespace wharf::cli
