// Where the admin socket lives, and a bindable/connectable address for it whatever its length.
//
// A Unix socket address holds at most 107 bytes of path (sun_path). A longer path (a database deep
// in a tree) is reached through the directory: the parent directory is opened and the address
// names `/proc/self/fd/<dir fd>/<file name>`, which the kernel resolves to the same file.
//
// Thread safety: free functions; a SocketAddress is used by one thread.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <string>

#include "wharf/status.h"

namespace wharf::internal::admin_socket {

// The file name of the default socket in the database directory (admin_socket=on).
inline constexpr const char* kDefaultSocketName = "admin.sock";

// The socket path an engine option `admin_socket` means for the database at `db_path`: "on" the
// default in the directory, "off" none (empty), anything else that path.
std::string SocketPathFor(const std::string& db_path, const std::string& setting);

class SocketAddress {
 public:
  SocketAddress() = default;
  SocketAddress(const SocketAddress&) = delete;
  SocketAddress& operator=(const SocketAddress&) = delete;
  ~SocketAddress();

  // InvalidArgument when `path` is empty, or its file name alone does not fit; IOError when a
  // long path's directory cannot be opened.
  Status Set(const std::string& path);

  const sockaddr* addr() const { return reinterpret_cast<const sockaddr*>(&addr_); }
  socklen_t length() const { return length_; }

 private:
  sockaddr_un addr_{};
  socklen_t length_ = 0;
  int dir_fd_ = -1;  // the parent directory, for a path longer than sun_path
};

}  // namespace wharf::internal::admin_socket
