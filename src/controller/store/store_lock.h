// StoreFileLock: one controller per SQLite store file. The lock is an flock(2) on the database
// file itself, so it follows the file (its inode), not the name it was opened by: a second
// controller given a hard link, a bind mount or another spelling of the path is refused too.
// The kernel releases it when its holder exits, however it exits.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace hangar::controller {

class StoreFileLock {
 public:
  StoreFileLock() = default;
  StoreFileLock(StoreFileLock&& other) noexcept;
  StoreFileLock& operator=(StoreFileLock&& other) noexcept;
  StoreFileLock(const StoreFileLock&) = delete;
  StoreFileLock& operator=(const StoreFileLock&) = delete;
  ~StoreFileLock();

  // Opens `path` (creating it, mode 0600, when it does not exist) and locks it. FailedPrecondition,
  // naming the holder's pid where the kernel tells it, when another open file holds the lock;
  // Unavailable when the file cannot be opened.
  [[nodiscard]] static StatusOr<StoreFileLock> Take(const std::string& path);

  bool held() const { return fd_ >= 0; }
  // The locked file's identity: a file at the same path with another inode is another file.
  dev_t device() const { return device_; }
  ino_t inode() const { return inode_; }

 private:
  int fd_ = -1;
  dev_t device_ = 0;
  ino_t inode_ = 0;
};

// The pid of the process holding an flock on the file (device, inode), from /proc/locks; 0 when
// none is found.
pid_t FlockHolder(dev_t device, ino_t inode);

}  // namespace hangar::controller
