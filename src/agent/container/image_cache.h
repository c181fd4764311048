// The node's image cache: what podman's storage on this node holds, how much disk it
// may use, and which images go first when it is full -- the least recently used, never one that
// a running task uses or that a job placed, reserved or nominated on this node will need (the
// controller names those in every Stage's `keep`). Last-use times survive agent restarts
// (<state dir>/images.json).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/container/podman.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"
#include "proto/agent.pb.h"

namespace hangar::agent {
namespace pb = ::hangar::agent::v1;
}

namespace hangar::agent {

struct CachedImageState {
  LocalImage image;
  Time last_used = 0;
};

// The images to remove, least recently used first, so that what stays fits `budget_bytes`;
// images whose digest is in `keep` stay whatever the budget. Pure.
std::vector<std::string> PlanEviction(const std::vector<CachedImageState>& images,
                                      const std::set<std::string>& keep, int64_t budget_bytes);

// The bytes the cache may hold: its budget (<= 0: none), lowered so that the file system under
// it keeps `min_free_bytes` free (`free_bytes`: what it has free now, with `used_bytes` of images
// on it). -1 when neither limits it; at least 1 when the disk does (then only kept images stay).
// Pure.
int64_t CacheRoom(int64_t budget_bytes, int64_t used_bytes, int64_t free_bytes,
                  int64_t min_free_bytes);

// The digest part of a pinned reference ("repo@sha256:..." -> "sha256:..."); "" if unpinned.
std::string DigestOf(const std::string& ref);

class ImageCache {
 public:
  ImageCache(const Podman* podman, std::string state_file, int64_t budget_bytes);
  // Also keep `min_free_bytes` free on the file system that holds `path` (podman's storage):
  // a disk filled by anything (datasets, logs) evicts images as an exhausted budget does, and
  // shows the node as ImageCacheFull when what must stay does not leave that much free.
  // `free_bytes` reads the free space (tests); by default statvfs(path).
  void SetDiskFloor(std::string path, int64_t min_free_bytes,
                    std::function<int64_t()> free_bytes = {});
  // Reads podman's images and the saved last-use times.
  Status Refresh(Time now) HANGAR_EXCLUDES(mu_);
  bool Holds(const std::string& ref) const HANGAR_EXCLUDES(mu_);
  int64_t BytesOf(const std::string& ref) const HANGAR_EXCLUDES(mu_);
  void Touch(const std::string& ref, Time now) HANGAR_EXCLUDES(mu_);
  // The images the controller says jobs here will need (replaces the previous list).
  void SetWanted(std::set<std::string> refs) HANGAR_EXCLUDES(mu_);
  // Evicts what the budget needs, sparing `in_use` (refs of running tasks) and the wanted ones.
  // Returns what it removed.
  std::vector<std::string> Evict(const std::set<std::string>& in_use, Time now)
      HANGAR_EXCLUDES(mu_);
  pb::ImageInventory Inventory() const HANGAR_EXCLUDES(mu_);

 private:
  void SaveLocked() const HANGAR_REQUIRES(mu_);
  const Podman* podman_;
  std::string state_file_;
  int64_t budget_bytes_;
  // The disk floor (SetDiskFloor); set before use, read-only afterwards.
  std::string disk_path_;
  int64_t min_free_bytes_ = 0;
  std::function<int64_t()> free_bytes_;
  mutable Mutex mu_;
  // The room Evict() last found (CacheRoom), reported as the inventory's budget.
  int64_t room_bytes_ HANGAR_GUARDED_BY(mu_) = -1;
  std::vector<CachedImageState> images_ HANGAR_GUARDED_BY(mu_);
  std::map<std::string, Time> last_used_ HANGAR_GUARDED_BY(mu_);  // by digest
  std::set<std::string> wanted_ HANGAR_GUARDED_BY(mu_);           // digests
  bool over_budget_ HANGAR_GUARDED_BY(mu_) = false;
};

}  // namespace hangar::agent
