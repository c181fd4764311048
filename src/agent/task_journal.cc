#include "agent/task_journal.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace hangar::agent {
namespace {

// Writes `text` to `path` through a temp file and a rename: a reader sees the old file or the new.
bool WriteWhole(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

TaskJournal::~TaskJournal() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<nlohmann::json> TaskJournal::Load() {
  std::vector<nlohmann::json> out;
  {
    std::ifstream in(dir_ + "/tasks.json");
    auto j = in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
    if (j.is_object()) {
      generation_ = j.value("generation", uint64_t{0});
      if (auto t = j.find("tasks"); t != j.end() && t->is_array()) out.assign(t->begin(), t->end());
    } else if (j.is_array()) {
      out.assign(j.begin(), j.end());
    }
  }
  std::ifstream journal(dir_ + "/tasks.journal");
  std::string line;
  bool header = true;
  size_t skipped = 0;
  while (std::getline(journal, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (header) {
      header = false;
      if (!j.is_object() || j.value("generation", uint64_t{0}) != generation_ ||
          !j.contains("journal_of"))
        break;
      continue;
    }
    if (j.is_object())
      out.push_back(std::move(j));
    else
      ++skipped;  // torn by a crash mid-write
  }
  if (skipped > 0)
    spdlog::warn("agent: skipped {} unreadable line(s) of {}/tasks.journal", skipped, dir_);
  return out;
}

void TaskJournal::OpenJournal() {
  if (fd_ >= 0) ::close(fd_);
  const std::string path = dir_ + "/tasks.journal";
  const std::string header =
      nlohmann::json{{"journal_of", "tasks.json"}, {"generation", generation_}}.dump() + "\n";
  if (!WriteWhole(path, header)) {
    spdlog::error("agent: cannot write {}: {}", path, std::strerror(errno));
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) spdlog::error("agent: cannot open {}: {}", path, std::strerror(errno));
  appended_ = 0;
}

void TaskJournal::Append(const nlohmann::json& record) {
  if (fd_ < 0) OpenJournal();
  const std::string line = record.dump() + "\n";
  // One write of the whole line: O_APPEND keeps lines whole between writers, and a crash tears
  // at most the last one.
  if (fd_ < 0 || ::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    spdlog::error("agent: cannot append to {}/tasks.journal: {}", dir_, std::strerror(errno));
  }
  ++appended_;
}

void TaskJournal::Compact(const std::vector<nlohmann::json>& records) {
  const nlohmann::json snapshot = {{"generation", generation_ + 1}, {"tasks", records}};
  if (!WriteWhole(dir_ + "/tasks.json", snapshot.dump() + "\n")) {
    // The old snapshot and its journal still hold everything: go on appending to them.
    spdlog::error("agent: cannot write {}/tasks.json: {}", dir_, std::strerror(errno));
    if (fd_ < 0) OpenJournal();
    return;
  }
  ++generation_;
  OpenJournal();
}

std::vector<nlohmann::json> LatestTaskRecords(const std::string& dir) {
  std::vector<nlohmann::json> out;
  std::map<std::string, size_t> at;
  for (auto& r : TaskJournal(dir).Load()) {
    const std::string id = r.value("task_id", "");
    if (auto it = at.find(id); it != at.end()) {
      out[it->second] = std::move(r);
    } else {
      at.emplace(id, out.size());
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string ReadStoreId(const std::string& dir) {
  std::ifstream in(dir + "/store_id");
  std::string id;
  std::getline(in, id);
  return id;
}

bool WriteStoreId(const std::string& dir, const std::string& id) {
  if (id.empty()) return std::remove((dir + "/store_id").c_str()) == 0 || errno == ENOENT;
  return WriteWhole(dir + "/store_id", id + "\n");
}

}  // namespace hangar::agent
