// A child process a benchmark started (a controller, a swarm): stopped with SIGTERM, then
// SIGKILL after 5 s, and reaped.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

struct Proc {
  pid_t pid = 0;
  void Stop() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100 && waitpid(pid, nullptr, WNOHANG) == 0; ++i) usleep(50000);
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = 0;
  }
};

// Starts `binary` with `args` (argv[0] first), its stdout and stderr into `log`.
inline Proc Spawn(const std::string& binary, const std::vector<std::string>& args,
                  const std::string& log) {
  Proc p;
  p.pid = fork();
  if (p.pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return p;
}
