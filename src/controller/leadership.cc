#include "controller/leadership.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace hangar::controller {

nlohmann::json LeaderInfo::ToJson() const {
  if (name.empty()) return nullptr;
  return {
      {"name", name}, {"api", api}, {"epoch", epoch}, {"since_ms", since}, {"lease_left_ms", left}};
}

std::string HolderText(const std::string& name, const std::string& api) {
  return name + " (" + api + ")";
}

LeaderInfo ParseLease(const LeaseRow& row) {
  LeaderInfo l;
  l.name = row.holder;
  const auto open = row.holder.rfind(" (");
  if (open != std::string::npos && !row.holder.empty() && row.holder.back() == ')') {
    l.name = row.holder.substr(0, open);
    l.api = row.holder.substr(open + 2, row.holder.size() - open - 3);
  }
  l.epoch = row.epoch;
  l.since = row.acquired;
  l.left = row.left;
  return l;
}

Status CheckLeaseOptions(const LeaseOptions& o) {
  if (o.renew_every <= 0 || o.poll_every <= 0 || 2 * o.renew_every > o.ttl) {
    return Status::InvalidArgument(
        "--lease must be at least twice --lease-renew, and both positive (e.g. --lease 1500ms "
        "--lease-renew 300ms): a leader renews several times within its lease");
  }
  if (o.name.empty() || o.name.find('(') != std::string::npos) {
    return Status::InvalidArgument("--name must be a non-empty name without parentheses");
  }
  return Status::Ok();
}

LeaseKeeper::~LeaseKeeper() {
  stop_ = true;
  if (renewer_.joinable()) renewer_.join();
}

Status LeaseKeeper::Reconnect() {
  auto s = OpenPostgresStore(o_.url);
  if (!s.ok()) return s.status();
  store_ = std::move(*s);
  if (epoch_ > 0) return store_->AdoptLease(epoch_);
  return Status::Ok();
}

StatusOr<int64_t> LeaseKeeper::Acquire(const std::atomic<bool>& stop,
                                       const std::function<void(const LeaderInfo&)>& seen) {
  bool outage = false;     // logged once per outage
  int64_t free_since = 0;  // MonotonicNanos when this standby, not ready, first saw the lease free
  while (!stop) {
    Status s = store_ ? Status::Ok() : Reconnect();
    if (s.ok() && o_.ready && !o_.ready()) {
      // Not ready to lead at once: a ready standby takes a free lease first.
      if (auto row = store_->ReadLease(); row.ok()) {
        if (row->left > 0) {
          free_since = 0;
          seen(ParseLease(*row));
        } else if (free_since == 0) {
          free_since = MonotonicNanos();
        }
        if (free_since == 0 || MonotonicNanos() - free_since < o_.unready_defer * 1'000'000) {
          std::this_thread::sleep_for(std::chrono::milliseconds(o_.poll_every));
          continue;
        }
      }
    }
    if (s.ok()) {
      const int64_t t0 = MonotonicNanos();
      auto e = store_->AcquireLease(HolderText(o_.name, o_.api), o_.ttl);
      if (e.ok()) {
        epoch_ = *e;
        renewed_ns_ = t0;
        auto row = store_->ReadLease();
        since_ = row.ok() ? row->acquired : SystemClock::Default()->Now();
        return epoch_;
      }
      s = e.status();
      if (s.code() == StatusCode::kFailedPrecondition) {
        if (auto row = store_->ReadLease(); row.ok()) seen(ParseLease(*row));
        if (outage) spdlog::info("standby {}: the store answers again", o_.name);
        outage = false;
        s = Status::Ok();
      }
    }
    if (!s.ok()) {
      if (!outage) spdlog::warn("standby {}: {}; retrying", o_.name, s.message());
      outage = true;
      store_.reset();
      seen(LeaderInfo{});
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o_.poll_every));
  }
  return Status::Unavailable("stopped while standing by");
}

void LeaseKeeper::RenewOnce() {
  const int64_t t0 = MonotonicNanos();
  Status s = store_ ? Status::Ok() : Reconnect();
  if (s.ok()) s = store_->RenewLease(o_.ttl);
  if (s.ok()) {
    renewed_ns_ = t0;
  } else if (IsFenced(s)) {
    MutexLock l(mu_);
    refused_ = s.message();
  } else {
    spdlog::warn("leader {}: cannot renew the lease yet ({}); retrying", o_.name, s.message());
    store_.reset();
  }
}

void LeaseKeeper::StartRenewing() {
  renewer_ = std::thread([this] {
    while (!stop_ && Lost().empty()) {
      RenewOnce();
      const int64_t next = MonotonicNanos() + o_.renew_every * 1'000'000;
      while (!stop_ && MonotonicNanos() < next)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
}

std::string LeaseKeeper::Lost() const {
  {
    MutexLock l(mu_);
    if (!refused_.empty()) return refused_;
  }
  const Duration margin = std::min<Duration>(o_.ttl / 5, 200);
  const Duration since = (MonotonicNanos() - renewed_ns_.load()) / 1'000'000;
  if (since > o_.ttl - margin) {
    return "the lease (epoch " + std::to_string(epoch_) + ") was last renewed " +
           std::to_string(since) + " ms ago, too close to its " + std::to_string(o_.ttl) +
           " ms: another controller may lead now";
  }
  return "";
}

void LeaseKeeper::Release() {
  stop_ = true;
  if (renewer_.joinable()) renewer_.join();
  if (epoch_ == 0 || !Lost().empty()) return;  // never held, or another may lead already
  Status s = store_ ? Status::Ok() : Reconnect();
  if (s.ok()) s = store_->RenewLease(1);  // expires a millisecond from now
  if (s.ok()) {
    spdlog::info("controller {}: released the lease (epoch {})", o_.name, epoch_);
  } else {
    spdlog::warn(
        "controller {}: could not release the lease ({}); a standby takes over when it expires",
        o_.name, s.message());
  }
}

LeaderInfo LeaseKeeper::Me() const {
  LeaderInfo l;
  l.name = o_.name;
  l.api = o_.api;
  l.epoch = epoch_;
  l.since = since_;
  l.left = o_.ttl;
  return l;
}

}  // namespace hangar::controller
