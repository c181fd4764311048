#include "agent/container_runtime.h"

#include <utility>

namespace hangar::agent {

bool ContainerRuntime::Open(const ContainerOptions& c, const std::string& state_dir) {
  if (!c.enabled) {
    why_not_ = "containers are off on this node (hangar agent --containers off)";
    return false;
  }
  PodmanOptions o = c.podman;
  if (o.dir.empty()) o.dir = state_dir + "/podman";
  auto p = Podman::Open(o);
  if (!p.ok()) {
    why_not_ = p.status().message();
    return false;
  }
  podman_.emplace(std::move(*p));
  images_ = std::make_unique<ImageCache>(&*podman_, state_dir + "/images.json",
                                         c.image_cache_budget_bytes);
  images_->SetDiskFloor(podman_->options().root, c.image_cache_min_free_bytes);
  return true;
}

Status ContainerRuntime::Usable(const std::string& node) const {
  if (podman_) return Status::Ok();
  return Status::FailedPrecondition("node " + node + " cannot run container tasks: " + why_not_);
}

void ContainerRuntime::Touch(const std::string& image, Time now) const {
  if (images_) images_->Touch(image, now);
}

void ContainerRuntime::SetWanted(const std::set<std::string>& images) const {
  if (images_) images_->SetWanted(images);
}

pb::ImageInventory ContainerRuntime::Inventory() const {
  return images_ ? images_->Inventory() : pb::ImageInventory();
}

}  // namespace hangar::agent
