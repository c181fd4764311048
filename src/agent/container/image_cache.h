// The node's image cache (issue 17): what podman's storage on this node holds, how much disk it
// may use, and which images go first when it is full -- the least recently used, never one that
// a running task uses or that a job placed, reserved or nominated on this node will need (the
// controller names those in every Stage's `keep`). Last-use times survive agent restarts
// (<state dir>/images.json).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/container/podman.h"
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
std::vector<std::string> PlanEviction(const std::vector<CachedImageState>& images, const std::set<std::string>& keep,
                                      int64_t budget_bytes);

// The digest part of a pinned reference ("repo@sha256:..." -> "sha256:..."); "" if unpinned.
std::string DigestOf(const std::string& ref);

class ImageCache {
 public:
  ImageCache(const Podman* podman, std::string state_file, int64_t budget_bytes);
  // Reads podman's images and the saved last-use times.
  Status Refresh(Time now);
  bool Holds(const std::string& ref) const;
  int64_t BytesOf(const std::string& ref) const;
  void Touch(const std::string& ref, Time now);
  // The images the controller says jobs here will need (replaces the previous list).
  void SetWanted(std::set<std::string> refs);
  // Evicts what the budget needs, sparing `in_use` (refs of running tasks) and the wanted ones.
  // Returns what it removed.
  std::vector<std::string> Evict(const std::set<std::string>& in_use, Time now);
  pb::ImageInventory Inventory() const;

 private:
  void SaveLocked() const;
  const Podman* podman_;
  std::string state_file_;
  int64_t budget_bytes_;
  mutable std::mutex mu_;
  std::vector<CachedImageState> images_;
  std::map<std::string, Time> last_used_;  // by digest
  std::set<std::string> wanted_;           // digests
  bool over_budget_ = false;
};

}  // namespace hangar::agent
