// The agent's task table: what it remembers of each task (TaskRecord), kept on disk in its
// journal (task_journal.h) across the agent's restarts; the exits the reaper saw before a launch
// had recorded its task; and, by job, the checkpoint drains asked for and not over. One lock,
// mu(), guards all of it: a flow takes it (MutexLock l(tasks.mu())) and calls what it needs
// under it, so that what it reads and what it changes are one step for the other threads.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/runner/task_runner.h"
#include "agent/task_journal.h"
#include "common/mutex.h"
#include "common/time.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

namespace pb = ::hangar::agent::v1;

// What the agent remembers of a task, across its own restarts.
struct TaskRecord {
  std::string task_id;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  uint32_t index = 0;
  int pid = 0;
  bool ended = false;
  int exit_code = 0;
  int signal = 0;
  bool stopped = false;
  bool agent_exiting = false;  // stopped because the agent exited (--stop-tasks-on-exit)
  bool failed_to_start = false;
  std::string message;
  std::vector<uint32_t> gpus;
  Time ended_at = 0;
  int64_t uid = -1;       // who it runs as; -1: the agent's own user (records of older agents)
  std::string container;  // the podman container it runs in; empty: a process
  std::string image;
  std::vector<std::string> artifacts;  // digests of the cached objects it sees
  // With a scratch dir: the job's node-local checkpoint folder and its shared store (else empty),
  // the task's group, and whether a drain of one of its reports has not finished (again after a
  // restart of the agent) with what it reported.
  std::string checkpoint_local, checkpoint_store;
  int64_t gid = -1;
  bool drain_pending = false;
  std::string drain_path;
  uint64_t drain_step = 0;
  bool status_held = false;  // its end waits for the job's drains (not kept across restarts)
  // A fractional task under MPS: its control daemon (MpsDaemon::key) and memory limit; else empty.
  std::string mps;
  int64_t mps_memory_mib = 0;
  // The MIG instances it runs in: GPU index, start and memory slices of each; and their MIG
  // devices' UUIDs, for the launch (not kept across restarts).
  std::vector<std::array<uint32_t, 3>> mig;
  std::vector<std::string> mig_devices;
  // How its gang preflight went, when its launch asked for one (not kept across restarts).
  std::optional<pb::PreflightReport> preflight;
  // A step beside it ran in a container (srun --container-image): removed, with its mounts' pins,
  // when the task ends (not kept across restarts: the agent's start sweeps them).
  bool step_containers = false;
};

// The records `journal` holds, by task id (the latest line of a task wins; lines without a task id
// are left out). Init reads them before the table has them.
std::map<std::string, TaskRecord> LoadTaskRecords(TaskJournal& journal);

class TaskTable {
 public:
  // `clock` outlives the table: it dates which ended records are old enough to forget.
  explicit TaskTable(Clock* clock) : clock_(clock) {}
  TaskTable(const TaskTable&) = delete;
  TaskTable& operator=(const TaskTable&) = delete;

  // The lock of everything below.
  Mutex& mu() HANGAR_RETURN_CAPABILITY(mu_) { return mu_; }

  // Init: the table holds `records` and keeps them in `journal` from now on, starting with a
  // snapshot. Until then nothing is written (a table without a journal keeps records in memory).
  void Open(std::unique_ptr<TaskJournal> journal, std::map<std::string, TaskRecord> records)
      HANGAR_REQUIRES(mu_);
  // Every record, by task id: a flow that changes one saves it (Save) or all of them (SaveAll).
  std::map<std::string, TaskRecord>& records() HANGAR_REQUIRES(mu_) { return records_; }
  // The record of `task_id`; null when the table has none.
  TaskRecord* Find(const std::string& task_id) HANGAR_REQUIRES(mu_);
  // Records `r` in place of any record of its task, and saves it.
  void Put(const TaskRecord& r) HANGAR_REQUIRES(mu_);
  // One changed record, to the journal.
  void Save(const std::string& task_id) HANGAR_REQUIRES(mu_);
  // Every record as a new snapshot (ended ones over an hour old dropped).
  void SaveAll() HANGAR_REQUIRES(mu_);
  // --forget-store: no record and no early exit any more, and a snapshot that says so. The drains
  // in progress still count.
  void Clear() HANGAR_REQUIRES(mu_);

  // An exit the reaper saw before the launch had recorded its task (a `true` can end before
  // Launch() has returned): kept until the launch takes it, once its record is in.
  void KeepEarlyExit(const TaskExit& e) HANGAR_REQUIRES(mu_);
  std::optional<TaskExit> TakeEarlyExit(const std::string& task_id) HANGAR_REQUIRES(mu_);

  // Checkpoint drains of a job (agent_checkpoints.cc): one more asked for; one over, returning
  // whether it was the job's last (then the job has none); whether any is asked for and not over.
  void AddDrain(uint64_t job_id) HANGAR_REQUIRES(mu_);
  bool EndDrain(uint64_t job_id) HANGAR_REQUIRES(mu_);
  bool Draining(uint64_t job_id) const HANGAR_REQUIRES(mu_);

 private:
  Clock* const clock_;
  Mutex mu_;
  std::map<std::string, TaskRecord> records_ HANGAR_GUARDED_BY(mu_);
  std::unique_ptr<TaskJournal> journal_ HANGAR_GUARDED_BY(mu_);         // records_ on disk (Open's)
  std::map<std::string, TaskExit> early_exits_ HANGAR_GUARDED_BY(mu_);  // by task, until launched
  std::map<uint64_t, int> drains_ HANGAR_GUARDED_BY(mu_);  // by job: drains asked for and not over
};

}  // namespace hangar::agent
