#include "controller/state/staging_book.h"

#include <algorithm>

namespace hangar::controller {

bool StagingBook::Swarm::MayReadOrigin(uint32_t n, int readers) const {
  return !members.empty() || origin_readers.count(n) ||
         static_cast<int>(origin_readers.size()) < std::max(1, readers);
}

void StagingBook::Swarm::Leave(uint32_t n) {
  staging.erase(n);
  origin_readers.erase(n);
}

int64_t StagingBook::ImageBytes(const std::string& digest, int64_t otherwise) const {
  auto it = image_bytes_.find(digest);
  return it != image_bytes_.end() ? it->second : otherwise;
}

void StagingBook::NoteImageBytes(const std::string& digest, int64_t bytes) {
  image_bytes_[digest] = bytes;
}

std::pair<std::vector<uint16_t>*, bool> StagingBook::SecondsFor(const std::string& key) {
  auto [it, fresh] = seconds_.try_emplace(key);
  return {&it->second, fresh};
}

StagingBook::Swarm& StagingBook::Join(const std::string& digest, bool* fresh) {
  auto [it, made] = swarms_.try_emplace(digest);
  *fresh = made;
  return it->second;
}

StagingBook::Swarm* StagingBook::FindSwarm(const std::string& digest) {
  auto it = swarms_.find(digest);
  return it == swarms_.end() ? nullptr : &it->second;
}

void StagingBook::EndIfIdle(const std::string& digest) {
  auto it = swarms_.find(digest);
  if (it != swarms_.end() && it->second.staging.empty() && it->second.waiting.empty())
    swarms_.erase(it);
}

}  // namespace hangar::controller
