// The node's artifact cache (docs/data.md): a content-addressed store on the node's
// local scratch disk. An object is named by its SHA-256 and lives at <dir>/objects/<hex>
// (read-only) only once its whole content has been verified against that digest; while it is
// being staged it lives at <dir>/partial/<hex>, chunk by chunk, and peers may already read the
// chunks it holds. Eviction follows the image cache's rule (PlanEviction): least recently used
// first, never an object a running task uses or that a job placed, reserved or nominated on this
// node needs (the controller's `keep`). Last-use times survive restarts (<dir>/index.json).
// Only the agent may read objects/, partial/ and index.json; a task reads the objects it uses
// through its own view (task_view.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"
#include "proto/agent.pb.h"

namespace hangar::agent::data {

namespace pb = ::hangar::agent::v1;

// "sha256:<hex>" -> "<hex>" when it is a well-formed digest, else "".
std::string HexOf(const std::string& digest);

// One object being staged: a sparse file and which of its chunks are written.
class Partial {
 public:
  Partial(std::string digest, int64_t bytes, int64_t chunk_bytes, int fd, std::string path);
  ~Partial();
  const std::string& digest() const { return digest_; }
  int64_t bytes() const { return bytes_; }
  int64_t chunk_bytes() const { return chunk_bytes_; }
  int64_t chunks() const { return chunks_; }
  // [offset, offset+length) of chunk i.
  std::pair<int64_t, int64_t> ChunkRange(int64_t i) const;
  Status Write(int64_t i, const std::string& data) HANGAR_EXCLUDES(mu_);
  bool Has(int64_t i) const HANGAR_EXCLUDES(mu_);
  bool Complete() const HANGAR_EXCLUDES(mu_);
  // Waits until chunks [first, last] are all written (true), or `timeout` passes or the staging
  // is abandoned (false).
  bool WaitFor(int64_t first, int64_t last, Duration timeout) HANGAR_EXCLUDES(mu_);
  // Reads bytes that are written (callers wait first).
  StatusOr<std::string> Read(int64_t offset, int64_t length) const;
  void Abandon() HANGAR_EXCLUDES(mu_);
  bool abandoned() const { return abandoned_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  std::string digest_;
  int64_t bytes_, chunk_bytes_, chunks_;
  int fd_;
  std::string path_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> have_ HANGAR_GUARDED_BY(mu_);
  int64_t have_count_ HANGAR_GUARDED_BY(mu_) = 0;
  std::atomic<bool> abandoned_{false};
};

struct CachedObject {
  std::string digest;
  int64_t bytes = 0;
  Time last_used = 0;
};

class ObjectCache {
 public:
  ObjectCache(std::string dir, int64_t budget_bytes);
  // Makes the folders, reads the objects there and their last-use times, and removes what a
  // previous run left half-staged.
  Status Init(Time now) HANGAR_EXCLUDES(mu_);
  const std::string& dir() const { return dir_; }
  // Where tasks' views of their objects live (task_view.h); objects/ itself admits only the agent.
  std::string views_dir() const { return dir_ + "/views"; }
  // The verified object's file, or "" when this node does not hold it.
  std::string PathOf(const std::string& digest) const HANGAR_EXCLUDES(mu_);
  bool Holds(const std::string& digest) const HANGAR_EXCLUDES(mu_) {
    return !PathOf(digest).empty();
  }
  int64_t BytesOf(const std::string& digest) const HANGAR_EXCLUDES(mu_);
  void Touch(const std::string& digest, Time now) HANGAR_EXCLUDES(mu_);
  void SetWanted(std::set<std::string> digests) HANGAR_EXCLUDES(mu_);
  // Starts staging an object (a fresh sparse file); refused while it is being staged already.
  StatusOr<std::shared_ptr<Partial>> Begin(const std::string& digest, int64_t bytes,
                                           int64_t chunk_bytes) HANGAR_EXCLUDES(mu_);
  // The object being staged, if any (for peers that read chunks as they arrive).
  std::shared_ptr<Partial> Staging(const std::string& digest) const HANGAR_EXCLUDES(mu_);
  // Verifies the staged content against its digest; on success the object is in the cache. Either
  // way the partial is gone afterwards. The error says what the content hashed to.
  Status Commit(const std::shared_ptr<Partial>& p, Time now) HANGAR_EXCLUDES(mu_);
  // Abandons a staging: peers waiting on it are answered at once, and its file is removed.
  void Drop(const std::shared_ptr<Partial>& p) HANGAR_EXCLUDES(mu_);
  // Evicts what the budget needs, sparing `in_use` and the wanted ones; returns what it removed.
  std::vector<std::string> Evict(const std::set<std::string>& in_use) HANGAR_EXCLUDES(mu_);
  void FillInventory(pb::ImageInventory* inv) const HANGAR_EXCLUDES(mu_);
  std::vector<CachedObject> Objects() const HANGAR_EXCLUDES(mu_);

 private:
  void SaveLocked() const HANGAR_REQUIRES(mu_);
  std::string dir_;
  int64_t budget_bytes_;
  mutable Mutex mu_;
  std::map<std::string, CachedObject> objects_ HANGAR_GUARDED_BY(mu_);  // by digest
  std::map<std::string, std::shared_ptr<Partial>> staging_ HANGAR_GUARDED_BY(mu_);
  std::set<std::string> wanted_ HANGAR_GUARDED_BY(mu_);
  bool over_budget_ HANGAR_GUARDED_BY(mu_) = false;
};

// `length` bytes at `offset` of a file (all of them, or an error).
StatusOr<std::string> ReadAt(int fd, int64_t offset, int64_t length);

// The SHA-256 of a file's content, as "sha256:<hex>".
StatusOr<std::string> Sha256OfFile(int fd, int64_t bytes);

}  // namespace hangar::agent::data
