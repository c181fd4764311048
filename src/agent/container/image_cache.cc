#include "agent/container/image_cache.h"

#include <spdlog/spdlog.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

namespace hangar::agent {
namespace {

bool Kept(const CachedImageState& s, const std::set<std::string>& keep) {
  return std::any_of(s.image.digests.begin(), s.image.digests.end(),
                     [&](const std::string& d) { return keep.count(d); });
}

Time LastUse(const std::vector<std::string>& digests,
             const std::map<std::string, Time>& last_used) {
  Time t = 0;
  for (const auto& d : digests) {
    if (auto it = last_used.find(d); it != last_used.end()) t = std::max(t, it->second);
  }
  return t;
}

}  // namespace

std::string DigestOf(const std::string& ref) {
  const size_t at = ref.find('@');
  return at == std::string::npos ? "" : ref.substr(at + 1);
}

std::vector<std::string> PlanEviction(const std::vector<CachedImageState>& images,
                                      const std::set<std::string>& keep, int64_t budget_bytes) {
  if (budget_bytes <= 0) return {};
  int64_t used = 0;
  for (const auto& s : images) used += s.image.bytes;
  std::vector<const CachedImageState*> order;
  for (const auto& s : images) {
    if (!Kept(s, keep)) order.push_back(&s);
  }
  std::sort(order.begin(), order.end(), [](const CachedImageState* a, const CachedImageState* b) {
    return a->last_used != b->last_used ? a->last_used < b->last_used : a->image.id < b->image.id;
  });
  std::vector<std::string> out;
  for (const CachedImageState* s : order) {
    if (used <= budget_bytes) break;
    out.push_back(s->image.id);
    used -= s->image.bytes;
  }
  return out;
}

int64_t CacheRoom(int64_t budget_bytes, int64_t used_bytes, int64_t free_bytes,
                  int64_t min_free_bytes) {
  int64_t room = budget_bytes > 0 ? budget_bytes : -1;
  if (min_free_bytes > 0 && free_bytes >= 0) {
    // What the images hold, plus what is free beyond the floor; never below 1 byte, so that a
    // disk that is full whatever the cache does empties the cache of all it may give up.
    const int64_t disk = std::max<int64_t>(1, used_bytes + free_bytes - min_free_bytes);
    room = room < 0 ? disk : std::min(room, disk);
  }
  return room;
}

ImageCache::ImageCache(const Podman* podman, std::string state_file, int64_t budget_bytes)
    : podman_(podman),
      state_file_(std::move(state_file)),
      budget_bytes_(budget_bytes),
      room_bytes_(budget_bytes > 0 ? budget_bytes : -1) {
  std::ifstream in(state_file_);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_object()) {
    for (const auto& [d, t] : j.items()) {
      if (t.is_number_integer()) last_used_[d] = t.get<Time>();
    }
  }
}

void ImageCache::SetDiskFloor(std::string path, int64_t min_free_bytes,
                              std::function<int64_t()> free_bytes) {
  disk_path_ = std::move(path);
  min_free_bytes_ = min_free_bytes;
  free_bytes_ = std::move(free_bytes);
  if (!free_bytes_) {
    free_bytes_ = [p = disk_path_]() -> int64_t {
      struct statvfs v {};
      if (statvfs(p.c_str(), &v) != 0) return -1;  // unknown: the budget alone decides
      return static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize);
    };
  }
}

Status ImageCache::Refresh(Time now) {
  HANGAR_ASSIGN_OR_RETURN(std::vector<LocalImage> found, podman_->Images());
  MutexLock l(mu_);
  images_.clear();
  for (auto& i : found) {
    Time t = LastUse(i.digests, last_used_);
    if (t == 0) {  // first seen: as if used now, so a fresh pull is not the first to go
      t = now;
      for (const auto& d : i.digests) last_used_[d] = now;
    }
    images_.push_back({std::move(i), t});
  }
  SaveLocked();
  return Status::Ok();
}

bool ImageCache::Holds(const std::string& ref) const { return BytesOf(ref) >= 0; }

int64_t ImageCache::BytesOf(const std::string& ref) const {
  const std::string d = DigestOf(ref);
  MutexLock l(mu_);
  for (const auto& s : images_) {
    const auto& ds = s.image.digests;
    const auto& ns = s.image.names;
    if ((!d.empty() && std::find(ds.begin(), ds.end(), d) != ds.end()) ||
        (d.empty() && std::find(ns.begin(), ns.end(), ref) != ns.end())) {
      return s.image.bytes;
    }
  }
  return -1;
}

void ImageCache::Touch(const std::string& ref, Time now) {
  const std::string d = DigestOf(ref);
  if (d.empty()) return;
  MutexLock l(mu_);
  last_used_[d] = now;
  for (auto& s : images_) {
    if (std::find(s.image.digests.begin(), s.image.digests.end(), d) != s.image.digests.end())
      s.last_used = now;
  }
  SaveLocked();
}

void ImageCache::SetWanted(std::set<std::string> refs) {
  std::set<std::string> digests;
  for (const auto& r : refs) {
    if (std::string d = DigestOf(r); !d.empty()) digests.insert(d);
  }
  MutexLock l(mu_);
  wanted_ = std::move(digests);
}

std::vector<std::string> ImageCache::Evict(const std::set<std::string>& in_use, Time now) {
  (void)now;
  std::vector<std::string> plan;
  // Read outside the lock: a slow disk must not hold up Holds() and Touch().
  const int64_t free_bytes = min_free_bytes_ > 0 && free_bytes_ ? free_bytes_() : -1;
  {
    MutexLock l(mu_);
    std::set<std::string> keep = wanted_;
    for (const auto& r : in_use) {
      if (std::string d = DigestOf(r); !d.empty()) keep.insert(d);
    }
    int64_t used = 0;
    for (const auto& s : images_) used += s.image.bytes;
    room_bytes_ = CacheRoom(budget_bytes_, used, free_bytes, min_free_bytes_);
    plan = PlanEviction(images_, keep, room_bytes_);
    if (free_bytes >= 0 && free_bytes < min_free_bytes_ &&
        (budget_bytes_ <= 0 || used <= budget_bytes_)) {
      spdlog::warn(
          "image cache: the disk under {} has {} MiB free, under its floor of {} MiB: evicting {} "
          "image(s)",
          disk_path_, free_bytes >> 20, min_free_bytes_ >> 20, plan.size());
    }
  }
  std::vector<std::string> removed;
  for (const auto& id : plan) {
    Status s = podman_->RemoveImage(id);
    if (s.ok()) {
      removed.push_back(id);
    } else {
      spdlog::warn("image cache: cannot evict {}: {}", id, s.message());
    }
  }
  MutexLock l(mu_);
  images_.erase(std::remove_if(images_.begin(), images_.end(),
                               [&](const CachedImageState& s) {
                                 return std::find(removed.begin(), removed.end(), s.image.id) !=
                                        removed.end();
                               }),
                images_.end());
  int64_t used = 0;
  for (const auto& s : images_) used += s.image.bytes;
  over_budget_ = room_bytes_ > 0 && used > room_bytes_;
  return removed;
}

pb::ImageInventory ImageCache::Inventory() const {
  pb::ImageInventory inv;
  MutexLock l(mu_);
  int64_t used = 0;
  for (const auto& s : images_) {
    for (const auto& d : s.image.digests) {
      pb::CachedImage* c = inv.add_images();
      c->set_digest(d);
      for (const auto& n : s.image.names) c->add_names(n);
      c->set_bytes(s.image.bytes);
      c->set_last_used_ms(s.last_used);
    }
    used += s.image.bytes;
  }
  inv.set_budget_bytes(std::max<int64_t>(0, room_bytes_));
  inv.set_used_bytes(used);
  inv.set_over_budget(over_budget_);
  return inv;
}

void ImageCache::SaveLocked() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [d, t] : last_used_) j[d] = t;
  std::ofstream out(state_file_ + ".tmp", std::ios::trunc);
  out << j.dump();
  out.close();
  if (out) std::rename((state_file_ + ".tmp").c_str(), state_file_.c_str());
}

}  // namespace hangar::agent
