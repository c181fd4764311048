// DevCluster: a `hangar dev` of a test's own, for tests that drive Hangar as a user does -- the
// real binary, its CLI and Slurm's commands, from a work folder. Its folder is
// TMP/PREFIX.PID.TEST (work/ is where commands run; kept with HANGAR_KEEP_TEST_DIRS), its port a
// free one (and the next one, for the session port), its cluster file the text given. Stopped
// (SIGINT, which stops its agents and their tasks; SIGKILL after 20 s) when it goes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/time.h"

namespace hangar::testing {

class DevCluster {
 public:
  struct Ran {
    int rc = -1;
    std::string output;  // stdout and stderr together
  };

  DevCluster(const std::string& prefix, const std::string& cluster_yaml);
  ~DevCluster();
  DevCluster(const DevCluster&) = delete;
  DevCluster& operator=(const DevCluster&) = delete;

  // Starts `hangar dev` and waits until it says it is up; false (see log()) when it does not.
  bool Start(const std::vector<std::string>& extra_args = {});
  // Stops `hangar dev` (its controller, agents and their tasks) and starts it again on the same
  // folder, store and port, as an operator restarting it would.
  bool Restart(const std::vector<std::string>& extra_args = {});
  // `hangar ARGS` run in work/ with HANGAR_URL set; `--server` is added except for `slurm ...`
  // (Slurm's commands take the address from HANGAR_URL only).
  Ran Hangar(std::vector<std::string> args) const;
  // A job's state ("" when `hangar job` does not answer).
  std::string JobState(uint64_t id) const;
  bool WaitForState(uint64_t id, const std::string& want, Duration timeout) const;
  // The last line of `output` as a job id (sbatch --parsable; warnings come before it).
  static uint64_t LastLineId(const std::string& output);

  const std::string& dir() const { return dir_; }
  std::string work() const { return dir_ + "/work"; }
  std::string Work(const std::string& file) const;  // a file of work/, "" when absent
  std::string log() const;                          // what `hangar dev` printed
  int port() const { return port_; }
  pid_t pid() const { return pid_; }  // the `hangar dev` process (0 when it is not running)

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = 0;
  void Stop();
};

}  // namespace hangar::testing
