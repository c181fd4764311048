#include "controller/store/store_disk.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace hangar::controller {
namespace {

constexpr const char* kDiskFull = "the store's disk is full";

}  // namespace

MountOf FindMount(const std::string& path) {
  struct stat st {};
  std::string probe = path;
  // A file not made yet: its folder tells the device.
  while (::stat(probe.c_str(), &st) != 0) {
    const std::string parent = std::filesystem::path(probe).parent_path().string();
    if (parent.empty() || parent == probe) return {};
    probe = parent;
  }
  const std::string want =
      std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  // "36 35 98:0 /root /var/lib rw,noatime shared:1 - ext4 /dev/sda1 rw": the fourth field is the
  // device, the fifth the mount point; after " - " come the type and the source.
  std::ifstream info("/proc/self/mountinfo");
  std::string line;
  MountOf found;
  while (std::getline(info, line)) {
    std::istringstream in(line);
    std::string id, parent, dev, root, mount_point;
    if (!(in >> id >> parent >> dev >> root >> mount_point) || dev != want) continue;
    const auto dash = line.find(" - ");
    std::string type, source;
    if (dash != std::string::npos) std::istringstream(line.substr(dash + 3)) >> type >> source;
    found = {source.empty() ? dev : source,
             mount_point};  // the last mount of a device is the visible one
  }
  return found;
}

Status StoreDiskFull(const std::string& path) {
  const MountOf m = FindMount(path);
  std::string where = m.device.empty()
                          ? "the disk holding " + path
                          : m.device + " (mounted at " + m.mount_point + ", holding " + path + ")";
  return Status::ResourceExhausted(std::string(kDiskFull) + ": free space on " + where +
                                   "; nothing was accepted");
}

Status AwaitRoomToCommit(StateStore& store, Time now, const std::atomic<bool>& stop, Duration every,
                         const std::function<void(const Status&)>& log) {
  StoreBatch b;
  b.values.push_back({"meta", "started_ms", std::to_string(now), false});
  while (!stop) {
    Status s = store.Commit(b);
    if (!IsStoreDiskFull(s)) return s;
    log(s);
    for (Duration waited = 0; waited < every && !stop; waited += 100) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return Status::Ok();
}

bool IsStoreDiskFull(const Status& s) {
  return s.code() == StatusCode::kResourceExhausted && s.message().rfind(kDiskFull, 0) == 0;
}

}  // namespace hangar::controller
