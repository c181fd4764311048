#include "agent/fence/fence_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace hangar::agent::fence {
namespace fs = std::filesystem;

int64_t LeaseClockMs() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

FenceDir::FenceDir(const std::string& state_dir)
    : state_dir_(state_dir), root_(state_dir + "/fence") {}

Status FenceDir::Create() const {
  std::error_code ec;
  for (const char* sub : {"tasks", "fenced", "exits"}) {
    fs::create_directories(root_ + "/" + sub, ec);
    if (ec)
      return Status::Unavailable("cannot create the node fence's folder " + root_ + "/" + sub +
                                 ": " + ec.message());
  }
  return Status::Ok();
}

Status FenceDir::Replace(const std::string& path, const std::string& text) const {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Unavailable("cannot write " + tmp + ": " + std::strerror(errno));
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    const int why = ok ? errno : err;
    unlink(tmp.c_str());
    return Status::Unavailable("cannot write " + path + ": " + std::strerror(why));
  }
  return Status::Ok();
}

Status FenceDir::WriteLease(const Lease& lease) const {
  if (!lease.armed()) return Replace(Path("lease"), "none\n");
  return Replace(Path("lease"), std::to_string(lease.deadline_ms) + " " +
                                    std::to_string(lease.term_grace_ms) + "\n");
}

std::optional<Lease> FenceDir::ReadLease() const {
  std::ifstream in(Path("lease"));
  std::string first;
  if (!(in >> first)) return std::nullopt;
  if (first == "none") return Lease{};
  Lease l;
  std::istringstream deadline(first);
  if (!(deadline >> l.deadline_ms) || !(in >> l.term_grace_ms) || l.term_grace_ms < 0)
    return std::nullopt;
  return l;
}

// "<pid> <start ticks>\n<cgroup>\n" and then the cleanup command's arguments, each ended by a NUL.
Status FenceDir::GuardTask(const GuardedTask& t) const {
  std::string text =
      std::to_string(t.pid) + " " + std::to_string(t.start_ticks) + "\n" + t.cgroup_dir + "\n";
  for (const std::string& arg : t.cleanup) text += arg + std::string(1, '\0');
  return Replace(Path("tasks/" + t.task_id), text);
}

std::optional<GuardedTask> FenceDir::Guarded(const std::string& task_id) const {
  for (GuardedTask& t : GuardedTasks()) {
    if (t.task_id == task_id) return std::move(t);
  }
  return std::nullopt;
}

void FenceDir::ReleaseTask(const std::string& task_id) const {
  unlink(Path("tasks/" + task_id).c_str());
}

std::vector<GuardedTask> FenceDir::GuardedTasks() const {
  std::vector<GuardedTask> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(Path("tasks"), ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp") != std::string::npos) continue;  // a write in progress
    std::ifstream in(e.path());
    GuardedTask t;
    t.task_id = name;
    t.agent_state_dir = state_dir_;
    if (!(in >> t.pid >> t.start_ticks)) continue;
    in.ignore(1);
    std::getline(in, t.cgroup_dir);
    for (std::string arg; std::getline(in, arg, '\0');) t.cleanup.push_back(arg);
    out.push_back(std::move(t));
  }
  return out;
}

Status FenceDir::MarkFenced(const std::string& task_id, const std::string& why) const {
  return Replace(Path("fenced/" + task_id), why + "\n");
}

std::optional<std::string> FenceDir::FencedBecause(const std::string& task_id) const {
  std::ifstream in(Path("fenced/" + task_id));
  std::string why;
  if (!in || !std::getline(in, why)) return std::nullopt;
  return why;
}

void FenceDir::ForgetFenced(const std::string& task_id) const {
  unlink(Path("fenced/" + task_id).c_str());
}

Status FenceDir::KeepExit(const std::string& task_id, pid_t pid, int status) const {
  return Replace(Path("exits/" + task_id),
                 std::to_string(pid) + " " + std::to_string(status) + "\n");
}

std::optional<int> FenceDir::KeptExit(const std::string& task_id, pid_t pid) const {
  std::ifstream in(Path("exits/" + task_id));
  long long kept_pid = 0;
  int status = 0;
  if (!(in >> kept_pid >> status) || kept_pid != pid) return std::nullopt;
  return status;
}

void FenceDir::ForgetKeptExit(const std::string& task_id) const {
  unlink(Path("exits/" + task_id).c_str());
}

void FenceDir::AppendLog(const std::string& json_line) const {
  int fd = open(Path("fenced.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string line = json_line + "\n";
  ssize_t n = write(fd, line.data(), line.size());
  (void)n;
  close(fd);
}

std::optional<HeldLock> HeldLock::TryTake(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return std::nullopt;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return std::nullopt;
  }
  return HeldLock(fd);
}

HeldLock::HeldLock(HeldLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

HeldLock& HeldLock::operator=(HeldLock&& other) noexcept {
  if (fd_ >= 0) close(fd_);
  fd_ = std::exchange(other.fd_, -1);
  return *this;
}

HeldLock::~HeldLock() {
  if (fd_ >= 0) close(fd_);
}

bool LockHeld(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);  // releases it if this took it
  return held;
}

}  // namespace hangar::agent::fence
