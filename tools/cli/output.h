// Output of the `wharf` CLI: aligned text tables, a progress bar and byte formatting (text when it
// is printable UTF-8, hex otherwise). JSON (one document per command, or one object per line for
// streams) is written with the library's one JSON writer, wire::JsonWriter, and the types that
// also cross the admin socket with its field lists (engine/wire/schema.h): their --json output
// has the socket's field names by construction.
//
// Thread safety: none needed (the CLI is single-threaded).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/wire/json_writer.h"

namespace wharf::cli {

// Writes `text` to stdout and flushes it (a stream's lines reach a pipe as they are printed).
void Print(std::string_view text);

// SIGINT and SIGTERM end a long-running view or stream instead of the process (the caller restores
// the terminal and says what it stopped); no SA_RESTART, so a wait in poll() returns at once.
void CatchStopSignals();
// The signal caught since CatchStopSignals(), or 0.
int CaughtStopSignal();

// An aligned text table: a header row, then rows; columns listed in `right` align right.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<bool> right = {});
  void Add(std::vector<std::string> row);
  bool empty() const { return rows_.empty(); }
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// A progress bar on stderr ("label [#####     ] 5/16"), redrawn in place; drawn only when enabled
// and stderr is a terminal, so redirected output and --json stay clean.
class ProgressBar {
 public:
  ProgressBar(std::string label, bool enabled);
  ~ProgressBar();  // Finish()
  void Update(uint64_t done, uint64_t total);
  // Redraws the line as "label: text", for progress without a known total (bytes copied, rows
  // visited).
  void Show(std::string_view text);
  // Ends the bar's line (once something was drawn).
  void Finish();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
};

// True when `bytes` are valid UTF-8 without control characters other than tab, CR and LF; their
// lower-case hex.
using wire::Hex;
using wire::IsPrintableText;
// Text for a table cell: printable text with \n, \r, \t escaped, else "0x" + hex; cut to
// `width_max` characters (0: no limit) with a trailing "...".
std::string Display(std::string_view bytes, size_t width_max = 0);
// "2024-05-01T12:00:00.123Z" (UTC); "-" for 0.
std::string FormatTimeMs(int64_t ms);
// "1.5 KiB".
std::string FormatBytes(uint64_t bytes);
// Milliseconds since the epoch, system clock.
int64_t NowMs();

}  // namespace wharf::cli
