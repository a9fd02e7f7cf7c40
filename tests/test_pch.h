// The tests' precompiled header (tests/CMakeLists.txt): gtest, the standard headers and the
// public headers most tests include, parsed once for all of them (WHARF_TEST_PCH, the asan
// preset).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "wharf/admin.h"
#include "wharf/engine.h"
#include "wharf/metrics.h"
#include "wharf/runtime.h"
