// This node's artifact side (docs/data.md) as one owner: its content-addressed cache, the stager
// that fills it as the controller's plan says, the data port that serves it to peers, and the
// token both present and check (the controller's, given at each registration).
#pragma once

#include <memory>
#include <set>
#include <string>

#include "agent/data/data_server.h"
#include "agent/data/object_cache.h"
#include "agent/data/stager.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::agent::data {

class DataPlane {
 public:
  // `clock` outlives it; `node` names this node in what it says.
  DataPlane(Clock* clock, std::string node);

  // Opens the cache in `cache_dir` (at most `budget_bytes`), removes the task views of tasks not
  // in `running` (the agent's records are loaded, nothing launches yet), and with an `address`
  // (HOST:PORT, PORT 0: a free one) serves the cache to peers. Once, before anything else.
  Status Init(const std::string& cache_dir, int64_t budget_bytes, const std::string& address,
              const std::set<std::string>& running);
  bool ready() const { return objects_ != nullptr; }  // Init has run
  // The token staging presents to peers and the data port asks of them.
  void SetToken(const std::string& token) HANGAR_EXCLUDES(mu_);

  // The cache keeps its own lock: a const plane still hands it out to use.
  ObjectCache& objects() const { return *objects_; }
  Stager& stager() { return *stager_; }
  // Where peers read this node's cache ("": it does not serve them).
  std::string url() const { return server_ ? server_->url() : std::string(); }

 private:
  Clock* const clock_;
  const std::string node_;
  std::unique_ptr<ObjectCache> objects_;
  std::unique_ptr<Stager> stager_;
  std::unique_ptr<DataServer> server_;
  mutable Mutex mu_;
  std::string token_ HANGAR_GUARDED_BY(mu_);
};

}  // namespace hangar::agent::data
