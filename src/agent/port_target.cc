#include "agent/port_target.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace hangar::agent {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The kernel prints each 32-bit word of an address in the host's byte order (x86 and arm64:
// little-endian), so a word's lowest byte is the address's first.
bool AddressBytes(const std::string& hex, std::vector<uint8_t>* bytes) {
  if (hex.size() % 8 != 0) return false;
  for (size_t at = 0; at < hex.size(); at += 8) {
    char* end = nullptr;
    const std::string word_text = hex.substr(at, 8);
    const unsigned long word = std::strtoul(word_text.c_str(), &end, 16);
    if (*end != '\0') return false;
    for (int i = 0; i < 4; ++i) bytes->push_back(static_cast<uint8_t>(word >> (8 * i)));
  }
  return true;
}

std::vector<pid_t> AllProcesses(const std::string& proc) {
  std::vector<pid_t> out;
  DIR* d = opendir(proc.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end == '\0' && pid > 0) out.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  return out;
}

// The parent of `pid`, from its stat line (after the command's closing parenthesis: state, ppid).
pid_t ParentOf(const std::string& proc, pid_t pid) {
  const std::string stat = ReadAll(proc + "/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream rest(stat.substr(paren + 1));
  std::string state;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

// The first of `inodes` among the descriptors of `pid` (0: none).
uint64_t HeldSocket(const std::string& proc, pid_t pid, const std::set<uint64_t>& inodes) {
  const std::string dir = proc + "/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return 0;
  uint64_t found = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char link[64];
    const ssize_t n = readlink((dir + "/" + e->d_name).c_str(), link, sizeof link - 1);
    if (n <= 0) continue;
    link[n] = '\0';
    unsigned long long inode = 0;
    if (std::sscanf(link, "socket:[%llu]", &inode) == 1 && inodes.count(inode)) {
      found = inode;
      break;
    }
  }
  closedir(d);
  return found;
}

ino_t NamespaceInode(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

std::vector<TcpListener> ParseTcpListeners(const std::string& text, bool v6, uint16_t port) {
  std::vector<TcpListener> out;
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string sl, local, remote, state, queues, timer, retransmits, uid, timeout;
    unsigned long long inode = 0;
    if (!(f >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >>
          inode)) {
      continue;
    }
    const size_t colon = local.find(':');
    if (state != "0A" || colon == std::string::npos) continue;  // 0A: listening
    if (std::strtoul(local.c_str() + colon + 1, nullptr, 16) != port) continue;
    std::vector<uint8_t> a;
    if (!AddressBytes(local.substr(0, colon), &a) || a.size() != (v6 ? 16u : 4u)) continue;
    TcpListener l;
    l.inode = inode;
    l.v6 = v6;
    bool zero = true;
    for (uint8_t b : a) zero = zero && b == 0;
    l.any = zero;
    if (!v6) {
      l.loopback = a[0] == 127;
    } else {
      bool head_zero = true;  // the first ten bytes
      for (int i = 0; i < 10; ++i) head_zero = head_zero && a[i] == 0;
      const bool mapped = head_zero && a[10] == 0xff && a[11] == 0xff;
      const bool one = head_zero && a[10] == 0 && a[11] == 0 && a[12] == 0 && a[13] == 0 &&
                       a[14] == 0 && a[15] == 1;
      l.loopback = one || (mapped && a[12] == 127);
    }
    if (l.any || l.loopback) out.push_back(l);
  }
  return out;
}

std::vector<pid_t> ProcessTree(const std::vector<pid_t>& roots, const std::string& proc) {
  std::multimap<pid_t, pid_t> children;
  for (pid_t pid : AllProcesses(proc)) children.emplace(ParentOf(proc, pid), pid);
  std::vector<pid_t> out;
  std::set<pid_t> seen;
  std::vector<pid_t> todo(roots.begin(), roots.end());
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    if (pid <= 0 || !seen.insert(pid).second) continue;
    out.push_back(pid);
    auto [from, to] = children.equal_range(pid);
    for (auto it = from; it != to; ++it) todo.push_back(it->second);
  }
  return out;
}

StatusOr<PortTarget> FindTaskListener(pid_t netns_pid, const std::vector<pid_t>& roots,
                                      uint16_t port, const std::string& proc) {
  const std::string net = proc + "/" + std::to_string(netns_pid) + "/net/";
  std::map<uint64_t, bool> v6_of;  // listening inode -> whether it is an IPv6 socket
  for (bool v6 : {false, true}) {
    for (const TcpListener& l : ParseTcpListeners(ReadAll(net + (v6 ? "tcp6" : "tcp")), v6, port))
      v6_of[l.inode] = l.v6;
  }
  std::set<uint64_t> inodes;
  for (const auto& [inode, v6] : v6_of) inodes.insert(inode);
  const std::string none = "nothing of the task's listens on port " + std::to_string(port) +
                           " (on 127.0.0.1, ::1 or all addresses); start the server inside the "
                           "task first, listening on 127.0.0.1:" +
                           std::to_string(port);
  if (inodes.empty()) return Status::FailedPrecondition(none);
  for (pid_t pid : ProcessTree(roots, proc)) {
    if (const uint64_t inode = HeldSocket(proc, pid, inodes); inode != 0) {
      PortTarget t;
      t.v6 = v6_of[inode];
      return t;
    }
  }
  return Status::FailedPrecondition(none);
}

StatusOr<int> ConnectInNamespace(pid_t netns_pid, const PortTarget& target, uint16_t port,
                                 const std::string& proc) {
  const int family = target.v6 ? AF_INET6 : AF_INET;
  const std::string ns = proc + "/" + std::to_string(netns_pid) + "/ns/net";
  int fd = -1;
  int err = 0;
  if (NamespaceInode(ns) == NamespaceInode(proc + "/self/ns/net")) {
    fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    err = errno;
  } else {
    // A socket stays in the namespace it was made in; only this short thread enters the task's.
    std::thread([&] {
      const int nsfd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
      if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) {
        err = errno;
      } else {
        fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        err = errno;
      }
      if (nsfd >= 0) close(nsfd);
    }).join();
  }
  if (fd < 0)
    return Status::Unavailable("cannot make a socket in the task's network namespace: " +
                               std::string(std::strerror(err)));
  int rc;
  if (target.v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_loopback;
    rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0) {
    err = errno;
    close(fd);
    return Status::Unavailable("cannot connect to port " + std::to_string(port) +
                               " in the task: " + std::strerror(err));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

}  // namespace hangar::agent
