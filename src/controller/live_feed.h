// The dashboard's live feed (docs/dashboard.md): server-sent events, so the page applies changes
// instead of polling everything. On connect the whole map; then, once a second, what changed:
//   event: gpus   data: {"nodes": [[index, name, spine, leaf, state, codes, utils, temps, jobs],
//   ...]} event: jobs   data: {"generation": "..."}   (jobs were submitted, placed, ended: lists
//   are stale)
// The page opens it after its first render: a request held open while a page loads keeps a
// headless browser from ever finishing the load.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace httplib {
struct Response;
}

namespace hangar::controller {

class StateOwner;

class LiveFeed {
 public:
  explicit LiveFeed(StateOwner* owner) : owner_(owner) {}
  // Makes `res` stream the feed until the client goes away or Stop() is called. Holds one HTTP
  // worker thread per open feed.
  void Serve(httplib::Response& res);
  // Ends every open feed within a second (the controller is stopping).
  void Stop() { stopping_ = true; }

  // The cluster map (web::MapJson) as of at most 900 ms ago: GET /v1/dashboard/map and every
  // open feed share one build a second. Blocks on the state owner when the copy is older.
  nlohmann::json Map();

  // What a feed has sent: the map rows by node index (dumped JSON) and the jobs' generation.
  struct Sent {
    std::vector<std::string> rows;
    std::string generation;
  };
  // The events that bring `sent` up to date with the state now, as SSE text ("" when nothing
  // changed); updates `sent`. Blocks on the state owner.
  std::string NextEvents(Sent* sent);

 private:
  struct Snapshot;
  // The state as of at most 900 ms ago, shared by every open feed: each costs the state thread
  // one map build a second however many feeds are open.
  std::shared_ptr<const Snapshot> Current();
  StateOwner* owner_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::shared_ptr<const Snapshot> cached_;  // guarded by mu_; replaced when older than 900 ms
  std::chrono::steady_clock::time_point cached_at_;
};

}  // namespace hangar::controller
