#include "engine/metrics/listen_address.h"

#include <charconv>

namespace wharf::internal {

Status ParseListenAddress(std::string_view option, std::string_view text, ListenAddress* address) {
  auto refuse = [&](const char* why) {
    return Status::InvalidArgument("option '" + std::string(option) + "': '" + std::string(text) +
                                   "' is not HOST:PORT (" + why + "), e.g. 127.0.0.1:9464");
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return refuse("no ':PORT'");
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return refuse("an IPv6 host needs its ']'");
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return refuse("put an IPv6 host in brackets, e.g. [::1]:9464");
  }
  if (host.empty()) return refuse("no HOST");
  for (char c : host) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == '/' || c == '[' || c == ']') {
      return refuse("HOST holds a character a host name cannot");
    }
  }
  uint32_t value = 0;
  auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || error != std::errc() || end != port.data() + port.size() || value > 65535) {
    return refuse("PORT is not an integer in [0, 65535]");
  }
  address->host = std::string(host);
  address->port = static_cast<uint16_t>(value);
  return Status::OK();
}

std::string FormatListenAddress(const ListenAddress& address) {
  const bool v6 = address.host.find(':') != std::string::npos;
  return (v6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

}  // namespace wharf::internal
