#include "bench/report_text.h"

#include <cstdarg>

namespace wharf::bench {

std::string Format(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  return text;
}

std::string JsonEscape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += Format("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out;
}

std::string JsonNumberOrNull(double value, bool known, const char* format) {
  return known ? Format(format, value) : "null";
}

std::string LatencyJson(const LatencySummary& latency, bool known) {
  return "{\"p50\": " + JsonNumberOrNull(latency.p50_us, known) +
         ", \"p99\": " + JsonNumberOrNull(latency.p99_us, known) +
         ", \"p999\": " + JsonNumberOrNull(latency.p999_us, known) + "}";
}

std::string MachineJson(const MachineInfo& machine) {
  const bool disk_known = machine.disk.error.empty();
  return Format("{\"cores\": %d, \"filesystem\": \"%s\", \"fdatasync_us_p50\": ", machine.cores,
                JsonEscape(machine.filesystem).c_str()) +
         JsonNumberOrNull(machine.disk.fdatasync_us_p50, disk_known) +
         ", \"fdatasync_us_p10\": " + JsonNumberOrNull(machine.disk.fdatasync_us_p10, disk_known) +
         ", \"fdatasync_us_p90\": " + JsonNumberOrNull(machine.disk.fdatasync_us_p90, disk_known) +
         ", \"seq_write_mb_per_s\": " +
         JsonNumberOrNull(machine.disk.seq_write_mb_per_s, disk_known) + "}";
}

void PrintMachineLine(const MachineInfo& machine, const std::string& dir, std::FILE* out) {
  if (!machine.disk.error.empty()) {
    std::fprintf(out, "machine: %d cores; disk reference FAILED: %s\n", machine.cores,
                 machine.disk.error.c_str());
    return;
  }
  std::fprintf(out,
               "machine: %d cores; in %s (%s): fdatasync p50 %.0f us (p10 %.0f, p90 %.0f; 4 KiB "
               "appends), sequential write %.0f MB/s\n",
               machine.cores, dir.c_str(), machine.filesystem.c_str(),
               machine.disk.fdatasync_us_p50, machine.disk.fdatasync_us_p10,
               machine.disk.fdatasync_us_p90, machine.disk.seq_write_mb_per_s);
}

}  // namespace wharf::bench
