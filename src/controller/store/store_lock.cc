#include "controller/store/store_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace hangar::controller {

StoreFileLock::StoreFileLock(StoreFileLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), device_(other.device_), inode_(other.inode_) {}

StoreFileLock& StoreFileLock::operator=(StoreFileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    device_ = other.device_;
    inode_ = other.inode_;
  }
  return *this;
}

// Closing the descriptor releases the flock. SQLite's own locks are POSIX record locks, which a
// close of any descriptor of the file would drop: the store closes SQLite's connections first.
StoreFileLock::~StoreFileLock() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<StoreFileLock> StoreFileLock::Take(const std::string& path) {
  StoreFileLock lock;
  lock.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock.fd_ < 0) {
    return Status::Unavailable("cannot open the store " + path + ": " + std::strerror(errno));
  }
  // The store holds jobs' specs (and their environments): its owner's alone. SQLite gives the
  // -wal and -shm files the mode of the database file.
  (void)::fchmod(lock.fd_, 0600);
  struct stat st {};
  if (::fstat(lock.fd_, &st) != 0) {
    return Status::Unavailable("cannot stat the store " + path + ": " + std::strerror(errno));
  }
  lock.device_ = st.st_dev;
  lock.inode_ = st.st_ino;
  if (::flock(lock.fd_, LOCK_EX | LOCK_NB) != 0) {
    const pid_t holder = FlockHolder(st.st_dev, st.st_ino);
    return Status::FailedPrecondition(
        "the store " + path + " is in use by another controller" +
        (holder > 0 ? " (pid " + std::to_string(holder) + ")" : std::string()) +
        "; stop it first, or give this controller a store of its own (--store)");
  }
  return lock;
}

pid_t FlockHolder(dev_t device, ino_t inode) {
  // Lines read "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF": the device's major and minor
  // numbers in hex, the inode in decimal.
  std::ostringstream want;
  want << std::hex << major(device) << ':' << minor(device) << ':' << std::dec << inode;
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream in(line);
    std::string ord, kind, mode, access, pid, file;
    if (!(in >> ord >> kind)) continue;
    if (kind == "->") continue;  // a waiter, not a holder
    if (!(in >> mode >> access >> pid >> file) || kind != "FLOCK") continue;
    // The kernel pads major and minor to two digits; compare without the padding.
    std::string dev_maj, dev_min, ino;
    std::istringstream parts(file);
    if (!std::getline(parts, dev_maj, ':') || !std::getline(parts, dev_min, ':') ||
        !std::getline(parts, ino))
      continue;
    try {
      std::ostringstream got;
      got << std::hex << std::stoul(dev_maj, nullptr, 16) << ':' << std::stoul(dev_min, nullptr, 16)
          << ':' << ino;
      if (got.str() == want.str()) return static_cast<pid_t>(std::stol(pid));
    } catch (const std::exception&) {
      continue;  // a line of another shape
    }
  }
  return 0;
}

}  // namespace hangar::controller
