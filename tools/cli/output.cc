#include "tools/cli/output.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "tools/cli/commands.h"

namespace wharf::cli {
namespace {

volatile std::sig_atomic_t caught_stop_signal = 0;
void OnStopSignal(int signal) { caught_stop_signal = signal; }

// Characters (code points) in valid UTF-8 text.
size_t DisplayWidth(std::string_view text) {
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<uint8_t>(c) & 0xc0) != 0x80; });
}

}  // namespace

void Print(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void CatchStopSignals() {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

int CaughtStopSignal() { return caught_stop_signal; }

Table::Table(std::vector<std::string> header, std::vector<bool> right)
    : header_(std::move(header)), right_(std::move(right)) {
  right_.resize(header_.size(), false);
}

void Table::Add(std::vector<std::string> row) {
  row.resize(header_.size());
  rows_.push_back(std::move(row));
}

std::string Table::Render() const {
  std::vector<size_t> widths(header_.size());
  for (size_t column = 0; column < header_.size(); ++column) {
    widths[column] = DisplayWidth(header_[column]);
    for (const auto& row : rows_)
      widths[column] = std::max(widths[column], DisplayWidth(row[column]));
  }
  std::string out;
  auto render_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t column = 0; column < row.size(); ++column) {
      size_t pad = widths[column] - DisplayWidth(row[column]);
      bool last = column + 1 == row.size();
      if (right_[column]) line.append(pad, ' ');
      line += row[column];
      if (!right_[column] && !last) line.append(pad, ' ');
      if (!last) line += "  ";
    }
    out += line;
    out.push_back('\n');
  };
  render_row(header_);
  for (const auto& row : rows_) render_row(row);
  return out;
}

ProgressBar::ProgressBar(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled && isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(uint64_t done, uint64_t total) {
  if (!enabled_ || total == 0) return;
  constexpr uint64_t kWidth = 30;
  uint64_t filled = std::min(done, total) * kWidth / total;
  std::fprintf(stderr, "\r%s [%s%s] %llu/%llu", label_.c_str(), std::string(filled, '#').c_str(),
               std::string(kWidth - filled, ' ').c_str(), static_cast<unsigned long long>(done),
               static_cast<unsigned long long>(total));
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Show(std::string_view text) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r%s: %.*s   ", label_.c_str(), static_cast<int>(text.size()), text.data());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (!drawn_) return;
  std::fputc('\n', stderr);
  drawn_ = false;
}

std::string Display(std::string_view bytes, size_t width_max) {
  std::string text;
  if (IsPrintableText(bytes)) {
    for (char c : bytes) {
      if (c == '\n') {
        text += "\\n";
      } else if (c == '\r') {
        text += "\\r";
      } else if (c == '\t') {
        text += "\\t";
      } else {
        text.push_back(c);
      }
    }
  } else {
    text = "0x" + Hex(bytes);
  }
  if (width_max == 0 || DisplayWidth(text) <= width_max) return text;
  // Cut on a character boundary.
  size_t kept = 0, index = 0;
  while (index < text.size() && kept < width_max - 3) {
    ++index;
    while (index < text.size() && (static_cast<uint8_t>(text[index]) & 0xc0) == 0x80) ++index;
    ++kept;
  }
  return text.substr(0, index) + "...";
}

std::string FormatTimeMs(int64_t ms) {
  if (ms <= 0) return "-";
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, ms % 1000);
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool UseColor(const Context& context, int fd) {
  if (context.color == "always") return true;
  if (context.color == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  return ::isatty(fd) == 1 && (no_color == nullptr || no_color[0] == '\0');
}

}  // namespace wharf::cli
