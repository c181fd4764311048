#include "agent/runner/process_spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <utility>

#include "agent/runner/os_error.h"
#include "common/sanitizer.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace hangar::agent {
namespace {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~UniqueFd() { Reset(-1); }

  int get() const { return fd_; }
  void Reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Takes ownership of a fresh close-on-exec descriptor (or reports why there is none), moving it
// above 2 so that the child's dup2() onto 0, 1 and 2 can never overwrite another one it needs.
StatusOr<UniqueFd> AboveStdio(int fd, const std::string& what) {
  if (fd < 0) return ErrnoStatus(errno, what);
  UniqueFd owned(fd);
  if (fd > STDERR_FILENO) return owned;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  if (moved < 0) return ErrnoStatus(errno, what);
  return UniqueFd(moved);
}

Status MakeDirectories(const std::filesystem::path& dir, const std::string& what) {
  if (dir.empty()) return Status::Ok();
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return ErrnoStatus(error.value(), "cannot create " + what + " '" + dir.string() + "'");
  return Status::Ok();
}

// The workdir, made if missing; one this makes belongs to the task's user, who alone may enter it.
Status MakeWorkdir(const SpawnRequest& request) {
  if (request.workdir.empty()) return Status::Ok();
  std::error_code error;
  const bool created = std::filesystem::create_directories(request.workdir, error);
  if (error) return ErrnoStatus(error.value(), "cannot create workdir '" + request.workdir + "'");
  if (!created || !request.credentials) return Status::Ok();
  const TaskCredentials& c = *request.credentials;
  if (lchown(request.workdir.c_str(), c.uid, c.gid) != 0 ||
      chmod(request.workdir.c_str(), 0700) != 0) {
    return ErrnoStatus(errno, "cannot give workdir '" + request.workdir + "' to " + c.Describe());
  }
  return Status::Ok();
}

StatusOr<UniqueFd> OpenOutput(const std::string& path, const std::string& stream,
                              const std::optional<TaskCredentials>& owner) {
  if (path.empty()) {
    return AboveStdio(open("/dev/null", O_WRONLY | O_CLOEXEC), "cannot open /dev/null");
  }
  HANGAR_RETURN_IF_ERROR(MakeDirectories(std::filesystem::path(path).parent_path(),
                                         "the directory of the " + stream + " file"));
  // The task's owner's alone: output often echoes its environment (tokens, keys). Never through
  // a link someone put in its place.
  const std::string what = "cannot open the " + stream + " file '" + path + "'";
  HANGAR_ASSIGN_OR_RETURN(
      UniqueFd fd,
      AboveStdio(open(path.c_str(),
                      O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC, 0600),
                 what));
  if (owner && fchown(fd.get(), owner->uid, owner->gid) != 0) {
    return ErrnoStatus(
        errno, "cannot give the " + stream + " file '" + path + "' to " + owner->Describe());
  }
  return fd;
}

struct StdStreams {
  UniqueFd in, out, err;
};

// Copies of descriptors the caller gave (above 2, close-on-exec).
StatusOr<StdStreams> GivenStreams(const SpawnRequest& request) {
  StdStreams streams;
  const auto copy = [](int fd) {
    return AboveStdio(fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1),
                      "cannot take the session's descriptors");
  };
  HANGAR_ASSIGN_OR_RETURN(streams.in, copy(request.stdin_fd));
  HANGAR_ASSIGN_OR_RETURN(streams.out, copy(request.stdout_fd));
  HANGAR_ASSIGN_OR_RETURN(streams.err, copy(request.stderr_fd));
  return streams;
}

StatusOr<StdStreams> OpenStreams(const SpawnRequest& request) {
  if (request.stdin_fd >= 0 && request.stdout_fd >= 0 && request.stderr_fd >= 0)
    return GivenStreams(request);
  StdStreams streams;
  // A given stdin alone (an interactive task's pipe) with the output files; else /dev/null.
  HANGAR_ASSIGN_OR_RETURN(
      streams.in,
      request.stdin_fd >= 0
          ? AboveStdio(fcntl(request.stdin_fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1),
                       "cannot take the task's stdin")
          : AboveStdio(open("/dev/null", O_RDONLY | O_CLOEXEC), "cannot open /dev/null"));
  HANGAR_ASSIGN_OR_RETURN(streams.out,
                          OpenOutput(request.stdout_path, "stdout", request.credentials));
  if (!request.stderr_path.empty() && request.stderr_path == request.stdout_path) {
    // Two opens with O_TRUNC would give two file offsets that overwrite each other.
    streams.err = UniqueFd(fcntl(streams.out.get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1));
    if (streams.err.get() < 0) return ErrnoStatus(errno, "cannot share the stdout file");
  } else {
    HANGAR_ASSIGN_OR_RETURN(streams.err,
                            OpenOutput(request.stderr_path, "stderr", request.credentials));
  }
  return streams;
}

std::string PathOf(const std::vector<std::string>& env) {
  std::string path = kDefaultTaskPath;
  for (const std::string& entry : env) {
    if (entry.starts_with("PATH=")) path = entry.substr(5);
  }
  return path;
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// What the child reports through the pipe. Everything but kCgroup ends the child.
enum class Stage : int { kSession = 1, kCgroup, kStdio, kCredentials, kWorkdir, kExec };
struct ChildReport {
  Stage stage;
  int err;
};

// Everything the child needs, prepared by the parent: after fork() the child of a multi-threaded
// process may not allocate, lock or otherwise call anything but async-signal-safe functions.
struct ChildPlan {
  const char* program;
  char* const* argv;
  char* const* envp;
  const char* workdir;  // nullptr: stay in the agent's working directory
  int stdin_fd, stdout_fd, stderr_fd;
  int cgroup_procs_fd;  // -1: no cgroup to join
  int report_fd;
  int max_fd;  // bound for marking descriptors close-on-exec when close_range() is missing
  bool controlling_terminal;  // stdin is a terminal to take as the controlling one
  bool switch_user;           // become uid/gid/groups; false: stay the agent's user
  uid_t uid;
  gid_t gid;
  const gid_t* groups;
  size_t group_count;
};

void Report(int report_fd, Stage stage, int err) {
  // A write of a few bytes to a pipe is atomic; if it fails there is no one left to tell.
  ChildReport report{stage, err};
  ssize_t written = write(report_fd, &report, sizeof report);
  (void)written;
}

[[noreturn]] void Fail(const ChildPlan& plan, Stage stage) {
  Report(plan.report_fd, stage, errno);
  _exit(127);
}

// Descriptors the agent opened without O_CLOEXEC (sockets, files of other threads) must not leak
// into a task that may run for weeks.
void CloseOnExecAbove2(int max_fd) {
  if (close_range(STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  for (int fd = STDERR_FILENO + 1; fd < max_fd; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// Async-signal-safe calls only.
[[noreturn]] void RunChild(const ChildPlan& plan) {
  // The agent's handlers must not run here, and ignored signals would stay ignored after exec.
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  if (setsid() < 0) Fail(plan, Stage::kSession);
  if (plan.cgroup_procs_fd >= 0 && write(plan.cgroup_procs_fd, "0", 1) != 1) {
    Report(plan.report_fd, Stage::kCgroup, errno);  // not fatal: the task runs without a cgroup
  }
  if (dup2(plan.stdin_fd, STDIN_FILENO) < 0 || dup2(plan.stdout_fd, STDOUT_FILENO) < 0 ||
      dup2(plan.stderr_fd, STDERR_FILENO) < 0) {
    Fail(plan, Stage::kStdio);
  }
  if (plan.controlling_terminal && ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0) Fail(plan, Stage::kStdio);
  // The task's user, after the cgroup (joining it needs the agent's rights) and before the
  // workdir (entered with the user's rights, as the user would). Groups first, then the gid,
  // and the uid last: once it is dropped, neither may change any more. Raw system calls: glibc's
  // wrappers synchronise every thread of the process, which in a child of a multi-threaded
  // process is not safe to ask for; here there is one thread, and the kernel's calls act on it.
  if (plan.switch_user) {
#ifdef SYS_setgroups32
    const long set_groups = SYS_setgroups32, set_gid = SYS_setresgid32, set_uid = SYS_setresuid32;
#else
    const long set_groups = SYS_setgroups, set_gid = SYS_setresgid, set_uid = SYS_setresuid;
#endif
    if (syscall(set_groups, plan.group_count, plan.groups) != 0 ||
        syscall(set_gid, plan.gid, plan.gid, plan.gid) != 0 ||
        syscall(set_uid, plan.uid, plan.uid, plan.uid) != 0) {
      Fail(plan, Stage::kCredentials);
    }
  }
  if (plan.workdir != nullptr && chdir(plan.workdir) < 0) Fail(plan, Stage::kWorkdir);
  CloseOnExecAbove2(plan.max_fd);
  execve(plan.program, plan.argv, plan.envp);
  Fail(plan, Stage::kExec);
}

int ChildEntry(void* plan) { RunChild(*static_cast<const ChildPlan*>(plan)); }

// As posix_spawn() does it: the child shares the agent's memory (CLONE_VM) on a stack of its own,
// and the calling thread waits (CLONE_VFORK) until the child has called execve() or exited. No
// page table is copied: a fork() of the agent (60-odd threads, ~30 MB resident) took 1.5-4 ms
// and the same again in CPU, for every task (docs/benchmarks.md). The child only reads the plan
// and makes system calls; its signal handlers are its own copy (no CLONE_SIGHAND), which it
// resets before anything else.
pid_t ForkChild(const ChildPlan& plan) {
  // All signals stay blocked from the clone until the child has reset their dispositions, so no
  // handler of the agent ever runs in the child.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
#if HANGAR_THREAD_SANITIZER
  // ThreadSanitizer's runtime cannot follow a child that shares the parent's memory (its CHECK
  // fails in the child): under it, a plain fork. The child reports through the same pipe.
  const pid_t forked = fork();
  if (forked == 0) RunChild(plan);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  errno = fork_errno;
  return forked;
#endif
  constexpr size_t kStack = 256 * 1024;
  void* stack =
      mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  pid_t pid = -1;
  int clone_errno = 0;
  if (stack == MAP_FAILED) {
    clone_errno = errno;
  } else {
    UnpoisonChildStack(stack, kStack);
    pid = clone(ChildEntry, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD,
                const_cast<ChildPlan*>(&plan));
    clone_errno = errno;
    munmap(stack, kStack);  // the child has exec'd or exited: it no longer uses it
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  errno = clone_errno;
  return pid;
}

struct ChildOutcome {
  bool failed = false;
  ChildReport failure{};
  int cgroup_errno = 0;
};

// Reads until end of file, which comes when execve() closes the child's end (close-on-exec) or
// when the child has exited.
ChildOutcome ReadReports(int report_fd) {
  ChildOutcome outcome;
  ChildReport report;
  for (;;) {
    ssize_t n = read(report_fd, &report, sizeof report);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof report)) break;
    if (report.stage == Stage::kCgroup) {
      outcome.cgroup_errno = report.err;
    } else {
      outcome.failed = true;
      outcome.failure = report;
    }
  }
  return outcome;
}

Status FailureStatus(const ChildReport& report, const SpawnRequest& request) {
  std::string what = "cannot run '" + request.argv[0] + "'";
  switch (report.stage) {
    case Stage::kSession:
      what += ": cannot start a new session";
      break;
    case Stage::kStdio:
      what += ": cannot redirect its standard streams";
      break;
    case Stage::kCredentials:
      what += " as " + request.credentials->Describe();
      break;
    case Stage::kWorkdir:
      what += ": cannot enter workdir '" + request.workdir + "'";
      if (request.credentials) what += " as " + request.credentials->Describe();
      break;
    default:
      break;
  }
  return ErrnoStatus(report.err, what);
}

int DescriptorBound() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 65536;
  return static_cast<int>(std::min<rlim_t>(limit.rlim_cur, 1 << 20));
}

}  // namespace

StatusOr<std::string> ResolveProgram(const std::string& name, const std::string& path_var) {
  if (name.find('/') != std::string::npos) return name;
  int err = ENOENT;
  for (size_t start = 0; start <= path_var.size();) {
    size_t end = std::min(path_var.find(':', start), path_var.size());
    std::string dir = path_var.substr(start, end - start);
    start = end + 1;
    // Relative entries would be read against the task's workdir only after chdir(); skip them.
    if (dir.empty() || dir[0] != '/') continue;
    std::string candidate = dir + "/" + name;
    struct stat st;
    if (stat(candidate.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    err = EACCES;  // as execvp(): remember it, but a later directory may still have the program
  }
  Status status = ErrnoStatus(err, "cannot run '" + name + "'");
  if (err != ENOENT) return status;
  return Status(status.code(), status.message() + " (not found in PATH " + path_var + ")");
}

StatusOr<SpawnedProcess> SpawnProcess(const SpawnRequest& request) {
  if (request.argv.empty() || request.argv[0].empty()) {
    return Status::InvalidArgument("a task needs a program to run, but its argv is empty");
  }
  HANGAR_ASSIGN_OR_RETURN(std::string program,
                          ResolveProgram(request.argv[0], PathOf(request.env)));
  HANGAR_RETURN_IF_ERROR(MakeWorkdir(request));
  HANGAR_ASSIGN_OR_RETURN(StdStreams streams, OpenStreams(request));

  SpawnedProcess spawned;
  UniqueFd cgroup_procs;
  if (!request.cgroup_dir.empty()) {
    std::string procs = request.cgroup_dir + "/cgroup.procs";
    auto fd = AboveStdio(open(procs.c_str(), O_WRONLY | O_CLOEXEC), "cannot open " + procs);
    if (fd.ok())
      cgroup_procs = std::move(*fd);
    else
      spawned.cgroup = fd.status();
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, "cannot create a pipe");
  UniqueFd report_read(pipe_fds[0]);
  HANGAR_ASSIGN_OR_RETURN(UniqueFd report_write, AboveStdio(pipe_fds[1], "cannot create a pipe"));

  std::vector<char*> argv = CStrings(request.argv);
  std::vector<char*> envp = CStrings(request.env);
  const std::vector<gid_t> groups =
      request.credentials ? request.credentials->groups : std::vector<gid_t>();
  ChildPlan plan{program.c_str(),
                 argv.data(),
                 envp.data(),
                 request.workdir.empty() ? nullptr : request.workdir.c_str(),
                 streams.in.get(),
                 streams.out.get(),
                 streams.err.get(),
                 cgroup_procs.get(),
                 report_write.get(),
                 DescriptorBound(),
                 request.controlling_terminal,
                 request.credentials.has_value(),
                 request.credentials ? request.credentials->uid : 0,
                 request.credentials ? request.credentials->gid : 0,
                 groups.data(),
                 groups.size()};
  spawned.pid = ForkChild(plan);
  if (spawned.pid < 0) return ErrnoStatus(errno, "cannot start '" + request.argv[0] + "'");
  report_write.Reset(-1);  // so that read() sees end of file once the child has exec'd

  ChildOutcome outcome = ReadReports(report_read.get());
  if (outcome.failed) {
    while (waitpid(spawned.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return FailureStatus(outcome.failure, request);
  }
  if (outcome.cgroup_errno != 0) {
    spawned.cgroup = ErrnoStatus(outcome.cgroup_errno, "cannot join " + request.cgroup_dir);
  }
  return spawned;
}

}  // namespace hangar::agent
