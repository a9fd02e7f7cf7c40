// Fresh temporary directories for databases, removed when done (every run starts from nothing).
#pragma once

#include <string>

namespace wharf::bench {

class ScratchDir {
 public:
  // Creates a new, uniquely named directory "<parent>/<prefix>XXXXXX". On failure path() is empty
  // and error() says why.
  ScratchDir(const std::string& parent, const std::string& prefix);
  ~ScratchDir();  // removes the directory and everything in it
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  std::string error_;
};

// Name of the filesystem type holding `path` ("ext4", "tmpfs", ...), or "unknown". Matters because
// fdatasync on tmpfs costs nothing, which would make every durable figure meaningless.
std::string FilesystemType(const std::string& path);

}  // namespace wharf::bench
