// The steps of every allocation: what `sacct` shows as JOB.0, JOB.1, ... Each step is numbered
// from 0 within its job in the order it began, and records its name, nodes, task count, times and
// how it ended (the worst of its tasks). Not thread-safe: its owner (StepRelay) serializes calls.
// In memory, bounded to the steps of the last kMaxJobs jobs that ran any; durable as one
// key-value row per job (table kTable, key the job id: its steps as a JSON array), which its owner
// writes when a step begins and ends and hands back to Restore when a controller starts.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/time.h"

namespace hangar::controller {

struct StepRecord {
  uint64_t job_id = 0;
  uint32_t step_id = 0;
  std::string name;      // the command's base name, as Slurm names a step
  std::string nodelist;  // compressed host list
  int nnodes = 0;
  int ntasks = 0;
  Time start = 0;
  Time end = 0;       // 0: running
  int exit_code = 0;  // the highest of its tasks'
  int signal = 0;     // a signal that ended a task (the last seen), 0: none
  bool cancelled = false;
  int tasks_ended = 0;
  // RUNNING, COMPLETED, FAILED, CANCELLED (Slurm's names).
  std::string State() const;
  nlohmann::json ToJson() const;
  static StepRecord FromJson(const nlohmann::json& j);
};

class StepBook {
 public:
  static constexpr size_t kMaxJobs = 10000;
  static constexpr const char* kTable = "steps";

  // Records a new step of `job` and returns its id.
  uint32_t Begin(uint64_t job, const std::string& name, const std::string& nodelist, int nnodes,
                 int ntasks, Time now);
  // One of the step's tasks ended; true when that was its last (the step ended at `now`).
  bool TaskEnded(uint64_t job, uint32_t step, int exit_code, int signal, Time now);
  // The step was ended from outside (its caller left, its job's script ended): shown CANCELLED.
  void MarkCancelled(uint64_t job, uint32_t step);
  // The job's steps in id order (empty when it ran none).
  std::vector<StepRecord> Steps(uint64_t job) const;
  bool Has(uint64_t job, uint32_t step) const;
  // The job's steps as their durable row's value (a JSON array).
  std::string RowValue(uint64_t job) const;
  // One durable row (table kTable) read back by a controller that starts at `now`: a step that
  // was running when the last controller stopped lost its tasks' sessions with it, and is shown
  // CANCELLED, ended now. Rows that do not parse are skipped.
  void Restore(const std::string& key, const std::string& value, Time now);

 private:
  StepRecord* Find(uint64_t job, uint32_t step);
  std::map<uint64_t, std::vector<StepRecord>> steps_;  // by job; index == step id
  std::deque<uint64_t> order_;                         // jobs in the order of their first step
};

}  // namespace hangar::controller
