// Fuzz target: the option strings shared by every interface (C++ ParseEngineOptions /
// ParseRuntimeOptions, the C ABI's wharf_open and wharf_runtime_new, the CLI). Any text must give
// OK or a clear error, never a crash, a hang or a huge allocation. `config=` (a file path) is
// skipped: it would read arbitrary files; the YAML loader has its own target (fuzz_yaml).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "wharf/options.h"
#include "wharf/runtime.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (text.find("config") != std::string_view::npos) return 0;
  wharf::EngineOptions engine_options;
  wharf::Status s = wharf::ParseEngineOptions(text, &engine_options);
  if (!s.ok() && s.message().empty()) __builtin_trap();  // every refusal names its problem
  wharf::RuntimeOptions runtime_options;
  s = wharf::ParseRuntimeOptions(text, &runtime_options);
  if (!s.ok() && s.message().empty()) __builtin_trap();
  return 0;
}
