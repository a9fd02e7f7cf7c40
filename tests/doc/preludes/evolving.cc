// clang-format off
// (a fragment: its part after "--- main ---" is the start of a main() body)
// What the README's "Evolving facts and state" snippets assume: WHARF_CHECK (the README's
// shorthand for "stop on an error"), an open engine, a runtime, and the application's own
// functions they call (Send, ToCents, Credit).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "wharf/engine.h"
#include "wharf/runtime.h"

#define WHARF_CHECK(expression)                                          \
  do {                                                                   \
    const wharf::Status wharf_check_status = (expression);               \
    if (!wharf_check_status.ok()) {                                      \
      std::fprintf(stderr, "%s\n", wharf_check_status.ToString().c_str()); \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

inline wharf::Outcome Send(const std::string&) { return wharf::Outcome::kHandled; }
inline std::string ToCents(std::string_view row) { return std::string(row); }
inline std::string Credit(const std::string& account, int cents) {
  return account + "+" + std::to_string(cents);
}
// --- main ---
  std::unique_ptr<wharf::Engine> engine;
  WHARF_CHECK(wharf::Engine::Open("db", {}, &engine));
  wharf::Runtime runtime(engine.get(), {});
  {  // a row written before the table was declared at version 2 (so at version 1)
    wharf::Txn txn = engine->Begin();
    WHARF_CHECK(txn.Put("accounts", "a-7", R"({"balance": 12.5})"));
    WHARF_CHECK(txn.Commit());
  }
