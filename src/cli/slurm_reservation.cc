// scontrol create|delete|show reservation, Slurm's form, over Hangar's reservations
// (/v1/reservations, docs/reservations.md).
#include "cli/slurm_reservation.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>

#include "cli/slurm_common.h"
#include "cluster/hostlist.h"

namespace hangar::cli::slurm {
namespace {

// "now", "now+30", "now+2hours", "2027-01-04T10:00[:00]", "2027-01-04" (read as UTC).
StatusOr<Time> SlurmTime(const std::string& key, std::string v, Time now) {
  const std::string lower = Lower(v);
  if (lower.rfind("now", 0) == 0) {
    if (lower == "now") return now;
    if (lower[3] != '+') return Status::InvalidArgument(key + "=" + v + " is not a time");
    std::string n = lower.substr(4);
    size_t digits = 0;
    while (digits < n.size() && std::isdigit(static_cast<unsigned char>(n[digits]))) ++digits;
    if (digits == 0) return Status::InvalidArgument(key + "=" + v + " is not a time");
    const int64_t count = std::stoll(n.substr(0, digits));
    const std::string unit = n.substr(digits);
    Duration per = kMinute;  // Slurm's default unit here
    if (unit.rfind("sec", 0) == 0) per = kSecond;
    if (unit.rfind("hour", 0) == 0) per = kHour;
    if (unit.rfind("day", 0) == 0) per = kDay;
    if (unit.rfind("week", 0) == 0) per = 7 * kDay;
    if (!unit.empty() && unit.rfind("min", 0) != 0 && per == kMinute) {
      return Status::InvalidArgument(key + "=" + v +
                                     ": the unit is seconds, minutes, hours, days or weeks");
    }
    return now + count * per;
  }
  for (char& c : v) {
    if (c == 'T') c = ' ';
  }
  if (std::count(v.begin(), v.end(), ':') == 1) v += ":00";
  auto t = ParseUtcTimestamp(v);
  if (!t.ok()) {
    return Status::InvalidArgument(key + "=" + v +
                                   " is not a time: write YYYY-MM-DDTHH:MM[:SS] (UTC) or now+N");
  }
  return *t;
}

// Slurm's durations: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
StatusOr<Duration> SlurmDuration(const std::string& v) {
  const std::string lower = Lower(v);
  if (lower == "unlimited" || lower == "infinite") {
    return Status::InvalidArgument("Duration=" + v +
                                   ": a reservation in Hangar ends; give its Duration or EndTime");
  }
  int64_t days = 0;
  std::string rest = v;
  const size_t dash = v.find('-');
  std::vector<int64_t> parts;
  try {
    if (dash != std::string::npos) {
      days = std::stoll(v.substr(0, dash));
      rest = v.substr(dash + 1);
    }
    for (const auto& p : SplitCommas([&] {
           std::string s = rest;
           for (char& c : s) c = c == ':' ? ',' : c;
           return s;
         }())) {
      size_t used = 0;
      parts.push_back(std::stoll(p, &used));
      if (used != p.size()) throw std::invalid_argument(p);
    }
  } catch (const std::exception&) {
    return Status::InvalidArgument("Duration=" + v +
                                   " is not a duration: minutes, HH:MM:SS or D-HH:MM:SS");
  }
  if (parts.empty() || parts.size() > 3)
    return Status::InvalidArgument("Duration=" + v + " is not a duration");
  Duration d = days * kDay;
  if (dash != std::string::npos) {  // D-HH[:MM[:SS]]
    const Duration units[] = {kHour, kMinute, kSecond};
    for (size_t i = 0; i < parts.size(); ++i) d += parts[i] * units[i];
  } else if (parts.size() == 1) {
    d += parts[0] * kMinute;
  } else if (parts.size() == 2) {
    d += parts[0] * kMinute + parts[1] * kSecond;
  } else {
    d += parts[0] * kHour + parts[1] * kMinute + parts[2] * kSecond;
  }
  if (d <= 0) return Status::InvalidArgument("Duration=" + v + " must be longer than nothing");
  return d;
}

std::string Lists(const nlohmann::json& list) {
  std::string out;
  for (const auto& v : list) out += (out.empty() ? "" : ",") + v.get<std::string>();
  return out.empty() ? "(null)" : out;
}

}  // namespace

StatusOr<nlohmann::json> ReservationFromScontrol(const std::vector<std::string>& pairs, Time now) {
  std::map<std::string, std::string> kv;
  for (const std::string& p : pairs) {
    const size_t eq = p.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("'" + p + "' is not KEY=VALUE");
    }
    kv[Lower(p.substr(0, eq))] = p.substr(eq + 1);
  }
  static const std::set<std::string> known = {
      "reservationname", "reservation", "starttime", "endtime", "duration",     "nodes",
      "nodecnt",         "users",       "accounts",  "flags",   "partitionname"};
  for (const auto& [k, v] : kv) {
    if (!known.count(k)) {
      return Status::InvalidArgument(
          "hangar's scontrol create reservation does not take " + k +
          "=; it takes ReservationName, StartTime, EndTime or Duration, Nodes or NodeCnt, Users, "
          "Accounts, Flags=MAINT and PartitionName");
    }
  }
  nlohmann::json body;
  body["name"] = kv.count("reservationname") ? kv["reservationname"] : kv["reservation"];
  if (body["name"].get<std::string>().empty())
    return Status::InvalidArgument("give the reservation a name: ReservationName=NAME");
  if (!kv.count("starttime")) return Status::InvalidArgument("give StartTime= (or now)");
  HANGAR_ASSIGN_OR_RETURN(Time start, SlurmTime("StartTime", kv["starttime"], now));
  body["start"] = FormatUtcTimestamp(start);
  if (kv.count("endtime") == kv.count("duration"))
    return Status::InvalidArgument("give EndTime= or Duration= (one of them)");
  if (kv.count("endtime")) {
    HANGAR_ASSIGN_OR_RETURN(Time end, SlurmTime("EndTime", kv["endtime"], now));
    body["end"] = FormatUtcTimestamp(end);
  } else {
    HANGAR_ASSIGN_OR_RETURN(Duration d, SlurmDuration(kv["duration"]));
    body["end"] = FormatUtcTimestamp(start + d);  // exact, where a duration's text may round
  }
  if (kv.count("nodes") == kv.count("nodecnt"))
    return Status::InvalidArgument("give Nodes= (a host list) or NodeCnt= (one of them)");
  if (kv.count("nodes")) {
    if (Lower(kv["nodes"]) == "all")
      return Status::InvalidArgument("Nodes=ALL: name the nodes (node-[1-16]) or give NodeCnt=");
    body["nodes"] = kv["nodes"];
  } else {
    try {
      body["count"] = std::stoi(kv["nodecnt"]);
    } catch (const std::exception&) {
      return Status::InvalidArgument("NodeCnt=" + kv["nodecnt"] + " is not a number of nodes");
    }
    // In Hangar the count is picked under one leaf switch; PartitionName= does not narrow it.
    body["selector"] = "all";
  }
  bool maintenance = false;
  for (const std::string& f : SplitCommas(kv["flags"])) {
    const std::string flag = Lower(f);
    if (flag == "maint") {
      maintenance = true;
    } else if (flag != "ignore_jobs") {
      return Status::InvalidArgument("Flags=" + f +
                                     ": hangar's reservations take MAINT (and IGNORE_JOBS, "
                                     "which they do anyway)");
    }
  }
  body["maintenance"] = maintenance;
  // A MAINT reservation admits nobody's jobs in Hangar: Slurm's customary Users=root says nothing.
  if (!maintenance) {
    body["users"] = SplitCommas(kv["users"]);
    body["queues"] = SplitCommas(kv["accounts"]);
  }
  return body;
}

int ScontrolReservation(ApiClient* api, const std::vector<std::string>& words, Time now) {
  const std::string verb = Lower(words[0]);
  const std::string what = words.size() > 1 ? Lower(words[1]) : "";
  if (verb == "create" && (what == "reservation" || what == "res")) {
    auto body =
        ReservationFromScontrol(std::vector<std::string>(words.begin() + 2, words.end()), now);
    if (!body.ok()) return Fail("scontrol", body.status());
    auto r = api->Post("/v1/reservations", body->dump());
    if (!r.ok()) return Fail("scontrol", r.status());
    std::printf("Reservation created: %s\n", r->value("name", "").c_str());
    return 0;
  }
  if (verb == "delete" && what.rfind("reservationname=", 0) == 0) {
    auto r = api->Delete("/v1/reservations/" + words[1].substr(words[1].find('=') + 1));
    if (!r.ok()) return Fail("scontrol", r.status());
    return 0;
  }
  if (verb == "show" && (what == "reservation" || what == "reservations" || what == "res")) {
    auto r = api->Get("/v1/reservations");
    if (!r.ok()) return Fail("scontrol", r.status());
    const std::string only = words.size() > 2 ? words[2] : "";
    int shown = 0;
    for (const auto& res : r->value("reservations", nlohmann::json::array())) {
      if (!only.empty() && res.value("name", "") != only) continue;
      ++shown;
      std::printf(
          "ReservationName=%s StartTime=%s EndTime=%s Duration=%s\n   Nodes=%s NodeCnt=%zu "
          "Users=%s Accounts=%s Flags=%s State=%s\n\n",
          res.value("name", "").c_str(), res.value("start", "").c_str(),
          res.value("end", "").c_str(),
          FormatDuration(res.value("end_ms", Time{0}) - res.value("start_ms", Time{0})).c_str(),
          cluster::CompressHostList(res.value("nodes", std::vector<std::string>{})).c_str(),
          res.value("nodes", nlohmann::json::array()).size(),
          Lists(res.value("users", nlohmann::json::array())).c_str(),
          Lists(res.value("queues", nlohmann::json::array())).c_str(),
          res.value("maintenance", false) ? "MAINT" : "(null)",
          res.value("state", "") == "open" ? "ACTIVE" : "INACTIVE");
    }
    if (shown == 0 && only.empty()) std::printf("No reservations in the system\n");
    if (shown == 0 && !only.empty()) {
      std::printf("Reservation %s not found\n", only.c_str());
      return 1;
    }
    return 0;
  }
  return -1;
}

}  // namespace hangar::cli::slurm
