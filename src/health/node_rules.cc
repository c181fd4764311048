#include "health/node_rules.h"

#include <array>
#include <limits>

#include "health/text.h"

namespace hangar::health {
namespace {

using A = RecommendedAction;

// One rule over one counter. `limit` null: any increase is fatal. Otherwise the count in
// `window` above *limit degrades (or, for `fatal_rate`, is fatal).
struct IbCounterRule {
  std::string_view counter;
  Duration window;
  double Thresholds::*limit;
  bool fatal_rate;
  std::string_view suffix;  // distinguishes two rules on one counter
};

constexpr std::array kIbRules = {
    IbCounterRule{"symbol_error", kSecond, &Thresholds::ib_symbol_error_per_s, false, ""},
    IbCounterRule{"symbol_error", kHour, &Thresholds::ib_symbol_error_per_h, true, "_hourly"},
    IbCounterRule{"link_error_recovery", kMinute, &Thresholds::ib_link_error_recovery_per_min,
                  false, ""},
    IbCounterRule{"link_downed", 0, nullptr, true, ""},
    IbCounterRule{"port_rcv_errors", kSecond, &Thresholds::ib_port_rcv_errors_per_s, false, ""},
    IbCounterRule{"port_xmit_discards", kSecond, &Thresholds::ib_port_xmit_discards_per_s, false,
                  ""},
    IbCounterRule{"local_link_integrity_errors", 0, nullptr, true, ""},
    IbCounterRule{"excessive_buffer_overrun_errors", 0, nullptr, true, ""},
    IbCounterRule{"rnr_nak_retry_err", 0, nullptr, true, ""},
    IbCounterRule{"local_ack_timeout_err", kSecond, &Thresholds::ib_local_ack_timeout_per_s, false,
                  ""},
};

// The widths of the classic PortCounters fields: they stick at their maximum instead of wrapping.
uint64_t SaturationOf(std::string_view counter) {
  if (counter == "link_error_recovery" || counter == "link_downed") return 0xFF;
  if (counter == "local_link_integrity_errors" || counter == "excessive_buffer_overrun_errors") {
    return 0xF;
  }
  if (counter == "symbol_error" || counter == "port_rcv_errors" ||
      counter == "port_xmit_discards") {
    return 0xFFFF;
  }
  return std::numeric_limits<uint32_t>::max();
}

std::string WindowName(Duration w) {
  if (w == kSecond) return "s";
  if (w == kMinute) return "min";
  if (w == kHour) return "h";
  return FormatDuration(w);
}

}  // namespace

PortRules::PortRules(std::string device, uint32_t port)
    : name_(device + " port " + std::to_string(port)),
      key_prefix_("ib_" + device + "_" + std::to_string(port) + "_") {}

Finding PortRules::Make(const std::string& suffix, const std::string& type, Effect effect,
                        RecommendedAction action, std::string reason) const {
  Finding f;
  f.key = key_prefix_ + suffix;
  f.condition.type = type;
  f.condition.effect = effect;
  f.condition.scope = Scope::kNode;
  f.condition.action = action;
  f.condition.reason = std::move(reason);
  return f;
}

void PortRules::OnSample(const IbPortSample& s, const Thresholds& th, RuleOutput* out) {
  if (s.at < last_at_) return;
  last_at_ = s.at;
  CheckState(s, out);
  for (const auto& [name, reading] : s.counters) CheckCounter(name, reading, s.at, th, out);
}

void PortRules::CheckState(const IbPortSample& s, RuleOutput* out) const {
  if (s.state.empty()) return;  // not reported: no verdict
  if (s.state.find("ACTIVE") != std::string::npos) {
    out->Clear(Scope::kNode, key_prefix_ + "down");
    return;
  }
  std::string phys = s.phys_state.empty() ? "" : " (physical state " + s.phys_state + ")";
  out->Raise(Make("down", "ib_port_down", Effect::kDrain, A::kDrainNodeAndInspectFabric,
                  "InfiniBand " + name_ + " is " + s.state + phys +
                      ", not ACTIVE: the node is off its fabric"));
}

void PortRules::CheckCounter(const std::string& name, uint64_t reading, Time t,
                             const Thresholds& th, RuleOutput* out) {
  auto it = tracks_.find(name);
  if (it == tracks_.end()) {
    bool known = false;
    for (const IbCounterRule& r : kIbRules) known |= r.counter == name;
    if (!known) return;
    Duration retention = name == "symbol_error" ? kHour : kMinute;
    it = tracks_.emplace(name, CounterTrack(retention)).first;
  }
  CounterTrack& track = it->second;
  if (!track.Add(t, reading)) return;

  uint64_t saturated = SaturationOf(name);
  if (reading == saturated) {
    Finding f = Make(name + "_saturated", "ib_counter_saturated", Effect::kNone, A::kWatch,
                     "InfiniBand " + name_ + ": " + name + " is stuck at its maximum " +
                         std::to_string(saturated) + "; clear the port counters to see new errors");
    out->Raise(std::move(f));
  } else {
    out->Clear(Scope::kNode, key_prefix_ + name + "_saturated");
  }

  for (const IbCounterRule& r : kIbRules) {
    if (r.counter != name) continue;
    std::string type = "ib_" + name;
    if (r.limit == nullptr) {
      if (track.last_increase() == 0) continue;
      Finding f = Make(name, type, Effect::kDrain, A::kDrainNodeAndInspectFabric,
                       "InfiniBand " + name_ + ": " + name + " rose by " +
                           std::to_string(track.last_increase()) + " to " +
                           std::to_string(reading) + " (any increase is fatal)");
      f.clearing = Clearing::kOnRemediation;
      out->Raise(std::move(f));
      continue;
    }
    double limit = th.*(r.limit);
    double count = track.InWindow(r.window);
    if (count <= limit) continue;
    Effect effect = r.fatal_rate ? Effect::kDrain : Effect::kDegrade;
    Finding f = Make(name + std::string(r.suffix), type, effect,
                     r.fatal_rate ? A::kDrainNodeAndInspectFabric : A::kInspectHardware,
                     "InfiniBand " + name_ + ": " + Count(count) + " " + name + " in the last " +
                         FormatDuration(r.window) + " (limit " + Count(limit) + "/" +
                         WindowName(r.window) + ")");
    // A fatal error rate means a bad cable or transceiver: it stays until someone fixes it.
    f.clearing = r.fatal_rate ? Clearing::kOnRemediation : Clearing::kAfterQuiet;
    f.quiet = th.rate_quiet;
    out->Raise(std::move(f));
  }
}

std::vector<std::string> ConfigDrift(const ConfigFacts& actual, const ConfigFacts& expected) {
  std::vector<std::string> out;
  auto check = [&](std::string_view what, const std::string& have, const std::string& want) {
    if (want.empty() || have.empty() || have == want) return;
    out.push_back(std::string(what) + " " + have + ", expected " + want);
  };
  check("driver", actual.driver, expected.driver);
  check("CUDA", actual.cuda, expected.cuda);
  check("kernel", actual.kernel, expected.kernel);
  check("OFED", actual.ofed, expected.ofed);
  return out;
}

}  // namespace hangar::health
