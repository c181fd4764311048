// Containers on this node (docs/containers.md): podman, when container tasks run here, and the
// image cache over its storage; or why they do not run here. Opened by Init and not changed
// afterwards (the cache locks itself), so every flow reads it without a lock of the agent's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "agent/container/image_cache.h"
#include "agent/container/podman.h"
#include "common/status.h"
#include "common/time.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

namespace pb = ::hangar::agent::v1;

// Container tasks (docs/containers.md).
struct ContainerOptions {
  bool enabled = true;                   // off: a task with an image fails to start, saying so
  PodmanOptions podman;                  // podman.dir empty: <state dir>/podman
  int64_t image_cache_budget_bytes = 0;  // 0: no budget
  // The free space the image cache leaves on the disk under podman's storage (0: no floor).
  int64_t image_cache_min_free_bytes = int64_t{1} << 30;
  // The static `hangar` for inside containers; empty: hangar-in-container beside hangar_binary.
  std::string in_container_tool;
};

class ContainerRuntime {
 public:
  // Init: podman as `c` says (podman.dir empty: <state_dir>/podman) and its image cache, its
  // last-use times in <state_dir>/images.json. Returns whether container tasks run here; when
  // they do not, why_not() says why. Reads no image yet (images()->Refresh does).
  bool Open(const ContainerOptions& c, const std::string& state_dir);

  // Null when container tasks do not run here.
  const Podman* podman() const { return podman_ ? &*podman_ : nullptr; }
  ImageCache* images() const { return images_.get(); }
  // Why container tasks do not run here, when they do not.
  const std::string& why_not() const { return why_not_; }
  // OK when container tasks run here; else FailedPrecondition, naming `node` and saying why not.
  Status Usable(const std::string& node) const;

  // What the cache keeps, when there is one: `image` was used at `now`; the images jobs here will
  // need; the inventory for the controller (empty without a cache).
  void Touch(const std::string& image, Time now) const;
  void SetWanted(const std::set<std::string>& images) const;
  pb::ImageInventory Inventory() const;

 private:
  std::optional<Podman> podman_;
  std::string why_not_;                 // why containers do not run here, when they do not
  std::unique_ptr<ImageCache> images_;  // over podman_'s storage: goes first
};

}  // namespace hangar::agent
