// Assertions for programmer errors (TigerStyle): WHARF_ASSERT is always on and guards
// durability-critical invariants; WHARF_DASSERT is checked in debug builds only.
#pragma once

#include <cstdio>
#include <cstdlib>

#define WHARF_ASSERT(condition)                                                              \
  do {                                                                                       \
    if (!(condition)) [[unlikely]] {                                                         \
      std::fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

#ifdef NDEBUG
#define WHARF_DASSERT(condition) \
  do {                           \
  } while (0)
#else
#define WHARF_DASSERT(condition) WHARF_ASSERT(condition)
#endif
