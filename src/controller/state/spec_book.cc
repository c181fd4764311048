#include "controller/state/spec_book.h"

#include <cstdio>

namespace hangar::controller {

std::string FormatBytes(int64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char out[32];
  std::snprintf(out, sizeof out, "%.1f %s", v, kUnits[u]);
  return out;
}

Status SpecBook::MayStore(const std::string& user, const std::string& key, int64_t bytes) const {
  if (max_bytes_per_user_ <= 0 || specs_.count(key)) return Status::Ok();
  const int64_t mine = UserBytes(user);
  if (mine + bytes <= max_bytes_per_user_) return Status::Ok();
  return Status::ResourceExhausted(
      "this job spec (" + FormatBytes(bytes) + ") does not fit: " + user + " already stores " +
      FormatBytes(mine) + " of job specs and may store at most " +
      FormatBytes(max_bytes_per_user_) +
      " (the controller's --max-spec-bytes-per-user); a spec is kept until its last job is purged "
      "(--keep-finished after it ends): submit smaller specs (an array instead of many copies), or "
      "ask an admin "
      "to raise the limit");
}

bool SpecBook::Ref(const std::string& key, const std::string& user, int64_t bytes) {
  auto [it, fresh] = specs_.try_emplace(key);
  if (fresh) {
    it->second.user = user;
    it->second.bytes = bytes;
    by_user_[user] += bytes;
  }
  ++it->second.jobs;
  return fresh;
}

bool SpecBook::Unref(const std::string& key) {
  auto it = specs_.find(key);
  if (it == specs_.end() || --it->second.jobs > 0) return false;
  auto u = by_user_.find(it->second.user);
  if (u != by_user_.end() && (u->second -= it->second.bytes) <= 0) by_user_.erase(u);
  specs_.erase(it);
  return true;
}

int64_t SpecBook::UserBytes(const std::string& user) const {
  auto it = by_user_.find(user);
  return it == by_user_.end() ? 0 : it->second;
}

}  // namespace hangar::controller
