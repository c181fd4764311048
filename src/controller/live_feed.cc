#include "controller/live_feed.h"

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "controller/dashboard_map.h"
#include "controller/state_owner.h"

namespace hangar::controller {

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

std::shared_ptr<LiveFeed::Snapshot> LiveFeed::Build() {
  auto s = std::make_shared<Snapshot>();
  s->seq = next_seq_++;  // only the refresher builds
  s->at = Clock::now();
  struct Read {
    web::MapData map;
    std::string generation;
    double ms = 0;
  };
  Read r = owner_->Call<Read>([](ClusterState& st, Effects*) {
    const auto t0 = Clock::now();
    Read out{web::CollectMap(st), std::to_string(st.next_job_id()) + "." +
                                      std::to_string(st.placements_total()) + "." +
                                      std::to_string(st.waiting_order().jobs.size())};
    out.ms = MsSince(t0);
    return out;
  });
  // The latest event's id moves with every job and node transition the cycle alone does not show
  // (a task ended, a cancel).
  if (auto last = owner_->Events("", 1); last.ok() && !last->empty()) {
    r.generation += "." + std::to_string(last->front().id);
  }
  s->state_ms = MsSince(s->at);
  s->collect_ms = r.ms;
  s->generation = std::move(r.generation);
  const auto t1 = Clock::now();
  s->rows = web::MapRows(r.map);
  s->body = web::MapBody(r.map.cluster, s->rows, s->seq);
  s->gzip = web::Gzip(s->body);
  s->encode_ms = MsSince(t1);
  return s;
}

void LiveFeed::Refresh() {
  MutexLock l(mu_);
  auto woken = [&]() HANGAR_REQUIRES(mu_) { return stopping_ || want_now_; };
  while (!stopping_) {
    if (!want_now_ && Clock::now() - wanted_at_ > kIdle) {
      l.Wait(cv_, woken);  // nobody is looking
      continue;
    }
    want_now_ = false;
    l.Unlock();
    std::shared_ptr<Snapshot> s;
    try {
      s = Build();
    } catch (const StoreCommitRefused&) {  // the store failed: the controller is stopping
      return;
    }
    l.Lock();
    cached_ = s;
    recent_.push_back(s);
    if (recent_.size() > 4) recent_.pop_front();
    cv_.notify_all();
    l.WaitFor(cv_, kRefresh, woken);
  }
}

std::shared_ptr<const LiveFeed::Snapshot> LiveFeed::Map() {
  MutexLock l(mu_);
  const auto asked = Clock::now();
  wanted_at_ = asked;
  if (stopping_) return cached_;
  if (!refresher_.joinable()) refresher_ = std::thread([this] { Refresh(); });
  if (cached_ && asked - cached_->at < kMaxAge) return cached_;
  want_now_ = true;
  cv_.notify_all();
  l.Wait(cv_,
         [&]() HANGAR_REQUIRES(mu_) { return stopping_ || (cached_ && cached_->at >= asked); });
  return cached_;
}

std::shared_ptr<const LiveFeed::Snapshot> LiveFeed::Recent(uint64_t seq) {
  MutexLock l(mu_);
  for (const auto& s : recent_) {
    if (s->seq == seq) return s;
  }
  return nullptr;
}

void LiveFeed::Stop() {
  {
    MutexLock l(feeds_mu_);
    stopped_ = true;
  }
  feeds_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  {
    MutexLock l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

std::string LiveFeed::NextEvents(Sent* sent) {
  const std::shared_ptr<const Snapshot> snap = Map();
  return snap ? EventsUpTo(snap, sent) : "";
}

std::string LiveFeed::EventsUpTo(const std::shared_ptr<const Snapshot>& snap, Sent* sent) {
  if (snap == sent->last) return "";
  const std::vector<std::string>* old =
      sent->last && sent->last->rows.size() == snap->rows.size() ? &sent->last->rows : nullptr;
  std::string nodes;
  for (size_t i = 0; i < snap->rows.size(); ++i) {
    const std::string& row = snap->rows[i];
    if (old && (*old)[i] == row) continue;
    nodes += nodes.empty() ? "[" : ",[";
    nodes += std::to_string(i) + "," + row.substr(1);  // a row is "[...]": [i, ...row]
  }
  std::string text;
  if (!nodes.empty()) text += "event: gpus\ndata: {\"nodes\":[" + nodes + "]}\n\n";
  if (snap->generation != sent->generation) {
    sent->generation = snap->generation;
    text +=
        "event: jobs\ndata: " + nlohmann::json{{"generation", sent->generation}}.dump() + "\n\n";
  }
  sent->last = snap;
  return text;
}

void LiveFeed::Open(std::shared_ptr<StreamSink> sink, std::optional<uint64_t> since) {
  // A comment first, so the client sees the stream open before the first snapshot is built.
  if (!sink->Write(std::string_view(": hangar live feed\nretry: 2000\n\n"))) return;
  Feed f;
  f.sink = std::move(sink);
  f.from_now = !since;
  if (since) f.sent.last = Recent(*since);  // null when gone: every row
  if (f.sent.last) f.sent.generation = f.sent.last->generation;
  {
    MutexLock l(feeds_mu_);
    if (stopped_) return f.sink->Finish();
    fresh_.push_back(std::move(f));
    if (!ticker_.joinable()) ticker_ = std::thread([this] { Tick(); });
  }
  feeds_cv_.notify_all();
}

// Once a second, every feed; a feed that opened in between at once (only the new ones).
void LiveFeed::Tick() {
  std::vector<Feed> feeds, fresh;
  auto next = Clock::now();
  MutexLock l(feeds_mu_);
  auto woken = [&]() HANGAR_REQUIRES(feeds_mu_) { return stopped_ || !fresh_.empty(); };
  while (!stopped_) {
    if (fresh_.empty() && (feeds.empty() || Clock::now() < next)) {
      if (feeds.empty()) {
        l.Wait(feeds_cv_, woken);
      } else {
        l.WaitUntil(feeds_cv_, next, woken);
      }
      continue;
    }
    fresh.swap(fresh_);
    const bool all = Clock::now() >= next;
    l.Unlock();
    Send(&fresh);
    if (all) {
      Send(&feeds);
      next = Clock::now() + kRefresh;
    }
    std::move(fresh.begin(), fresh.end(), std::back_inserter(feeds));
    fresh.clear();
    l.Lock();
  }
  std::move(fresh_.begin(), fresh_.end(), std::back_inserter(feeds));
  fresh_.clear();
  l.Unlock();
  for (Feed& f : feeds) f.sink->Finish();
}

// What changed for each feed; feeds whose client left (or fell too far behind) are forgotten.
// Feeds that sent the same snapshot share one update: it is worked out and framed once.
void LiveFeed::Send(std::vector<Feed>* feeds) {
  if (feeds->empty()) return;
  const std::shared_ptr<const Snapshot> snap = Map();
  if (!snap) return;
  std::map<std::pair<const Snapshot*, std::string>, std::pair<StreamSink::Chunk, Sent>> memo;
  std::vector<Feed> kept;
  kept.reserve(feeds->size());
  for (Feed& f : *feeds) {
    if (f.from_now && !f.sent.last) f.sent = Sent{snap, snap->generation};
    auto key = std::make_pair(f.sent.last.get(), f.sent.generation);
    auto it = memo.find(key);
    if (it == memo.end()) {
      Sent after = f.sent;
      const std::string text = EventsUpTo(snap, &after);
      it = memo.emplace(std::move(key),
                        std::make_pair(text.empty() ? nullptr : StreamSink::Frame(text), after))
               .first;
    }
    f.sent = it->second.second;
    const StreamSink::Chunk& chunk = it->second.first;
    if (chunk ? f.sink->Write(chunk) : f.sink->open()) kept.push_back(std::move(f));
  }
  feeds->swap(kept);
}

}  // namespace hangar::controller
