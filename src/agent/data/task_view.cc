#include "agent/data/task_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace hangar::agent::data {
namespace fs = std::filesystem;
namespace {

bool SafeName(const std::string& id) {
  return !id.empty() && id != "." && id != ".." && id.find('/') == std::string::npos &&
         id.find('\0') == std::string::npos;
}

// Removes everything under the open folder `dir` (then closes it), by descriptor: a folder is
// entered only with O_NOFOLLOW, so a folder swapped for a link meanwhile is removed as a link,
// never followed.
void RemoveContents(int dir) {
  DIR* d = ::fdopendir(dir);
  if (d == nullptr) {
    ::close(dir);
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.emplace_back(e->d_name);
  }
  for (const auto& n : names) {
    if (::unlinkat(dir, n.c_str(), 0) == 0) continue;
    const int sub = ::openat(dir, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) continue;
    RemoveContents(sub);
    ::unlinkat(dir, n.c_str(), AT_REMOVEDIR);
  }
  ::closedir(d);  // closes `dir`
}

bool SafeRelative(const std::string& rel) {
  if (rel.empty() || rel.front() == '/') return false;
  for (const auto& part : fs::path(rel)) {
    if (part == ".." || part == ".") return false;
  }
  return true;
}

}  // namespace

StatusOr<std::string> MakeTaskView(const std::string& views_dir, const std::string& task_id,
                                   const std::vector<ViewEntry>& entries,
                                   std::optional<std::pair<uid_t, gid_t>> owner) {
  if (!SafeName(task_id))
    return Status::InvalidArgument("task id '" + task_id + "' cannot name a folder");
  RemoveTaskView(views_dir, task_id);
  const std::string top = views_dir + "/" + task_id;
  if (::mkdir(top.c_str(), 0700) != 0)
    return Status::Internal("cannot create " + top + ": " + std::strerror(errno));
  for (const auto& e : entries) {
    if (!SafeRelative(e.path))
      return Status::InvalidArgument("artifact path '" + e.path +
                                     "' cannot appear in a task's view");
    const fs::path link = fs::path(top) / e.path;
    std::error_code ec;
    fs::create_directories(link.parent_path(), ec);
    fs::remove(link, ec);
    if (::link(e.object.c_str(), link.c_str()) != 0) {
      return Status::FailedPrecondition("cannot show " + e.object + " to the task at " +
                                        link.string() + ": " + std::strerror(errno));
    }
  }
  // Complete: now the user's, to enter and read, and no one else's.
  if (owner && ::lchown(top.c_str(), owner->first, owner->second) != 0) {
    return Status::Internal("cannot give " + top + " to uid " + std::to_string(owner->first) +
                            ": " + std::strerror(errno));
  }
  if (::chmod(top.c_str(), 0500) != 0)
    return Status::Internal("cannot restrict " + top + ": " + std::strerror(errno));
  return top;
}

void RemoveTaskView(const std::string& views_dir, const std::string& task_id) {
  if (!SafeName(task_id)) return;
  const std::string top = views_dir + "/" + task_id;
  struct stat st {};
  if (::lstat(top.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  // Back to the agent, closed, before anything inside is touched: the user can no longer enter
  // it, so cannot swap a folder for a link while the removal walks it.
  if (::lchown(top.c_str(), ::geteuid(), ::getegid()) != 0 || ::chmod(top.c_str(), 0700) != 0)
    return;
  const int fd = ::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  RemoveContents(fd);
  ::rmdir(top.c_str());
}

std::vector<std::string> TaskViews(const std::string& views_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(views_dir, ec))
    out.push_back(e.path().filename().string());
  return out;
}

}  // namespace hangar::agent::data
