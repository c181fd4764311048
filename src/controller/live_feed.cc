#include "controller/live_feed.h"

#include <httplib.h>

#include <chrono>
#include <memory>
#include <thread>

#include "controller/state_owner.h"
#include "controller/web_ui.h"

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
    Read out{web::CollectMap(st),
             std::to_string(st.next_job_id()) + "." + std::to_string(st.placements_total()) + "." +
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
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    if (!want_now_ && Clock::now() - wanted_at_ > kIdle) {
      cv_.wait(l, [&] { return stopping_ || want_now_; });  // nobody is looking
      continue;
    }
    want_now_ = false;
    l.unlock();
    std::shared_ptr<Snapshot> s;
    try {
      s = Build();
    } catch (const StoreCommitRefused&) {  // the store failed: the controller is stopping
      return;
    }
    l.lock();
    cached_ = s;
    recent_.push_back(s);
    if (recent_.size() > 4) recent_.pop_front();
    cv_.notify_all();
    cv_.wait_for(l, kRefresh, [&] { return stopping_ || want_now_; });
  }
}

std::shared_ptr<const LiveFeed::Snapshot> LiveFeed::Map() {
  std::unique_lock<std::mutex> l(mu_);
  const auto asked = Clock::now();
  wanted_at_ = asked;
  if (stopping_) return cached_;
  if (!refresher_.joinable()) refresher_ = std::thread([this] { Refresh(); });
  if (cached_ && asked - cached_->at < kMaxAge) return cached_;
  want_now_ = true;
  cv_.notify_all();
  cv_.wait(l, [&] { return stopping_ || (cached_ && cached_->at >= asked); });
  return cached_;
}

std::shared_ptr<const LiveFeed::Snapshot> LiveFeed::Recent(uint64_t seq) {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& s : recent_) {
    if (s->seq == seq) return s;
  }
  return nullptr;
}

void LiveFeed::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  stopped_ = true;
  cv_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

std::string LiveFeed::NextEvents(Sent* sent) {
  const std::shared_ptr<const Snapshot> snap = Map();
  if (!snap || snap == sent->last) return "";
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
    text += "event: jobs\ndata: " + nlohmann::json{{"generation", sent->generation}}.dump() + "\n\n";
  }
  sent->last = snap;
  return text;
}

void LiveFeed::Serve(httplib::Response& res, std::optional<uint64_t> since) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  auto sent = std::make_shared<Sent>();
  if (since) sent->last = Recent(*since);  // null when gone: every row
  res.set_chunked_content_provider(
      "text/event-stream", [this, sent, from_now = !since](size_t, httplib::DataSink& sink) {
        // A comment first, so the client sees the stream open before the first snapshot is built.
        const std::string hello = ": hangar live feed\nretry: 2000\n\n";
        if (!sink.write(hello.data(), hello.size())) return false;
        if (from_now && !sent->last) {
          sent->last = Map();
          if (sent->last) sent->generation = sent->last->generation;
        }
        if (sent->last && sent->generation.empty()) sent->generation = sent->last->generation;
        while (!stopped_) {
          const std::string text = NextEvents(sent.get());
          // A comment every quiet second, so a client that went away is noticed by the failed
          // write.
          const std::string out = text.empty() ? ": quiet\n\n" : text;
          if (!sink.write(out.data(), out.size())) return false;
          for (int i = 0; i < 10 && !stopped_; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          if (!sink.is_writable()) return false;
        }
        sink.done();
        return true;
      });
}

}  // namespace hangar::controller
