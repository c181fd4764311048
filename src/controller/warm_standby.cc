#include "controller/warm_standby.h"

#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

namespace hangar::controller {

WarmStandby::WarmStandby(std::string url, Duration every, ClusterState* state, std::string name)
    : url_(std::move(url)), every_(every), state_(state), name_(std::move(name)) {
  if (every_ > 0) thread_ = std::thread([this] { Follow(); });
}

WarmStandby::~WarmStandby() { StopFollowing(); }

void WarmStandby::StopFollowing() {
  stopping_ = true;
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WarmStandby::Follow() {
  bool failing = false;  // logged once per outage
  bool warm_failed = false;
  std::vector<const JobRow*> changed;
  MutexLock l(mu_);
  while (!stop_) {
    l.Unlock();
    Status s = Status::Ok();
    if (!follower_) {
      auto store = OpenStore(url_);
      if (store.ok()) {
        follower_ = std::make_unique<StoreFollower>(std::move(store).value());
      } else {
        s = store.status();
      }
    }
    if (follower_) {
      s = follower_->CatchUp(&changed);
      if (s.ok()) {
        // A spec that does not parse now fails Restore too, which says so; here it is noted once.
        Status w = state_->WarmSpecs(changed, &stopping_);
        if (!w.ok() && !stopping_ && !warm_failed) {
          spdlog::warn("standby {}: cannot prepare a stored job ahead of a takeover: {}", name_,
                       w.message());
          warm_failed = true;
        }
        rev_ = follower_->rev();
        jobs_ = follower_->jobs();
        caught_up_ns_ = MonotonicNanos();
        if (!ready_ && !stopping_) {
          ready_ = true;
          spdlog::info("standby {}: its copy of the store is ready ({} jobs at revision {})", name_,
                       jobs_.load(), rev_.load());
        }
      } else {
        follower_.reset();  // a connection that failed is opened again
      }
    }
    if (!s.ok()) ready_ = false;
    if (!s.ok() && !failing)
      spdlog::warn("standby {}: cannot follow the store yet ({}); retrying", name_, s.message());
    if (s.ok() && failing)
      spdlog::info("standby {}: follows the store again (revision {})", name_, rev_.load());
    failing = !s.ok();
    l.Lock();
    l.WaitFor(cv_, std::chrono::milliseconds(every_),
              [this]() HANGAR_REQUIRES(mu_) { return stop_; });
  }
}

nlohmann::json WarmStandby::Following() const {
  const int64_t at = caught_up_ns_.load();
  nlohmann::json j{
      {"every_ms", every_}, {"rev", rev_.load()}, {"jobs", jobs_.load()}, {"ready", ready_.load()}};
  j["caught_up_ms_ago"] =
      at == 0 ? nlohmann::json() : nlohmann::json((MonotonicNanos() - at) / 1'000'000);
  return j;
}

StatusOr<WarmStandby::Handover> WarmStandby::Take() {
  StopFollowing();
  Handover h;
  if (follower_) {
    std::vector<const JobRow*> changed;
    if (Status s = follower_->CatchUp(&changed); s.ok()) {
      h.rows_at_takeover = static_cast<int64_t>(changed.size());
      h.warm = true;
      h.contents = follower_->Take();
      h.store = follower_->TakeStore();
      follower_.reset();
      return h;
    } else {
      spdlog::warn(
          "controller {}: the standby's copy cannot catch up ({}); loading the whole store", name_,
          s.message());
      follower_.reset();
    }
  }
  HANGAR_ASSIGN_OR_RETURN(h.store, OpenStore(url_));
  HANGAR_ASSIGN_OR_RETURN(h.contents, h.store->Load());
  h.rows_at_takeover = static_cast<int64_t>(h.contents.jobs.size());
  return h;
}

}  // namespace hangar::controller
