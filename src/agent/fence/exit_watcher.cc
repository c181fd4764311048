#include "agent/fence/exit_watcher.h"

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace hangar::agent {

namespace {

constexpr size_t kAlign = NLA_ALIGNTO;
size_t Aligned(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

// One generic netlink request: its header, the command, and one attribute.
std::vector<char> Request(uint16_t family, uint8_t cmd, uint16_t attr, const std::string& value) {
  const size_t attr_len = NLA_HDRLEN + value.size() + 1;
  std::vector<char> out(NLMSG_HDRLEN + GENL_HDRLEN + Aligned(attr_len), 0);
  auto* nh = reinterpret_cast<nlmsghdr*>(out.data());
  nh->nlmsg_len = static_cast<uint32_t>(out.size());
  nh->nlmsg_type = family;
  nh->nlmsg_flags = NLM_F_REQUEST;
  nh->nlmsg_seq = 1;
  auto* gh = reinterpret_cast<genlmsghdr*>(out.data() + NLMSG_HDRLEN);
  gh->cmd = cmd;
  gh->version = 1;
  auto* na = reinterpret_cast<nlattr*>(out.data() + NLMSG_HDRLEN + GENL_HDRLEN);
  na->nla_len = static_cast<uint16_t>(attr_len);
  na->nla_type = attr;
  std::memcpy(reinterpret_cast<char*>(na) + NLA_HDRLEN, value.c_str(), value.size() + 1);
  return out;
}

// Calls fn(type, payload, length) for each attribute in [data, data + len).
template <typename Fn>
void ForEachAttr(const char* data, size_t len, Fn&& fn) {
  size_t off = 0;
  while (off + NLA_HDRLEN <= len) {
    nlattr a;
    std::memcpy(&a, data + off, sizeof a);
    if (a.nla_len < NLA_HDRLEN || off + a.nla_len > len) return;
    fn(a.nla_type & NLA_TYPE_MASK, data + off + NLA_HDRLEN, a.nla_len - NLA_HDRLEN);
    off += Aligned(a.nla_len);
  }
}

StatusOr<uint16_t> TaskstatsFamily(int fd) {
  const std::vector<char> ask =
      Request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_NAME, TASKSTATS_GENL_NAME);
  if (send(fd, ask.data(), ask.size(), 0) < 0)
    return Status::Unavailable(std::string("taskstats: send: ") + std::strerror(errno));
  char buf[8192];
  const ssize_t n = recv(fd, buf, sizeof buf, 0);
  if (n < static_cast<ssize_t>(NLMSG_HDRLEN + GENL_HDRLEN))
    return Status::Unavailable("taskstats: no answer from the generic netlink controller");
  const auto* nh = reinterpret_cast<const nlmsghdr*>(buf);
  if (nh->nlmsg_type == NLMSG_ERROR)
    return Status::Unavailable("taskstats: the kernel has no TASKSTATS family");
  int family = -1;
  const size_t head = NLMSG_HDRLEN + GENL_HDRLEN;
  ForEachAttr(buf + head, std::min<size_t>(nh->nlmsg_len, static_cast<size_t>(n)) - head,
              [&](uint16_t type, const char* p, size_t len) {
                if (type == CTRL_ATTR_FAMILY_ID && len >= 2) {
                  uint16_t id;
                  std::memcpy(&id, p, 2);
                  family = id;
                }
              });
  if (family < 0) return Status::Unavailable("taskstats: its family id was not in the answer");
  return static_cast<uint16_t>(family);
}

}  // namespace

StatusOr<std::unique_ptr<ExitWatcher>> ExitWatcher::Start() {
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
  if (fd < 0) return Status::Unavailable(std::string("taskstats: socket: ") + std::strerror(errno));
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  // A node's every exiting thread is reported: room for bursts (as root, past rmem_max).
  const int bytes = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  timeval tv{0, 200 * 1000};  // the listener checks for Stop this often
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
    const Status s = Status::Unavailable(std::string("taskstats: bind: ") + std::strerror(errno));
    close(fd);
    return s;
  }
  auto family = TaskstatsFamily(fd);
  if (!family.ok()) {
    close(fd);
    return family.status();
  }
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  const std::vector<char> reg =
      Request(*family, TASKSTATS_CMD_GET, TASKSTATS_CMD_ATTR_REGISTER_CPUMASK,
              "0-" + std::to_string(std::max<long>(cpus, 1) - 1));
  if (send(fd, reg.data(), reg.size(), 0) < 0) {
    const Status s =
        Status::Unavailable(std::string("taskstats: register: ") + std::strerror(errno));
    close(fd);
    return s;
  }
  std::unique_ptr<ExitWatcher> w(new ExitWatcher(fd));
  w->thread_ = std::thread([p = w.get()] { p->Listen(); });
  return w;
}

ExitWatcher::~ExitWatcher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  close(fd_);
}

void ExitWatcher::Watch(pid_t pid) {
  MutexLock lock(mu_);
  watched_.insert(pid);
}

std::optional<int> ExitWatcher::TakeStatus(pid_t pid, Duration timeout) {
  MutexLock lock(mu_);
  lock.WaitFor(exited_cv_, std::chrono::milliseconds(timeout),
               [&]() HANGAR_REQUIRES(mu_) { return exited_.count(pid) > 0; });
  auto it = exited_.find(pid);
  if (it == exited_.end()) return std::nullopt;
  const int status = it->second;
  exited_.erase(it);
  watched_.erase(pid);
  return status;
}

void ExitWatcher::Listen() {
  std::vector<char> buf(64 * 1024);
  while (!stop_) {
    const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
    if (n <= 0) continue;  // the timeout (to check stop_), or ENOBUFS: some reports were lost
    Handle(buf.data(), static_cast<size_t>(n));
  }
}

void ExitWatcher::Handle(const char* data, size_t len) {
  size_t off = 0;
  while (off + NLMSG_HDRLEN <= len) {
    nlmsghdr nh;
    std::memcpy(&nh, data + off, sizeof nh);
    if (nh.nlmsg_len < NLMSG_HDRLEN || off + nh.nlmsg_len > len) return;
    const size_t head = NLMSG_HDRLEN + GENL_HDRLEN;
    if (nh.nlmsg_type != NLMSG_ERROR && nh.nlmsg_len > head) {
      // TASKSTATS_TYPE_AGGR_PID holds the exiting thread's pid and its statistics, whose
      // ac_exitcode is the status waitpid() would give. A task's leader is its group's first
      // thread, so its pid is the one watched.
      ForEachAttr(data + off + head, nh.nlmsg_len - head,
                  [&](uint16_t type, const char* p, size_t plen) {
                    if (type != TASKSTATS_TYPE_AGGR_PID) return;
                    uint32_t pid = 0;
                    std::optional<uint32_t> code;
                    ForEachAttr(p, plen, [&](uint16_t t, const char* v, size_t vlen) {
                      if (t == TASKSTATS_TYPE_PID && vlen >= 4) std::memcpy(&pid, v, 4);
                      if (t == TASKSTATS_TYPE_STATS &&
                          vlen >= offsetof(taskstats, ac_exitcode) + sizeof(uint32_t)) {
                        uint32_t c;
                        std::memcpy(&c, v + offsetof(taskstats, ac_exitcode), sizeof c);
                        code = c;
                      }
                    });
                    if (pid == 0 || !code) return;
                    MutexLock lock(mu_);
                    if (!watched_.count(static_cast<pid_t>(pid))) return;
                    exited_[static_cast<pid_t>(pid)] = static_cast<int>(*code);
                    exited_cv_.notify_all();
                  });
    }
    off += NLMSG_ALIGN(nh.nlmsg_len);
  }
}

}  // namespace hangar::agent
