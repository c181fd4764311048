#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>

extern char** environ;

namespace hangar {
namespace {

std::vector<std::string> MergedEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

struct Pipes {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  ~Pipes() {
    for (int* p : {in, out, err}) {
      for (int i = 0; i < 2; ++i) {
        if (p[i] >= 0) close(p[i]);
      }
    }
  }
  bool Open() {
    return pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0;
  }
  static void Close(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

// Feeds stdin and drains stdout/stderr until both close or the deadline passes.
bool Pump(Pipes& p, const CommandOptions& o, CommandResult* r) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.timeout);
  size_t written = 0;
  if (o.stdin_data.empty()) Pipes::Close(p.in[1]);
  while (p.out[0] >= 0 || p.err[0] >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd fds[3] = {{p.out[0], POLLIN, 0}, {p.err[0], POLLIN, 0}, {p.in[1], POLLOUT, 0}};
    if (poll(fds, 3, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
    char buf[65536];
    std::string* sinks[2] = {&r->out, &r->err};
    int* fdp[2] = {&p.out[0], &p.err[0]};
    for (int i = 0; i < 2; ++i) {
      if (*fdp[i] < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(*fdp[i], buf, sizeof buf);
      if (n > 0) {
        if (sinks[i]->size() < o.max_output)
          sinks[i]->append(buf, std::min<size_t>(n, o.max_output - sinks[i]->size()));
      } else if (n == 0 || errno != EINTR) {
        Pipes::Close(*fdp[i]);
      }
    }
    if (p.in[1] >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n =
          write(p.in[1], o.stdin_data.data() + written, o.stdin_data.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 || written == o.stdin_data.size()) Pipes::Close(p.in[1]);
    }
  }
  return true;
}

}  // namespace

std::string CommandResult::Describe() const {
  std::string last = err.empty() ? out : err;
  while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
  const size_t nl = last.rfind('\n');
  if (nl != std::string::npos) last = last.substr(nl + 1);
  std::string how = timed_out ? "timed out"
                    : signal  ? "killed by signal " + std::to_string(signal)
                              : "exit " + std::to_string(exit_code);
  return last.empty() ? how : how + ": " + last;
}

StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                   const CommandOptions& options) {
  if (argv.empty()) return Status::InvalidArgument("no program to run");
  Pipes p;
  if (!p.Open()) return Status::Internal(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p.in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, p.out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, p.err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env = MergedEnvironment(options.env);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0].c_str(), &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::NotFound("cannot run '" + argv[0] + "': " + std::strerror(rc));
  Pipes::Close(p.in[0]);
  Pipes::Close(p.out[1]);
  Pipes::Close(p.err[1]);
  CommandResult r;
  if (!Pump(p, options, &r)) {
    r.timed_out = true;
    kill(-pid, SIGKILL);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

}  // namespace hangar
