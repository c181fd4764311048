#include "agent/runner/task_cgroups.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "agent/runner/os_error.h"

namespace hangar::agent {
namespace {

constexpr char kCgroupRoot[] = "/sys/fs/cgroup";
constexpr const char* kControllers[] = {"cpu", "memory"};
constexpr int64_t kCpuPeriodMicros = 100000;  // 100 ms
constexpr int64_t kMinCpuQuotaMicros = 1000;  // the kernel refuses smaller quotas
constexpr int64_t kBytesPerMiB = int64_t{1024} * 1024;

Status CheckCgroup2Dir(const std::string& dir) {
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0) return ErrnoStatus(errno, "cannot inspect " + dir);
  if (fs.f_type != CGROUP2_SUPER_MAGIC) {
    std::string what = dir + " is not on a cgroup v2 file system";
    if (fs.f_type == TMPFS_MAGIC) what += " (it is a tmpfs: the host uses cgroup v1 or a hybrid)";
    if (fs.f_type == CGROUP_SUPER_MAGIC) what += " (it is cgroup v1)";
    return Status::FailedPrecondition(what);
  }
  if (access(dir.c_str(), W_OK) != 0) {
    if (errno == EROFS) return Status::FailedPrecondition(dir + " is read-only");
    return ErrnoStatus(errno, "cannot write to " + dir);
  }
  return Status::Ok();
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The words of a cgroup interface file such as cgroup.controllers ("cpu io memory pids").
std::vector<std::string> ReadWords(const std::string& path) {
  std::vector<std::string> words;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return words;
  std::string text;
  char buf[512];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(fd);
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

bool HasWord(const std::string& path, const std::string& word) {
  std::vector<std::string> words = ReadWords(path);
  return std::find(words.begin(), words.end(), word) != words.end();
}

// Returns 0 or the errno of the failed open() or write(). Cgroup files take one write each.
int WriteWhole(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n = write(fd, text.data(), text.size());
  int err = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : EIO);
  close(fd);
  return err;
}

// Makes `controller` available to the children of `dir`. Returns "" or why it is not.
std::string EnableController(const std::string& dir, const std::string& controller) {
  std::string subtree = dir + "/cgroup.subtree_control";
  if (HasWord(subtree, controller)) return "";
  if (!HasWord(dir + "/cgroup.controllers", controller)) {
    return "the " + controller + " controller is not available in " + dir;
  }
  int err = WriteWhole(subtree, "+" + controller);
  if (err == 0) return "";
  std::string why = "cannot enable " + controller + " in " + subtree + ": " + ErrnoText(err);
  if (err == EBUSY) why += " (that cgroup has processes of its own)";
  return why;
}

std::string LimitsNote(const std::map<std::string, std::string>& missing) {
  if (missing.empty()) return "cpu and memory limits";
  std::string note;
  if (missing.size() == 2) {
    note = "no cpu or memory limits: ";
  } else {
    note = missing.count("cpu") ? "memory limits only: " : "cpu limits only: ";
  }
  bool first = true;
  for (const auto& [controller, why] : missing) {
    note += (first ? "" : "; ") + why;
    first = false;
  }
  return note;
}

}  // namespace

AgentCgroup SetUpAgentCgroup(const std::string& requested_parent) {
  AgentCgroup out;
  std::string parent = requested_parent;
  if (parent.empty()) parent = std::string(kCgroupRoot) + "/hangar-" + std::to_string(getpid());
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  if (parent.front() != '/') {
    out.note = "the cgroup parent '" + parent + "' is not an absolute path";
    return out;
  }
  std::string base = std::filesystem::path(parent).parent_path().string();
  if (Status usable = CheckCgroup2Dir(base); !usable.ok()) {
    out.note = usable.message();
    return out;
  }
  // A controller reaches the parent only when the parent's own parent hands it down.
  std::map<std::string, std::string> missing;  // controller -> why it is not available
  for (const char* controller : kControllers) {
    std::string why = EnableController(base, controller);
    if (!why.empty()) missing[controller] = why;
  }
  if (mkdir(parent.c_str(), 0755) == 0) {
    out.created_parent = true;
  } else if (int err = errno; err != EEXIST || !IsDirectory(parent)) {
    out.note = "cannot create " + parent + ": " + ErrnoText(err == EEXIST ? ENOTDIR : err);
    return out;
  }
  for (const char* controller : kControllers) {
    if (missing.count(controller)) continue;
    std::string why = EnableController(parent, controller);
    if (!why.empty()) missing[controller] = why;
  }
  out.parent = parent;
  out.note = LimitsNote(missing);
  return out;
}

StatusOr<std::string> CreateTaskCgroup(const std::string& parent, const std::string& task_id,
                                       int64_t milli_cpu, int64_t memory_mib) {
  std::string dir = parent + "/task-" + task_id;
  // A directory left by an earlier task of the same id may hold stale limits: start afresh.
  if (!RemoveCgroup(dir)) return ErrnoStatus(errno, "cannot remove the stale cgroup " + dir);
  if (mkdir(dir.c_str(), 0755) != 0) return ErrnoStatus(errno, "cannot create cgroup " + dir);
  std::vector<std::pair<std::string, std::string>> limits;  // (controller, value)
  if (milli_cpu > 0) limits.emplace_back("cpu", CpuMaxLine(milli_cpu));
  if (memory_mib > 0) limits.emplace_back("memory", std::to_string(memory_mib * kBytesPerMiB));
  for (const auto& [controller, value] : limits) {
    std::string file = dir + "/" + controller + ".max";
    int err = WriteWhole(file, value);
    if (err == 0) continue;
    RemoveCgroup(dir);
    if (err == ENOENT) {
      return Status::FailedPrecondition("cannot set " + controller + ".max: the " + controller +
                                        " controller is not enabled under " + parent);
    }
    return ErrnoStatus(err, "cannot write '" + value + "' to " + file);
  }
  // Best effort: when the kernel kills for memory, it takes the whole task rather than leaving
  // a launcher without its workers.
  if (memory_mib > 0) WriteWhole(dir + "/memory.oom.group", "1");
  return dir;
}

bool RemoveCgroup(const std::string& dir) { return rmdir(dir.c_str()) == 0 || errno == ENOENT; }

std::string CpuMaxLine(int64_t milli_cpu) {
  // 1000 milli-cores is one core: the whole 100 ms period, i.e. 100 us of quota per milli-core.
  int64_t quota = std::max(milli_cpu * (kCpuPeriodMicros / 1000), kMinCpuQuotaMicros);
  return std::to_string(quota) + " " + std::to_string(kCpuPeriodMicros);
}

}  // namespace hangar::agent
