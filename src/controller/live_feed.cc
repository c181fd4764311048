#include "controller/live_feed.h"

#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/body.h"
#include "controller/state_owner.h"
#include "controller/web_ui.h"

namespace hangar::controller {

struct LiveFeed::Snapshot {
  nlohmann::json map;
  std::string generation;
};

namespace {

std::string Event(const char* name, const nlohmann::json& data) {
  return std::string("event: ") + name + "\ndata: " + api::SafeDump(data) + "\n\n";
}

}  // namespace

std::shared_ptr<const LiveFeed::Snapshot> LiveFeed::Current() {
  std::lock_guard<std::mutex> l(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (cached_ && now - cached_at_ < std::chrono::milliseconds(900)) return cached_;
  auto snap = owner_->Call<std::shared_ptr<Snapshot>>([](ClusterState& st, Effects*) {
    auto s = std::make_shared<Snapshot>();
    s->map = web::MapJson(st);
    s->generation = std::to_string(st.next_job_id()) + "." + std::to_string(st.placements_total()) +
                    "." + std::to_string(st.waiting_order().jobs.size());
    return s;
  });
  // The latest event's id moves with every job and node transition the cycle alone does not show
  // (a task ended, a cancel).
  if (auto last = owner_->Events("", 1); last.ok() && !last->empty()) {
    snap->generation += "." + std::to_string(last->front().id);
  }
  cached_ = snap;
  cached_at_ = now;
  return cached_;
}

nlohmann::json LiveFeed::Map() { return Current()->map; }

std::string LiveFeed::NextEvents(Sent* sent) {
  const std::shared_ptr<const Snapshot> snap = Current();
  nlohmann::json changed = nlohmann::json::array();
  const auto& nodes = snap->map.at("nodes");
  sent->rows.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string row = nodes[i].dump();
    if (row == sent->rows[i]) continue;
    nlohmann::json out = nlohmann::json::array({i});
    for (const auto& v : nodes[i]) out.push_back(v);
    changed.push_back(std::move(out));
    sent->rows[i] = std::move(row);
  }
  std::string text;
  if (!changed.empty()) text += Event("gpus", {{"nodes", changed}});
  if (snap->generation != sent->generation) {
    sent->generation = snap->generation;
    text += Event("jobs", {{"generation", sent->generation}});
  }
  return text;
}

void LiveFeed::Serve(httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  auto sent = std::make_shared<Sent>();
  res.set_chunked_content_provider(
      "text/event-stream", [this, sent](size_t, httplib::DataSink& sink) {
        // A comment first, so the client sees the stream open before the first snapshot is built.
        const std::string hello = ": hangar live feed\nretry: 2000\n\n";
        if (!sink.write(hello.data(), hello.size())) return false;
        while (!stopping_) {
          const std::string text = NextEvents(sent.get());
          // A comment every quiet second, so a client that went away is noticed by the failed
          // write.
          const std::string out = text.empty() ? ": quiet\n\n" : text;
          if (!sink.write(out.data(), out.size())) return false;
          for (int i = 0; i < 10 && !stopping_; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          if (!sink.is_writable()) return false;
        }
        sink.done();
        return true;
      });
}

}  // namespace hangar::controller
