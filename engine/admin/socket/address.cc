#include "engine/admin/socket/address.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace wharf::internal::admin_socket {

std::string SocketPathFor(const std::string& db_path, const std::string& setting) {
  if (setting == "off") return "";
  if (setting == "on") return db_path + "/" + kDefaultSocketName;
  return setting;
}

SocketAddress::~SocketAddress() {
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

Status SocketAddress::Set(const std::string& path) {
  if (dir_fd_ >= 0) ::close(dir_fd_);
  dir_fd_ = -1;
  addr_ = sockaddr_un{};
  addr_.sun_family = AF_UNIX;
  if (path.empty()) return Status::InvalidArgument("admin socket path is empty");
  if (path.find('\0') != std::string::npos) {
    return Status::InvalidArgument("admin socket path contains a NUL byte");
  }
  std::string name = path;
  if (path.size() >= sizeof(addr_.sun_path)) {
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
    dir_fd_ = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd_ < 0) {
      return Status::IOError("admin socket: cannot open directory " + dir + ": " +
                             std::strerror(errno));
    }
    name = "/proc/self/fd/" + std::to_string(dir_fd_) + "/" + file;
    if (name.size() >= sizeof(addr_.sun_path)) {
      return Status::InvalidArgument("admin socket file name '" + file + "' is too long (" +
                                     std::to_string(file.size()) + " bytes)");
    }
  }
  std::memcpy(addr_.sun_path, name.data(), name.size());
  length_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + 1);
  return Status::OK();
}

}  // namespace wharf::internal::admin_socket
