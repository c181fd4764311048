#include "agent/gpu/kernel_log_xid.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <charconv>

#include "agent/runner/os_error.h"

namespace hangar::agent {

std::optional<KernelXid> ParseKernelXidLine(std::string_view line) {
  const size_t nvrm = line.find("NVRM: Xid (");
  if (nvrm == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(nvrm + 11);
  if (rest.substr(0, 4) == "PCI:") rest.remove_prefix(4);
  const size_t close = rest.find(')');
  if (close == std::string_view::npos) return std::nullopt;
  auto pci = ParsePciAddress(rest.substr(0, close));
  if (!pci) return std::nullopt;
  rest.remove_prefix(close + 1);
  if (rest.empty() || rest.front() != ':') return std::nullopt;
  rest.remove_prefix(1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  uint64_t code = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), code);
  if (ec != std::errc() || p == rest.data()) return std::nullopt;
  std::string_view message = line.substr(nvrm);
  while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) {
    message.remove_suffix(1);
  }
  return KernelXid{*pci, code, std::string(message)};
}

StatusOr<std::unique_ptr<KernelLogXidReader>> KernelLogXidReader::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot read the kernel log " + path);
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode)) lseek(fd, 0, SEEK_END);
  return std::unique_ptr<KernelLogXidReader>(new KernelLogXidReader(fd, path));
}

KernelLogXidReader::~KernelLogXidReader() { close(fd_); }

std::vector<KernelXid> KernelLogXidReader::Poll() {
  std::vector<KernelXid> out;
  char buf[8192];  // /dev/kmsg hands out one record per read and needs room for a whole one
  // Bounded, so a log that grows as fast as we read cannot hold the caller forever.
  for (int reads = 0; reads < 4096; ++reads) {
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) continue;  // kmsg overwrote records we had not read: skip on
    if (n <= 0) break;                      // EAGAIN: nothing more now; 0: end of a file
    partial_.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
      auto xid = ParseKernelXidLine(std::string_view(partial_).substr(start, nl - start));
      if (xid) out.push_back(std::move(*xid));
    }
    partial_.erase(0, start);
    if (partial_.size() > sizeof buf) partial_.clear();  // not a log: no line is this long
  }
  return out;
}

}  // namespace hangar::agent
