// Starting a task's process: fork, then in the child only async-signal-safe calls (the agent is
// multi-threaded) -- default signal dispositions, an empty signal mask, a new session, the task's
// cgroup, stdin from /dev/null, stdout and stderr to files, the task's user (supplementary
// groups, gid, uid), the working directory -- and execve.
// Failures up to and including execve are reported back through a close-on-exec pipe, so the
// caller learns synchronously whether the program is running.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "agent/runner/task_credentials.h"
#include "common/status.h"

namespace hangar::agent {

// The PATH a task gets when the agent itself has none (execvp()'s default).
inline constexpr char kDefaultTaskPath[] = "/usr/local/bin:/usr/bin:/bin";

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH given in `env` unless it
                                  // holds a '/' (then it is taken relative to `workdir`)
  std::vector<std::string> env;   // the complete environment, "NAME=value"
  std::string workdir;            // created if missing (then owned by the task's user, mode
                                  // 0700); empty: the agent's working directory
  std::string stdout_path;        // parent directories created, file truncated, mode 0600 and
                                  // owned by the task's user; empty: /dev/null
  std::string stderr_path;        // as stdout_path; the same path as stdout_path shares one file
  std::string cgroup_dir;         // cgroup v2 directory to join before exec; empty: none
  // Who the process runs as; nullopt: the agent's own user. Switching needs root.
  std::optional<TaskCredentials> credentials;
  // Set (>= 0, all three): the process's standard streams instead of /dev/null and the output
  // files (an interactive session's pipes or terminal); the caller keeps its own descriptors.
  // stdin_fd alone: the standard input, with /dev/null's place taken (an interactive task's pipe).
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
  // stdin_fd is a terminal's follower, made the process's controlling terminal after setsid().
  bool controlling_terminal = false;
};

struct SpawnedProcess {
  pid_t pid = -1;  // leader of a new session and process group (pgid == sid == pid)
  Status cgroup;   // OK, or why the process could not join cgroup_dir (it runs anyway)
};

// Starts the process. Fails, with nothing left running, when a file or directory cannot be
// prepared or the program cannot be executed: "cannot run 'python5': No such file or directory".
StatusOr<SpawnedProcess> SpawnProcess(const SpawnRequest& request);

// The program execve() will run for `name`, searched in the absolute directories of `path_var`
// (a PATH value) as execvp() would. Names holding a '/' are returned as they are.
StatusOr<std::string> ResolveProgram(const std::string& name, const std::string& path_var);

}  // namespace hangar::agent
