#include "agent/open_as_user.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "agent/runner/os_error.h"
#include "common/sanitizer.h"

namespace hangar::agent {
namespace {

// What the child answers: which step failed (kOpened: none), and errno.
enum class Step : int { kOpened = 0, kSwitch, kOpen };
struct ChildAnswer {
  Step step;
  int err;
};

// Everything the child needs, prepared by the parent: the child of a multi-threaded process may
// only make async-signal-safe calls (no allocation, no locks).
struct OpenPlan {
  const char* path;
  int flags;
  int sock;
  bool switch_user;
  uid_t uid;
  gid_t gid;
  const gid_t* groups;
  size_t group_count;
};

[[noreturn]] void Answer(int sock, Step step, int err, int fd) {
  ChildAnswer answer{step, err};
  iovec iov{&answer, sizeof answer};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  ssize_t sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
  (void)sent;  // if the agent is gone, there is no one left to tell
  _exit(0);
}

// Async-signal-safe calls only. The child is a copy of the agent's memory (its tokens and keys
// among it): it keeps no descriptor but the socket, and is never dumpable, so the user it becomes
// can neither ptrace it nor read /proc/PID/mem. The kernel resets "dumpable" to
// fs.suid_dumpable when credentials change, hence the second prctl.
int OpenChild(void* arg) {
  const OpenPlan& p = *static_cast<const OpenPlan*>(arg);
  if (p.sock > 3) close_range(3, static_cast<unsigned>(p.sock - 1), 0);
  close_range(static_cast<unsigned>(p.sock + 1), ~0U, 0);
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (p.switch_user) {
    // Raw system calls, as process_spawn.cc explains: glibc's wrappers would try to reach the
    // agent's other threads, which do not exist in this copy.
#ifdef SYS_setgroups32
    const long set_groups = SYS_setgroups32, set_gid = SYS_setresgid32, set_uid = SYS_setresuid32;
#else
    const long set_groups = SYS_setgroups, set_gid = SYS_setresgid, set_uid = SYS_setresuid;
#endif
    if (syscall(set_groups, p.group_count, p.groups) != 0 ||
        syscall(set_gid, p.gid, p.gid, p.gid) != 0 || syscall(set_uid, p.uid, p.uid, p.uid) != 0) {
      Answer(p.sock, Step::kSwitch, errno, -1);
    }
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  }
  const int fd = open(p.path, p.flags);
  Answer(p.sock, fd < 0 ? Step::kOpen : Step::kOpened, fd < 0 ? errno : 0, fd);
}

struct ChildResult {
  ChildAnswer answer{Step::kSwitch, EIO};
  int fd = -1;
  bool timed_out = false;
};

// Reads the child's answer (and the descriptor it passes), waiting at most `timeout_ms`.
ChildResult Receive(int sock, int timeout_ms) {
  ChildResult out;
  pollfd pfd{sock, POLLIN, 0};
  int ready;
  while ((ready = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  if (ready == 0) {
    out.timed_out = true;
    return out;
  }
  iovec iov{&out.answer, sizeof out.answer};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t got;
  while ((got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof out.answer)) {
    out.answer = {Step::kSwitch, got < 0 ? errno : EIO};
    return out;
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      std::memcpy(&out.fd, CMSG_DATA(c), sizeof out.fd);
  }
  return out;
}

// Opens `path` with `flags` in a child running as `who`; the child's answer and descriptor.
StatusOr<ChildResult> OpenInChild(const std::string& path, int flags,
                                  const std::optional<TaskCredentials>& who) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return ErrnoStatus(errno, "socketpair");
  const std::vector<gid_t> groups = who ? who->groups : std::vector<gid_t>();
  OpenPlan plan{
      path.c_str(),       flags,         sv[1],        who.has_value(), who ? who->uid : 0,
      who ? who->gid : 0, groups.data(), groups.size()};
  // All signals stay blocked in the child: no handler of the agent may run there.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  constexpr size_t kStack = 64 * 1024;
  void* stack =
      mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  pid_t pid = -1;
  int clone_errno = ENOMEM;
  if (stack != MAP_FAILED) {
    UnpoisonChildStack(stack, kStack);
    // No CLONE_VM: the child has a copy of the agent's memory, not the memory itself, so nothing
    // it does as the user can touch the agent. A raw clone, not fork(): no atfork handlers run.
    pid = clone(OpenChild, static_cast<char*>(stack) + kStack, SIGCHLD, &plan);
    clone_errno = errno;
    munmap(stack, kStack);  // the child has its own copy
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    return ErrnoStatus(clone_errno, "cannot start a process to open " + path);
  }
  ChildResult r = Receive(sv[0], 30'000);
  if (r.timed_out) kill(pid, SIGKILL);
  close(sv[0]);
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  return r;
}

std::string RootList(const std::vector<std::string>& roots, const std::string& setting) {
  if (roots.empty()) return "none: cluster.yaml sets no " + setting;
  std::string list;
  for (const auto& r : roots) list += (list.empty() ? "" : ", ") + r;
  return setting + ": " + list;
}

Status OutsideRoots(const std::string& what, const std::string& resolved,
                    const std::vector<std::string>& roots, const std::string& setting) {
  return Status::PermissionDenied(
      what + (resolved.empty() ? "" : " resolves to " + resolved + ", which") +
      " is not under a folder this cluster allows (" + RootList(roots, setting) +
      "); ask an admin to add its folder to " + setting + " in cluster.yaml");
}

}  // namespace

OpenedPath::OpenedPath(OpenedPath&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), resolved_(std::move(o.resolved_)) {}

OpenedPath& OpenedPath::operator=(OpenedPath&& o) noexcept {
  if (fd_ >= 0) close(fd_);
  fd_ = std::exchange(o.fd_, -1);
  resolved_ = std::move(o.resolved_);
  return *this;
}

OpenedPath::~OpenedPath() {
  if (fd_ >= 0) close(fd_);
}

bool PathUnder(const std::string& path, const std::string& root) {
  if (root == "/") return !path.empty() && path.front() == '/';
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return path == r ||
         (path.size() > r.size() && path.compare(0, r.size(), r) == 0 && path[r.size()] == '/');
}

std::string WhoOpens(const std::optional<TaskCredentials>& who) {
  if (!who) return "the agent's user";
  return who->name.empty() ? "uid " + std::to_string(who->uid) : "user " + who->name;
}

StatusOr<OpenedPath> OpenAsUser(const std::string& path, const std::optional<TaskCredentials>& who,
                                const std::vector<std::string>& roots, OpenFor purpose,
                                const std::string& setting, const std::string& what) {
  namespace fs = std::filesystem;
  if (path.empty() || path.front() != '/')
    return Status::InvalidArgument(what + ": the path must be absolute");
  // The roots as spelled and as resolved (an admin's "/data" may be a link to "/mnt/data").
  std::vector<std::string> resolved_roots;
  for (const auto& r : roots) {
    std::error_code ec;
    const fs::path real = fs::canonical(r, ec);
    if (!ec) resolved_roots.push_back(real.string());
  }
  auto under_any = [](const std::string& p, const std::vector<std::string>& list) {
    for (const auto& r : list) {
      if (PathUnder(p, r)) return true;
    }
    return false;
  };
  // Spelled under a root before anything is opened: no path elsewhere is even tried.
  const std::string spelled = fs::path(path).lexically_normal().string();
  if (!under_any(spelled, roots) && !under_any(spelled, resolved_roots))
    return OutsideRoots(what, "", roots, setting);
  const int flags = purpose == OpenFor::kReading ? O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK
                                                 : O_PATH | O_CLOEXEC;
  HANGAR_ASSIGN_OR_RETURN(ChildResult r, OpenInChild(path, flags, who));
  if (r.timed_out)
    return Status::Unavailable(what + ": opening it as " + WhoOpens(who) +
                               " took over 30 s; is its filesystem hung?");
  if (r.answer.step == Step::kSwitch) {
    return ErrnoStatus(r.answer.err, "cannot become " + WhoOpens(who) + " to open " + what);
  }
  // The same sentence for every reason: whether the file exists is itself not the user's to learn.
  if (r.answer.step == Step::kOpen || r.fd < 0) {
    return Status::NotFound(what + ": not " +
                            (purpose == OpenFor::kReading ? "readable" : "reachable") + " by " +
                            WhoOpens(who) + " (or does not exist)");
  }
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", r.fd);
  std::error_code ec;
  const std::string real = fs::read_symlink(link, ec).string();
  OpenedPath opened(r.fd, real);
  if (ec)
    return Status::Internal("cannot tell where " + what + " leads (" + std::string(link) + ": " +
                            ec.message() + ")");
  // What was opened, not what was spelled: a link inside a root that leads out of them is refused.
  if (!under_any(real, resolved_roots)) return OutsideRoots(what, real, roots, setting);
  if (purpose == OpenFor::kReading) {
    struct stat st {};
    if (fstat(opened.fd(), &st) != 0 || !S_ISREG(st.st_mode))
      return Status::FailedPrecondition(what + " is not a regular file");
    const int fl = fcntl(opened.fd(), F_GETFL);
    if (fl >= 0) fcntl(opened.fd(), F_SETFL, fl & ~O_NONBLOCK);
  }
  return opened;
}

}  // namespace hangar::agent
