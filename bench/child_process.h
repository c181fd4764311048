// A child process a benchmark started (a controller, a swarm): stopped with SIGTERM, then
// SIGKILL after 5 s, and reaped.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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
