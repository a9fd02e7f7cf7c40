// The `metrics_listen` option's HOST:PORT syntax, shared by the option parser and the listener.
//
// HOST is a name or an IPv4 address (`127.0.0.1`, `localhost`, `0.0.0.0`) or an IPv6 address in
// brackets (`[::1]`); PORT is 0..65535 (0: any free port). Nothing is resolved here: a name that
// does not resolve fails the bind at Open.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "wharf/status.h"

namespace wharf::internal {

struct ListenAddress {
  std::string host;  // without brackets
  uint16_t port = 0;
};

// InvalidArgument naming `option` and `text` when it is not HOST:PORT.
Status ParseListenAddress(std::string_view option, std::string_view text, ListenAddress* address);

// HOST:PORT again, with brackets around an IPv6 host.
std::string FormatListenAddress(const ListenAddress& address);

}  // namespace wharf::internal
