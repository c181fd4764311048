#include "agent/task_table.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

namespace hangar::agent {

namespace {

nlohmann::json ToJson(const TaskRecord& r) {
  return {{"task_id", r.task_id},
          {"job_id", r.job_id},
          {"attempt", r.attempt},
          {"index", r.index},
          {"pid", r.pid},
          {"ended", r.ended},
          {"exit_code", r.exit_code},
          {"signal", r.signal},
          {"stopped", r.stopped},
          {"agent_exiting", r.agent_exiting},
          {"failed_to_start", r.failed_to_start},
          {"message", r.message},
          {"gpus", r.gpus},
          {"ended_at", r.ended_at},
          {"uid", r.uid},
          {"container", r.container},
          {"image", r.image},
          {"checkpoint_local", r.checkpoint_local},
          {"checkpoint_store", r.checkpoint_store},
          {"gid", r.gid},
          {"drain_pending", r.drain_pending},
          {"drain_path", r.drain_path},
          {"drain_step", r.drain_step},
          {"artifacts", r.artifacts},
          {"mps", r.mps},
          {"mps_memory_mib", r.mps_memory_mib},
          {"mig", r.mig}};
}

TaskRecord FromJson(const nlohmann::json& j) {
  TaskRecord r;
  r.task_id = j.value("task_id", "");
  r.job_id = j.value("job_id", uint64_t{0});
  r.attempt = j.value("attempt", 0u);
  r.index = j.value("index", 0u);
  r.pid = j.value("pid", 0);
  r.ended = j.value("ended", false);
  r.exit_code = j.value("exit_code", 0);
  r.signal = j.value("signal", 0);
  r.stopped = j.value("stopped", false);
  r.agent_exiting = j.value("agent_exiting", false);
  r.failed_to_start = j.value("failed_to_start", false);
  r.message = j.value("message", "");
  r.gpus = j.value("gpus", std::vector<uint32_t>{});
  r.ended_at = j.value("ended_at", int64_t{0});
  r.uid = j.value("uid", int64_t{-1});
  r.container = j.value("container", "");
  r.image = j.value("image", "");
  r.artifacts = j.value("artifacts", std::vector<std::string>{});
  r.checkpoint_local = j.value("checkpoint_local", "");
  r.checkpoint_store = j.value("checkpoint_store", "");
  r.gid = j.value("gid", int64_t{-1});
  r.drain_pending = j.value("drain_pending", false);
  r.drain_path = j.value("drain_path", "");
  r.drain_step = j.value("drain_step", uint64_t{0});
  r.mps = j.value("mps", "");
  r.mps_memory_mib = j.value("mps_memory_mib", int64_t{0});
  r.mig = j.value("mig", std::vector<std::array<uint32_t, 3>>{});
  return r;
}

}  // namespace

std::map<std::string, TaskRecord> LoadTaskRecords(TaskJournal& journal) {
  std::map<std::string, TaskRecord> loaded;
  for (const auto& e : journal.Load()) {
    TaskRecord r = FromJson(e);
    if (!r.task_id.empty()) loaded[r.task_id] = std::move(r);  // the latest line of a task wins
  }
  return loaded;
}

void TaskTable::Open(std::unique_ptr<TaskJournal> journal,
                     std::map<std::string, TaskRecord> records) {
  journal_ = std::move(journal);
  records_ = std::move(records);
  SaveAll();
}

TaskRecord* TaskTable::Find(const std::string& task_id) {
  auto it = records_.find(task_id);
  return it == records_.end() ? nullptr : &it->second;
}

void TaskTable::Put(const TaskRecord& r) {
  records_[r.task_id] = r;
  Save(r.task_id);
}

void TaskTable::SaveAll() {
  // Forget ended tasks after an hour: the controller has heard of them many times by then.
  const Time now = clock_->Now();
  std::vector<nlohmann::json> all;
  all.reserve(records_.size());
  for (auto it = records_.begin(); it != records_.end();) {
    if (it->second.ended && now - it->second.ended_at > kHour) {
      it = records_.erase(it);
    } else {
      all.push_back(ToJson(it->second));
      ++it;
    }
  }
  if (journal_) journal_->Compact(all);
}

void TaskTable::Save(const std::string& task_id) {
  auto it = records_.find(task_id);
  if (!journal_ || it == records_.end()) return;
  journal_->Append(ToJson(it->second));
  // Folded into a snapshot once the journal is longer than the records: each line is written
  // about twice in all, however many records the agent keeps.
  if (journal_->appended() > std::max<size_t>(1024, 2 * records_.size())) SaveAll();
}

void TaskTable::Clear() {
  records_.clear();
  early_exits_.clear();
  SaveAll();
}

void TaskTable::KeepEarlyExit(const TaskExit& e) { early_exits_[e.task_id] = e; }

std::optional<TaskExit> TaskTable::TakeEarlyExit(const std::string& task_id) {
  auto e = early_exits_.find(task_id);
  if (e == early_exits_.end()) return std::nullopt;
  std::optional<TaskExit> early = e->second;
  early_exits_.erase(e);
  return early;
}

void TaskTable::AddDrain(uint64_t job_id) { drains_[job_id]++; }

bool TaskTable::EndDrain(uint64_t job_id) {
  auto d = drains_.find(job_id);
  if (d != drains_.end() && --d->second > 0) return false;  // another drain of the job is asked for
  drains_.erase(job_id);
  return true;
}

bool TaskTable::Draining(uint64_t job_id) const {
  auto d = drains_.find(job_id);
  return d != drains_.end() && d->second > 0;
}

}  // namespace hangar::agent
