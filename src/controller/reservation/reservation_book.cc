#include "controller/reservation/reservation_book.h"

#include <algorithm>
#include <regex>

#include "cluster/hostlist.h"

namespace hangar::controller::reservation {

namespace {

constexpr const char* kExample =
    "{\"name\": \"maint1\", \"nodes\": \"node-[1-2]\", \"start\": \"2027-01-04T10:00:00Z\", "
    "\"duration\": \"1h\", "
    "\"maintenance\": true}";

Status Bad(const std::string& what) {
  return Status::InvalidArgument(what + "; send JSON like " + kExample);
}

// "2027-01-04T10:00:00Z", "2027-01-04 10:00:00" or "2027-01-04T10:00" (UTC).
StatusOr<Time> ParseInstant(std::string text, const std::string& field) {
  if (!text.empty() && (text.back() == 'Z' || text.back() == 'z')) text.pop_back();
  if (std::count(text.begin(), text.end(), ':') == 1) text += ":00";
  auto t = ParseUtcTimestamp(text);
  if (!t.ok()) {
    return Status::InvalidArgument(field + " '" + text +
                                   "' is not a time: write it in UTC, like 2027-01-04T10:00:00Z");
  }
  return *t;
}

StatusOr<std::vector<std::string>> Strings(const nlohmann::json& body, const char* key) {
  std::vector<std::string> out;
  if (!body.contains(key) || body[key].is_null()) return out;
  const nlohmann::json& v = body[key];
  if (v.is_string()) {
    if (v.get<std::string>().empty()) return out;
    return cluster::ExpandHostList(v.get<std::string>());
  }
  if (!v.is_array())
    return Bad(std::string(key) + " must be a list of names or a comma-separated string");
  for (const auto& e : v) {
    if (!e.is_string() || e.get<std::string>().empty())
      return Bad(std::string(key) + " must hold names (strings)");
    out.push_back(e.get<std::string>());
  }
  return out;
}

StatusOr<std::vector<uint32_t>> NodeIndices(const std::vector<std::string>& names,
                                            const cluster::Topology& t) {
  std::vector<uint32_t> out;
  for (const auto& n : names) {
    auto idx = t.FindNode(n);
    if (!idx)
      return Status::NotFound("node '" + n + "' is not in this cluster; `hangar nodes` lists them");
    out.push_back(*idx);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string Field(const nlohmann::json& body, const char* key) {
  return body.contains(key) && body[key].is_string() ? body[key].get<std::string>() : "";
}

std::vector<std::string> NodeNames(const std::vector<uint32_t>& nodes, const cluster::Topology& t) {
  std::vector<std::string> out;
  for (uint32_t n : nodes) out.push_back(t.nodes()[n].name);
  return out;
}

bool Shares(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] == b[j]) return true;
    a[i] < b[j] ? ++i : ++j;
  }
  return false;
}

}  // namespace

StatusOr<Reservation> ParseRequest(const nlohmann::json& body, const cluster::Topology& topology,
                                   const ReservationBook* book) {
  if (!body.is_object()) return Bad("the body must be a JSON object");
  static const std::regex name_re("^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$");
  Reservation r;
  r.name = Field(body, "name");
  if (!std::regex_match(r.name, name_re)) {
    return Bad(
        "name must be 1-63 letters, digits, '.', '_' or '-' (starting with a letter or digit)");
  }
  HANGAR_ASSIGN_OR_RETURN(auto names, Strings(body, "nodes"));
  const bool by_count = body.contains("count");
  if (by_count == !names.empty())
    return Bad("give the nodes, or a count of nodes to pick (and a selector), one of them");
  if (!by_count) {
    HANGAR_ASSIGN_OR_RETURN(r.nodes, NodeIndices(names, topology));
  }
  const std::string start = Field(body, "start"), end = Field(body, "end"),
                    duration = Field(body, "duration");
  if (start.empty()) return Bad("start is missing");
  HANGAR_ASSIGN_OR_RETURN(r.start, ParseInstant(start, "start"));
  if (end.empty() == duration.empty())
    return Bad("give the window's end or its duration (one of them)");
  if (!end.empty()) {
    HANGAR_ASSIGN_OR_RETURN(r.end, ParseInstant(end, "end"));
  } else {
    auto d = ParseDuration(duration);
    if (!d.ok() || *d <= 0)
      return Bad("duration '" + duration + "' is not a duration such as 30m, 4h or 2d");
    r.end = r.start + *d;
  }
  if (by_count) {
    if (!body["count"].is_number_integer() || body["count"].get<int64_t>() < 1 ||
        body["count"].get<int64_t>() > static_cast<int64_t>(topology.nodes().size())) {
      return Bad("count must be how many nodes to hold (1-" +
                 std::to_string(topology.nodes().size()) + ")");
    }
    const std::string selector = Field(body, "selector").empty() ? "all" : Field(body, "selector");
    if (!book) return Status::Internal("a reservation by count needs the book to pick its nodes");
    HANGAR_ASSIGN_OR_RETURN(
        r.nodes, book->PickUnderOneLeaf(selector, body["count"].get<int>(), r.start, r.end));
  }
  HANGAR_ASSIGN_OR_RETURN(r.users, Strings(body, "users"));
  HANGAR_ASSIGN_OR_RETURN(r.queues, Strings(body, "queues"));
  if (body.contains("maintenance") && !body["maintenance"].is_boolean())
    return Bad("maintenance must be true or false");
  r.maintenance = body.value("maintenance", false);
  if (r.maintenance && (!r.users.empty() || !r.queues.empty())) {
    return Status::InvalidArgument(
        "a maintenance window takes its nodes out of service and admits no jobs: leave out users "
        "and queues, or drop "
        "maintenance for a reservation that jobs run in");
  }
  if (!r.maintenance && r.users.empty() && r.queues.empty()) {
    return Status::InvalidArgument(
        "say who may run in the reservation (users or queues), or make it a maintenance window "
        "(maintenance: true)");
  }
  return r;
}

nlohmann::json ToJson(const Reservation& r, const cluster::Topology& topology) {
  return {{"name", r.name},
          {"nodes", NodeNames(r.nodes, topology)},
          {"start_ms", r.start},
          {"end_ms", r.end},
          {"start", FormatUtcTimestamp(r.start)},
          {"end", FormatUtcTimestamp(r.end)},
          {"users", r.users},
          {"queues", r.queues},
          {"maintenance", r.maintenance},
          {"created_by", r.created_by},
          {"created_ms", r.created},
          {"opened", r.opened},
          {"drained", NodeNames(r.drained, topology)}};
}

StatusOr<Reservation> FromStored(const nlohmann::json& j, const cluster::Topology& topology) {
  try {
    Reservation r;
    r.name = j.at("name").get<std::string>();
    // A node no longer in cluster.yaml is dropped: the reservation holds the rest.
    auto known = [&](const char* key) {
      std::vector<uint32_t> out;
      for (const auto& n : j.value(key, std::vector<std::string>{})) {
        if (auto idx = topology.FindNode(n)) out.push_back(*idx);
      }
      std::sort(out.begin(), out.end());
      return out;
    };
    r.nodes = known("nodes");
    r.drained = known("drained");
    r.start = j.at("start_ms").get<Time>();
    r.end = j.at("end_ms").get<Time>();
    r.users = j.value("users", std::vector<std::string>{});
    r.queues = j.value("queues", std::vector<std::string>{});
    r.maintenance = j.value("maintenance", false);
    r.created_by = j.value("created_by", "");
    r.created = j.value("created_ms", Time{0});
    r.opened = j.value("opened", false);
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Status::Internal(std::string("a stored reservation is damaged (") + e.what() +
                            "); delete it and create it again");
  }
}

Status ReservationBook::Add(Reservation r, Time now) {
  if (r.end <= r.start) {
    return Status::InvalidArgument("the window of reservation '" + r.name + "' ends (" +
                                   FormatUtcTimestamp(r.end) + ") before it starts (" +
                                   FormatUtcTimestamp(r.start) + ")");
  }
  if (r.end <= now) {
    return Status::InvalidArgument("the window of reservation '" + r.name + "' ended at " +
                                   FormatUtcTimestamp(r.end) +
                                   ", before now: give a window in the future");
  }
  if (by_name_.count(r.name)) {
    return Status::AlreadyExists("reservation '" + r.name +
                                 "' exists; delete it first (`hangar reservation delete " + r.name +
                                 "`) or pick another name");
  }
  for (const auto& [name, other] : by_name_) {
    if (other.start < r.end && r.start < other.end && Shares(other.nodes, r.nodes)) {
      return Status::FailedPrecondition(
          "reservation '" + r.name + "' overlaps reservation '" + name + "' (" +
          FormatUtcTimestamp(other.start) + " to " + FormatUtcTimestamp(other.end) +
          ") on shared nodes; move its window or leave those nodes out");
    }
  }
  by_name_.emplace(r.name, std::move(r));
  Rebuild();
  return Status::Ok();
}

void ReservationBook::Restore(Reservation r) {
  std::string name = r.name;
  by_name_[name] = std::move(r);
  Rebuild();
}

Status ReservationBook::Remove(const std::string& name) {
  if (by_name_.erase(name) == 0) {
    return Status::NotFound("reservation '" + name +
                            "' does not exist; `hangar reservation list` shows them");
  }
  Rebuild();
  return Status::Ok();
}

const Reservation* ReservationBook::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

Reservation* ReservationBook::FindMutable(const std::string& name) {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

Status ReservationBook::MayUse(const std::string& name, const std::string& user,
                               const std::string& queue) const {
  const Reservation* r = Find(name);
  if (!r)
    return Status::NotFound("reservation '" + name +
                            "' does not exist; `hangar reservation list` shows them");
  if (r->maintenance) {
    return Status::PermissionDenied(
        "reservation '" + name +
        "' is a maintenance window: its nodes are out of service and take no jobs");
  }
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  if (has(r->users, user) || has(r->queues, queue)) return Status::Ok();
  return Status::PermissionDenied(
      "user '" + user + "' (queue '" + queue + "') may not run in reservation '" + name +
      "'; it admits users " + nlohmann::json(r->users).dump() + " and queues " +
      nlohmann::json(r->queues).dump() + ": ask its owner (" +
      (r->created_by.empty() ? std::string("an admin") : r->created_by) + ") to add you");
}

int32_t ReservationBook::WindowOf(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : static_cast<int32_t>(std::distance(by_name_.begin(), it));
}

std::vector<std::string> ReservationBook::Ended(Time now) const {
  std::vector<std::string> out;
  for (const auto& [name, r] : by_name_) {
    if (r.end <= now) out.push_back(name);
  }
  return out;
}

StatusOr<std::vector<uint32_t>> ReservationBook::PickUnderOneLeaf(const std::string& selector,
                                                                  int count, Time start,
                                                                  Time end) const {
  const cluster::Topology& t = *topology_;
  uint32_t first_leaf = 0, end_leaf = static_cast<uint32_t>(t.leaves().size());
  bool known = selector == "all";
  for (uint32_t l = 0; l < t.leaves().size() && !known; ++l) {
    if (t.leaves()[l].name == selector) first_leaf = l, end_leaf = l + 1, known = true;
  }
  for (const auto& s : t.spines()) {
    if (known) break;
    if (s.name == selector) first_leaf = s.first_child, end_leaf = s.end_child, known = true;
  }
  if (!known) {
    return Status::NotFound("selector '" + selector +
                            "' is not a leaf or spine switch of this cluster (or all); "
                            "`hangar topology` shows them");
  }
  std::vector<uint8_t> taken(t.nodes().size(), 0);
  for (const auto& [name, r] : by_name_) {
    if (r.start < end && start < r.end) {
      for (uint32_t n : r.nodes) taken[n] = 1;
    }
  }
  size_t most = 0;
  for (uint32_t l = first_leaf; l < end_leaf; ++l) {
    std::vector<uint32_t> free;
    for (uint32_t n = t.leaves()[l].first_node; n < t.leaves()[l].end_node; ++n) {
      if (!taken[n]) free.push_back(n);
    }
    if (free.size() >= static_cast<size_t>(count)) {
      free.resize(static_cast<size_t>(count));
      return free;
    }
    most = std::max(most, free.size());
  }
  return Status::FailedPrecondition(
      "no leaf switch under " + selector + " has " + std::to_string(count) +
      " nodes free of other reservations from " + FormatUtcTimestamp(start) + " to " +
      FormatUtcTimestamp(end) + " (the most any has is " + std::to_string(most) +
      "); ask for fewer, another window, or name the nodes");
}

void ReservationBook::Rebuild() {
  windows_.clear();
  for (const auto& [name, r] : by_name_) windows_.push_back({name, r.start, r.end, r.nodes});
}

}  // namespace hangar::controller::reservation
