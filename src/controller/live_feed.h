// The dashboard's live feed (docs/dashboard.md): server-sent events, so the page applies changes
// instead of polling everything, and the map snapshot that the feed and GET /v1/dashboard/map
// share. Once a second, what changed since what this feed sent (or since the snapshot `since`
// named, the one the page drew):
//   event: gpus   data: {"nodes": [[index, name, spine, leaf, state, codes, utils, temps, jobs,
//                 shares], ...]}
//   event: jobs   data: {"generation": "..."}   (jobs were submitted, placed, ended: lists are
//   stale)
// The page opens it after its first render: a request held open while a page loads keeps a
// headless browser from ever finishing the load. An open feed holds no thread: its connection is
// the stream pump's (http_server.h), and one ticker thread writes the events of every feed,
// working out each distinct update once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "controller/stream_pump.h"

namespace hangar::controller {

class StateOwner;

class LiveFeed {
 public:
  explicit LiveFeed(StateOwner* owner) : owner_(owner) {}
  ~LiveFeed() { Stop(); }
  LiveFeed(const LiveFeed&) = delete;
  LiveFeed& operator=(const LiveFeed&) = delete;

  // Streams the feed to `sink` until the client goes away or Stop() is called; the first event
  // brings a page that drew snapshot `since` up to date (every row when that snapshot is gone),
  // without `since` the feed starts from now.
  void Open(std::shared_ptr<StreamSink> sink, std::optional<uint64_t> since);
  // Ends every open feed, the ticker and the map's refresher. Call while the state owner still
  // runs (HttpApi::Stop, before StateOwner::Stop).
  void Stop();

  // The cluster map, published as one immutable snapshot: its rows as JSON text (web::MapRows),
  // the whole answer and its gzip. One refresher thread rebuilds it once a second while anyone
  // reads it (stopping after kIdle without a read): the state thread only gathers flat arrays
  // (web::CollectMap, a few ms at 81,920 GPUs), the JSON and gzip are made on the refresher.
  struct Snapshot {
    uint64_t seq = 0;
    std::vector<std::string> rows;
    std::string body, gzip;
    std::string generation;                    // moves when jobs were submitted, placed or ended
    std::chrono::steady_clock::time_point at;  // when the state was read
    double state_ms = 0, collect_ms = 0,
           encode_ms = 0;  // round trip to the state thread, work on it, JSON + gzip
  };
  static constexpr std::chrono::milliseconds kRefresh{1000};
  static constexpr std::chrono::milliseconds kMaxAge{3000};  // older: a reader waits for a new one
  static constexpr std::chrono::milliseconds kIdle{10000};
  // The latest snapshot: at once when it is under kMaxAge old, else after the next build. Null
  // only when stopping before any was built.
  std::shared_ptr<const Snapshot> Map();

  // What one feed has sent: the snapshot its rows came from, and the jobs' generation.
  struct Sent {
    std::shared_ptr<const Snapshot> last;
    std::string generation;
  };
  // The events that bring `sent` up to date with the latest snapshot, as SSE text ("" when
  // nothing changed); updates `sent`.
  std::string NextEvents(Sent* sent);
  // The same, up to `snap`.
  static std::string EventsUpTo(const std::shared_ptr<const Snapshot>& snap, Sent* sent);
  // A recent snapshot by its seq (the last few are kept), or null.
  std::shared_ptr<const Snapshot> Recent(uint64_t seq);

 private:
  void Refresh();  // the refresher thread's loop
  std::shared_ptr<Snapshot> Build();
  struct Feed {
    std::shared_ptr<StreamSink> sink;
    Sent sent;
    bool from_now = false;  // without `since`: its first snapshot is where it starts
  };
  void Tick();  // the ticker thread's loop
  void Send(std::vector<Feed>* feeds);

  StateOwner* owner_;
  std::atomic<bool> stopped_{false};  // set under feeds_mu_: the ticker ends
  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ HANGAR_GUARDED_BY(mu_) = false;
  bool want_now_ HANGAR_GUARDED_BY(mu_) = false;  // a reader waits for a fresh snapshot
  std::chrono::steady_clock::time_point wanted_at_ HANGAR_GUARDED_BY(mu_);  // the last read
  std::shared_ptr<const Snapshot> cached_ HANGAR_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<const Snapshot>> recent_
      HANGAR_GUARDED_BY(mu_);  // the last few, newest last
  uint64_t next_seq_ = 1;      // the refresher's own
  std::thread refresher_;      // started by the first read

  Mutex feeds_mu_;
  std::condition_variable feeds_cv_;
  std::vector<Feed> fresh_ HANGAR_GUARDED_BY(feeds_mu_);  // opened, not yet taken by the ticker
  std::thread ticker_;                                    // started by the first feed
};

}  // namespace hangar::controller
