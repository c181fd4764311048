// The exit statuses of processes that are not the agent's children: tasks an earlier agent
// started and this one adopted after a restart (or an upgrade). waitpid() cannot report them, so
// without this an adopted task's end was reported as status unknown (-1), which the controller
// counts as a failure: a job that succeeded failed, and a gang's other tasks were stopped.
//
// The kernel's taskstats interface (generic netlink family "TASKSTATS") sends, to every listener
// registered for a set of CPUs, the pid and exit status of each task that exits on them. The
// watcher registers for all CPUs, keeps the statuses of the pids it was asked to watch, and hands
// each out once. It needs CAP_NET_ADMIN (the agent runs as root on a node); where the kernel or
// the privilege is missing, Start fails and adopted tasks' exits stay unknown, as before. A task
// that ended while no agent ran has no status to find.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::agent {

class ExitWatcher {
 public:
  static StatusOr<std::unique_ptr<ExitWatcher>> Start();
  ~ExitWatcher();  // stops listening

  // Keeps `pid`'s exit status when it comes (a task's leader: its pid is its thread group's).
  void Watch(pid_t pid) HANGAR_EXCLUDES(mu_);
  // `pid`'s status, as waitpid() gives it (WIFEXITED, WEXITSTATUS, WTERMSIG apply), once it has
  // exited, waiting up to `timeout` for the kernel's report; then it is forgotten. nullopt: no
  // report came (it exited before it was watched, or the report was lost).
  std::optional<int> TakeStatus(pid_t pid, Duration timeout) HANGAR_EXCLUDES(mu_);

 private:
  explicit ExitWatcher(int fd) : fd_(fd) {}
  void Listen();
  void Handle(const char* data, size_t len) HANGAR_EXCLUDES(mu_);

  const int fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Mutex mu_;
  std::condition_variable exited_cv_;
  std::set<pid_t> watched_ HANGAR_GUARDED_BY(mu_);
  std::map<pid_t, int> exited_ HANGAR_GUARDED_BY(mu_);
};

}  // namespace hangar::agent
