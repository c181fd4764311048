// SpecBook: the job specs the store holds -- each once, under its key, however many jobs share
// it -- and how many bytes of them each user stores, against a per-user limit
// (`--max-spec-bytes-per-user`). A spec costs its user its bytes once, when its first job is
// admitted, and is given back when its last job is purged.
//
// Not thread-safe: the state owner's.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "common/status.h"

namespace hangar::controller {

class SpecBook {
 public:
  static constexpr int64_t kDefaultMaxBytesPerUser = int64_t{1} << 30;  // 1 GiB

  // `max_bytes_per_user` 0: no limit (the simulator's).
  explicit SpecBook(int64_t max_bytes_per_user = kDefaultMaxBytesPerUser)
      : max_bytes_per_user_(max_bytes_per_user) {}

  // Ok when `user` may store a spec of `bytes` under `key` (a spec stored already costs nothing);
  // else ResourceExhausted saying the limit and how much the user stores already.
  Status MayStore(const std::string& user, const std::string& key, int64_t bytes) const;
  // A job of `user` refers to the spec `key` of `bytes`; true when it is the spec's first (the
  // store does not hold it yet).
  bool Ref(const std::string& key, const std::string& user, int64_t bytes);
  // A job that referred to `key` is gone; true when it was the spec's last (the store may drop it).
  bool Unref(const std::string& key);

  int64_t UserBytes(const std::string& user) const;
  size_t specs() const { return specs_.size(); }
  int64_t max_bytes_per_user() const { return max_bytes_per_user_; }

 private:
  struct Entry {
    std::string user;
    int64_t bytes = 0;
    int64_t jobs = 0;
  };
  int64_t max_bytes_per_user_;
  std::unordered_map<std::string, Entry> specs_;      // by key
  std::unordered_map<std::string, int64_t> by_user_;  // bytes
};

// "512 B", "3.4 KiB", "1.0 GiB".
std::string FormatBytes(int64_t bytes);

}  // namespace hangar::controller
