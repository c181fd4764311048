#include "controller/maintenance/rolling_maintenance.h"

#include <algorithm>

#include "cluster/hostlist.h"

namespace hangar::controller::maintenance {

namespace {

constexpr const char* kExample =
    "{\"nodes\": \"node-[1-16]\", \"batch\": 4, \"run\": \"/opt/fw/update.sh\", \"timeout\": "
    "\"1h\"}";

Status Bad(const std::string& what) {
  return Status::InvalidArgument(what + "; send JSON like " + kExample);
}

// The nodes a selector names, in the cluster's order.
StatusOr<std::vector<std::string>> SelectNodes(const std::string& selector,
                                               const cluster::Topology& t) {
  std::vector<uint32_t> idx;
  auto domain = [&](const std::vector<cluster::DomainInfo>& level) {
    for (const auto& d : level) {
      if (d.name != selector) continue;
      for (uint32_t n = d.first_node; n < d.end_node; ++n) idx.push_back(n);
      return true;
    }
    return false;
  };
  if (selector == "all") {
    for (uint32_t n = 0; n < t.nodes().size(); ++n) idx.push_back(n);
  } else if (!domain(t.leaves()) && !domain(t.spines())) {
    auto names = cluster::ExpandHostList(selector);
    if (!names.ok()) return Bad("nodes: " + names.status().message());
    for (const auto& name : *names) {
      auto n = t.FindNode(name);
      if (!n) {
        return Status::NotFound("node '" + name +
                                "' is not in this cluster; `hangar nodes` lists them (or name a "
                                "leaf or spine switch, or all)");
      }
      idx.push_back(*n);
    }
  }
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  std::vector<std::string> out;
  for (uint32_t n : idx) out.push_back(t.nodes()[n].name);
  return out;
}

std::string LastLine(const std::string& text) {
  std::string s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  const size_t nl = s.rfind('\n');
  s = nl == std::string::npos ? s : s.substr(nl + 1);
  return s.size() > 200 ? s.substr(s.size() - 200) : s;
}

// Why a command's outcome is a failure ("" when it succeeded).
std::string FailureOf(const CommandOutcome& o, Duration timeout) {
  if (o.refused) return o.error.empty() ? "its agent refused the command" : o.error;
  std::string why;
  if (!o.error.empty()) {
    why = o.error;
  } else if (o.timed_out) {
    why = "its command ran past its timeout (" + FormatDuration(timeout) + ") and was killed";
  } else if (o.signal != 0) {
    why = "its command was killed by signal " + std::to_string(o.signal);
  } else if (o.exit_code != 0) {
    why = "its command exited with status " + std::to_string(o.exit_code);
  } else {
    return "";
  }
  const std::string last = LastLine(o.output);
  return last.empty() ? why : why + " (last line: " + last + ")";
}

}  // namespace

std::string_view StepName(Step s) {
  switch (s) {
    case Step::kWaiting:
      return "waiting";
    case Step::kDraining:
      return "draining";
    case Step::kRunning:
      return "running";
    case Step::kValidating:
      return "validating";
    case Step::kDone:
      return "done";
    case Step::kFailed:
      return "failed";
    case Step::kSkipped:
      return "skipped";
  }
  return "waiting";
}

std::string_view RunStateName(RunState s) {
  switch (s) {
    case RunState::kRunning:
      return "running";
    case RunState::kStopping:
      return "stopping";
    case RunState::kSucceeded:
      return "succeeded";
    case RunState::kFailed:
      return "failed";
    case RunState::kCancelled:
      return "cancelled";
  }
  return "running";
}

int Run::batches() const { return nodes.empty() ? 0 : nodes.back().batch + 1; }

bool Run::over() const {
  return state == RunState::kSucceeded || state == RunState::kFailed ||
         state == RunState::kCancelled;
}

std::string Run::CommandId(const std::string& node) const {
  return std::to_string(id) + "/" + node;
}

bool ParseCommandId(const std::string& id, uint64_t* run, std::string* node) {
  const size_t slash = id.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= id.size()) return false;
  try {
    size_t used = 0;
    *run = std::stoull(id.substr(0, slash), &used);
    if (used != slash) return false;
  } catch (const std::exception&) {
    return false;
  }
  *node = id.substr(slash + 1);
  return true;
}

StatusOr<Run> ParseRequest(const nlohmann::json& body, const cluster::Topology& topology) {
  if (!body.is_object()) return Bad("the body must be a JSON object");
  Run r;
  if (!body.contains("nodes") || !body["nodes"].is_string() ||
      body["nodes"].get<std::string>().empty()) {
    return Bad("nodes must name the nodes: a host list, a leaf or spine switch, or all");
  }
  r.selector = body["nodes"].get<std::string>();
  r.command = body.contains("run") && body["run"].is_string() ? body["run"].get<std::string>() : "";
  if (r.command.empty()) return Bad("run must hold the command to run on each node");
  if (!body.contains("batch") || !body["batch"].is_number_integer() ||
      body["batch"].get<int64_t>() < 1 || body["batch"].get<int64_t>() > 10'000) {
    return Bad("batch must be how many nodes go out of service at once (1-10000)");
  }
  r.batch_size = body["batch"].get<int>();
  if (body.contains("timeout")) {
    auto t = body["timeout"].is_string() ? ParseDuration(body["timeout"].get<std::string>())
                                         : StatusOr<Duration>(Status::InvalidArgument(""));
    if (!t.ok() || *t <= 0) return Bad("timeout must be a duration such as 30m or 2h");
    r.timeout = *t;
  }
  if (body.contains("return_timeout")) {
    auto t = body["return_timeout"].is_string()
                 ? ParseDuration(body["return_timeout"].get<std::string>())
                 : StatusOr<Duration>(Status::InvalidArgument(""));
    if (!t.ok() || *t <= 0) return Bad("return_timeout must be a duration such as 30m or 2h");
    r.return_timeout = *t;
  }
  HANGAR_ASSIGN_OR_RETURN(auto names, SelectNodes(r.selector, topology));
  if (names.empty()) return Bad("nodes '" + r.selector + "' names no node");
  for (size_t i = 0; i < names.size(); ++i) {
    NodeRun n;
    n.node = names[i];
    n.batch = static_cast<int>(i) / r.batch_size;
    r.nodes.push_back(std::move(n));
  }
  return r;
}

nlohmann::json ToJson(const Run& r) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const NodeRun& n : r.nodes) {
    nodes.push_back({{"node", n.node},
                     {"batch", n.batch + 1},
                     {"step", std::string(StepName(n.step))},
                     {"drained_by_run", n.drained_by_run},
                     {"validated", n.validated},
                     {"since_ms", n.since},
                     {"exit_code", n.exit_code},
                     {"signal", n.signal},
                     {"timed_out", n.timed_out},
                     {"took_ms", n.took},
                     {"output", n.output},
                     {"error", n.error}});
  }
  return {{"id", r.id},
          {"nodes_selector", r.selector},
          {"command", r.command},
          {"created_by", r.created_by},
          {"batch_size", r.batch_size},
          {"timeout_ms", r.timeout},
          {"return_timeout_ms", r.return_timeout},
          {"created_ms", r.created},
          {"ended_ms", r.ended},
          {"created", FormatUtcTimestamp(r.created)},
          {"state", std::string(RunStateName(r.state))},
          {"failure", r.failure},
          {"batch", r.batch + 1},
          {"batches", r.batches()},
          {"nodes", nodes}};
}

StatusOr<Run> FromJson(const nlohmann::json& j) {
  try {
    Run r;
    r.id = j.at("id").get<uint64_t>();
    r.selector = j.value("nodes_selector", "");
    r.command = j.at("command").get<std::string>();
    r.created_by = j.value("created_by", "");
    r.batch_size = j.value("batch_size", 1);
    r.timeout = j.value("timeout_ms", kHour);
    r.return_timeout = j.value("return_timeout_ms", Duration{30 * kMinute});
    r.created = j.value("created_ms", Time{0});
    r.ended = j.value("ended_ms", Time{0});
    const std::string state = j.value("state", "running");
    for (RunState s : {RunState::kRunning, RunState::kStopping, RunState::kSucceeded,
                       RunState::kFailed, RunState::kCancelled}) {
      if (RunStateName(s) == state) r.state = s;
    }
    r.failure = j.value("failure", "");
    r.batch = j.value("batch", 1) - 1;
    for (const auto& e : j.at("nodes")) {
      NodeRun n;
      n.node = e.at("node").get<std::string>();
      n.batch = e.value("batch", 1) - 1;
      const std::string step = e.value("step", "waiting");
      for (int s = 0; s <= static_cast<int>(Step::kSkipped); ++s) {
        if (StepName(static_cast<Step>(s)) == step) n.step = static_cast<Step>(s);
      }
      n.drained_by_run = e.value("drained_by_run", false);
      n.validated = e.value("validated", false);
      n.since = e.value("since_ms", Time{0});
      n.exit_code = e.value("exit_code", 0);
      n.signal = e.value("signal", 0);
      n.timed_out = e.value("timed_out", false);
      n.took = e.value("took_ms", Duration{0});
      n.output = e.value("output", "");
      n.error = e.value("error", "");
      r.nodes.push_back(std::move(n));
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Status::Internal(std::string("a stored maintenance run is damaged (") + e.what() + ")");
  }
}

std::string RollingMaintenance::DrainReason(const Run& r) {
  return "maintenance run " + std::to_string(r.id) + " (`hangar maintain status " +
         std::to_string(r.id) + "`)";
}

StatusOr<const Run*> RollingMaintenance::Start(Run r, Time now) {
  if (const Run* a = Active()) {
    return Status::FailedPrecondition(
        "maintenance run " + std::to_string(a->id) + " is " + std::string(RunStateName(a->state)) +
        " (batch " + std::to_string(a->batch + 1) + " of " + std::to_string(a->batches()) +
        "): wait for it (`hangar maintain status`) or cancel it (`hangar maintain cancel " +
        std::to_string(a->id) + "`) first");
  }
  r.id = next_id_++;
  r.created = now;
  r.state = RunState::kRunning;
  r.batch = 0;
  const uint64_t id = r.id;
  runs_[id] = std::move(r);
  Prune();
  return &runs_[id];
}

void RollingMaintenance::Restore(Run r) {
  next_id_ = std::max(next_id_, r.id + 1);
  const uint64_t id = r.id;
  runs_[id] = std::move(r);
  // The resend clock is not stored: every command still running goes out again at once.
  sent_.clear();
  resumed_ = true;
}

const Run* RollingMaintenance::Find(uint64_t id) const {
  auto it = runs_.find(id);
  return it == runs_.end() ? nullptr : &it->second;
}

const Run* RollingMaintenance::Latest() const {
  return runs_.empty() ? nullptr : &runs_.rbegin()->second;
}

const Run* RollingMaintenance::Active() const {
  for (const auto& [id, r] : runs_) {
    if (!r.over()) return &r;
  }
  return nullptr;
}

Run* RollingMaintenance::ActiveMutable() { return const_cast<Run*>(Active()); }

std::vector<uint64_t> RollingMaintenance::Forgotten() {
  std::vector<uint64_t> out;
  out.swap(forgotten_);
  return out;
}

void RollingMaintenance::Prune() {
  while (runs_.size() > kKeepRuns && runs_.begin()->second.over()) {
    forgotten_.push_back(runs_.begin()->first);
    runs_.erase(runs_.begin());
  }
}

Actions RollingMaintenance::Advance(const FactsFn& facts, Time now) {
  Actions a;
  const bool resumed = resumed_;
  resumed_ = false;
  Run* r = ActiveMutable();
  if (!r) return a;
  bool waiting = r->state == RunState::kRunning;
  for (const NodeRun& n : r->nodes) {
    if (n.batch == r->batch) waiting = waiting && n.step == Step::kWaiting;
  }
  if (waiting) StartBatch(*r, facts, now, &a);
  for (NodeRun& n : r->nodes) {
    if (n.batch != r->batch) continue;
    const NodeFacts f = facts(n.node);
    if (resumed && n.step == Step::kValidating && f.healthy_after_restore && !n.validated) {
      n.validated = true;  // it passed before the restart: only a validation makes it healthy
      a.changed = true;
    }
    AdvanceNode(*r, n, f, now, &a);
  }
  FinishBatchIfDone(*r, now, &a, &facts);
  return a;
}

void RollingMaintenance::StartBatch(Run& r, const FactsFn& facts, Time now, Actions* a) {
  int count = 0;
  for (NodeRun& n : r.nodes) {
    if (n.batch != r.batch || n.step != Step::kWaiting) continue;
    n.step = Step::kDraining;
    n.since = now;
    // An operator's drain from before stays the operator's.
    n.drained_by_run = !facts(n.node).drained;
    if (n.drained_by_run) a->drain.push_back(n.node);
    ++count;
  }
  a->events.push_back("batch " + std::to_string(r.batch + 1) + " of " +
                      std::to_string(r.batches()) + ": " + std::to_string(count) +
                      " node(s) going out of service");
  a->changed = true;
}

void RollingMaintenance::AdvanceNode(Run& r, NodeRun& n, const NodeFacts& f, Time now, Actions* a) {
  switch (n.step) {
    case Step::kDraining:
      if (r.state != RunState::kRunning) {
        // The run stops: this node's command never ran; it goes back as it came.
        n.step = Step::kSkipped;
        n.since = now;
        n.error = "not run: the run stopped at " + r.failure;
        if (n.drained_by_run) a->undrain.push_back(n.node);
        a->changed = true;
        return;
      }
      if (!f.has_work && f.connected) {
        n.step = Step::kRunning;
        n.since = now;
        a->send.push_back(n.node);
        sent_[r.CommandId(n.node)] = now;
        a->events.push_back(n.node + ": no work left; its command starts");
        a->changed = true;
      }
      return;
    case Step::kRunning: {
      if (now - n.since >= r.timeout + r.return_timeout) {
        Fail(r, n,
             std::string("its agent did not answer within ") +
                 FormatDuration(r.timeout + r.return_timeout) +
                 " of the command's start (its timeout and the return timeout" +
                 (f.connected ? ")" : "; the agent is not connected)") +
                 "; look at the node, then `hangar undrain` it",
             now, a);
        return;
      }
      auto it = sent_.find(r.CommandId(n.node));
      if (f.connected && (it == sent_.end() || now - it->second >= kResend)) {
        a->send.push_back(n.node);
        sent_[r.CommandId(n.node)] = now;
      }
      return;
    }
    case Step::kValidating:
      if ((n.validated || !f.validation_required) && f.ready) {
        n.step = Step::kDone;
        n.since = now;
        a->events.push_back(n.node + ": validated, back in service");
        a->changed = true;
      } else if (n.validated && !f.unfit.empty()) {
        Fail(r, n, "its validation after the command failed: " + f.unfit, now, a);
      } else if (now - n.since >= r.return_timeout) {
        Fail(r, n,
             "it did not come back validated and ready within " + FormatDuration(r.return_timeout) +
                 " of its command's end (" +
                 (f.connected ? std::string("its validation has not passed")
                              : std::string("its agent has not reconnected")) +
                 "); look at the node: it takes no work until it passes validation",
             now, a);
      }
      return;
    default:
      return;
  }
}

void RollingMaintenance::Fail(Run& r, NodeRun& n, const std::string& why, Time now, Actions* a) {
  n.step = Step::kFailed;
  n.since = now;
  n.error = why;
  if (r.failure.empty()) r.failure = n.node + ": " + why;
  if (r.state == RunState::kRunning) r.state = RunState::kStopping;
  a->events.push_back(n.node + " failed: " + why + "; the run stops after this batch" +
                      (n.drained_by_run ? ", and the node stays drained" : ""));
  a->changed = true;
}

void RollingMaintenance::FinishBatchIfDone(Run& r, Time now, Actions* a, const FactsFn* facts) {
  for (const NodeRun& n : r.nodes) {
    if (n.batch != r.batch) continue;
    if (n.step != Step::kDone && n.step != Step::kFailed && n.step != Step::kSkipped) return;
  }
  if (r.state == RunState::kStopping) {
    r.state = RunState::kFailed;
    r.ended = now;
    a->events.push_back("failed at " + r.failure);
    a->changed = true;
    return;
  }
  if (r.batch + 1 < r.batches()) {
    if (!facts) return;  // the next Advance starts the next batch
    a->events.push_back("batch " + std::to_string(r.batch + 1) + " of " +
                        std::to_string(r.batches()) + " done");
    ++r.batch;
    StartBatch(r, *facts, now, a);
    return;
  }
  r.state = RunState::kSucceeded;
  r.ended = now;
  a->changed = true;
  a->events.push_back("succeeded: " + std::to_string(r.nodes.size()) + " node(s) in " +
                      std::to_string(r.batches()) + " batch(es)");
}

StatusOr<Actions> RollingMaintenance::OnOutcome(const std::string& node, const std::string& id,
                                                const CommandOutcome& outcome, Time now) {
  Run* r = ActiveMutable();
  NodeRun* n = nullptr;
  if (r) {
    for (NodeRun& e : r->nodes) {
      if (e.node == node && e.batch == r->batch && e.step == Step::kRunning) n = &e;
    }
  }
  if (!n || r->CommandId(node) != id) {
    return Status::NotFound("no maintenance command " + id + " waits for node " + node);
  }
  Actions a;
  n->exit_code = outcome.exit_code;
  n->signal = outcome.signal;
  n->timed_out = outcome.timed_out;
  n->took = outcome.took;
  n->output = outcome.output;
  sent_.erase(id);
  const std::string why = FailureOf(outcome, r->timeout);
  if (!why.empty()) {
    Fail(*r, *n, why, now, &a);
  } else if (n->drained_by_run) {
    n->step = Step::kValidating;
    n->since = now;
    n->validated = false;
    a.undrain.push_back(node);
    a.events.push_back(node + ": its command succeeded; validating before it takes work");
  } else {
    n->step = Step::kDone;
    n->since = now;
    a.events.push_back(node + ": its command succeeded; left drained, as its operator drained it");
  }
  a.changed = true;
  FinishBatchIfDone(*r, now, &a, nullptr);
  return a;
}

void RollingMaintenance::NoteValidation(const std::string& node) {
  Run* r = ActiveMutable();
  if (!r) return;
  for (NodeRun& n : r->nodes) {
    if (n.node == node && n.step == Step::kValidating) n.validated = true;
  }
}

StatusOr<Actions> RollingMaintenance::Cancel(uint64_t id, const std::string& by, Time now) {
  auto it = runs_.find(id);
  if (it == runs_.end()) {
    return Status::NotFound("maintenance run " + std::to_string(id) +
                            " does not exist; `hangar maintain status` shows the latest");
  }
  Run& r = it->second;
  if (r.over()) {
    return Status::FailedPrecondition("maintenance run " + std::to_string(id) + " is over (" +
                                      std::string(RunStateName(r.state)) + ")");
  }
  r.state = RunState::kCancelled;
  r.ended = now;
  if (r.failure.empty()) r.failure = "cancelled by " + by;
  Actions a;
  a.changed = true;
  a.events.push_back("cancelled by " + by +
                     ": its nodes stay as they are (those it drained stay drained until `hangar "
                     "undrain`)");
  return a;
}

}  // namespace hangar::controller::maintenance
