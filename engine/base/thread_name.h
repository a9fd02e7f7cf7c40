// Names the calling thread (shown by top -H, perf and gdb), so that a profile of an application
// using Wharf says which of its threads are the engine's and what each does.
#pragma once

#include <pthread.h>

#include <string>

namespace wharf::io {

// `name` is cut to the 15 characters Linux keeps. Best effort: a failure changes nothing else.
inline void NameThisThread(const std::string& name) {
  ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace wharf::io
