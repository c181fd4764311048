#include "controller/store/backup.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

namespace hangar::controller {
namespace {

using nlohmann::json;

// 1: each job row holds its spec's text. 2: each spec is a row of its own, written once before the
// jobs that refer to it by key. Both are read.
constexpr int kFormat = 3;
constexpr size_t kRowsPerCommit = 10'000;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json ToJson(const JobRow& j) {
  return {{"id", j.id},
          {"name", j.name},
          {"queue", j.queue},
          {"user", j.user},
          {"state", j.state},
          {"spec_key", j.spec_key},
          {"submitted", j.submitted},
          {"started", j.started},
          {"ended", j.ended},
          {"attempt", j.attempt},
          {"restarts", j.restarts},
          {"reason", j.reason},
          {"message", j.message},
          {"placement", j.placement_json},
          {"extra", j.extra_json}};
}

// A job row of either format: format 1 carries the spec's text, format 2 its key, whose text came
// on a spec line before it (`specs`).
JobRow JobFrom(const json& j,
               const std::map<std::string, std::shared_ptr<const std::string>>& specs) {
  JobRow r;
  if (j.contains("spec")) {
    r.SetSpec(j.at("spec").get<std::string>());
  } else {
    r.spec_key = j.at("spec_key").get<std::string>();
    auto it = specs.find(r.spec_key);
    if (it == specs.end())
      throw std::invalid_argument("a job whose spec " + r.spec_key + " has no line before it");
    r.spec = it->second;
  }
  r.id = j.at("id").get<uint64_t>();
  r.name = j.at("name").get<std::string>();
  r.queue = j.at("queue").get<std::string>();
  r.user = j.at("user").get<std::string>();
  r.state = j.at("state").get<std::string>();
  r.submitted = j.at("submitted").get<Time>();
  r.started = j.at("started").get<Time>();
  r.ended = j.at("ended").get<Time>();
  r.attempt = j.at("attempt").get<uint32_t>();
  r.restarts = j.at("restarts").get<uint32_t>();
  r.reason = j.at("reason").get<std::string>();
  r.message = j.at("message").get<std::string>();
  r.placement_json = j.at("placement").get<std::string>();
  r.extra_json = j.at("extra").get<std::string>();
  return r;
}

json ToJson(const AuditRow& a) {
  return {{"time", a.time}, {"user", a.user},     {"role", a.role},     {"method", a.method},
          {"path", a.path}, {"remote", a.remote}, {"status", a.status}, {"message", a.message}};
}

AuditRow AuditFrom(const json& j) {
  return {0,
          j.at("time").get<Time>(),
          j.at("user").get<std::string>(),
          j.at("role").get<std::string>(),
          j.at("method").get<std::string>(),
          j.at("path").get<std::string>(),
          j.at("remote").get<std::string>(),
          j.at("status").get<int>(),
          j.at("message").get<std::string>()};
}

json ToJson(const HistoryRow& h) {
  return {{"time", h.time}, {"step", h.step}, {"gpus", h.gpus},       {"allocated", h.allocated},
          {"busy", h.busy}, {"idle", h.idle}, {"pending", h.pending}, {"running", h.running}};
}

HistoryRow HistoryFrom(const json& j) {
  HistoryRow h;
  h.time = j.at("time").get<Time>();
  h.step = j.at("step").get<Duration>();
  h.gpus = j.at("gpus").get<double>();
  h.allocated = j.at("allocated").get<double>();
  h.busy = j.at("busy").get<double>();
  h.idle = j.at("idle").get<double>();
  h.pending = j.at("pending").get<double>();
  h.running = j.at("running").get<double>();
  return h;
}

// Every history row, hourly roll-ups first; none from a store that keeps no history.
StatusOr<std::vector<HistoryRow>> AllHistory(StateStore& store) {
  std::vector<HistoryRow> rows;
  for (bool hourly : {true, false}) {
    auto part = store.History(hourly, 0);
    if (!part.ok()) {
      if (part.status().code() == StatusCode::kUnimplemented) return rows;
      return part.status();
    }
    rows.insert(rows.end(), part->begin(), part->end());
  }
  return rows;
}

json CountsJson(const BackupCounts& c) {
  json j = {{"jobs", c.jobs},
            {"nodes", c.nodes},
            {"values", c.values},
            {"events", c.events},
            {"audit", c.audit}};
  if (c.specs) j["specs"] = c.specs;        // format 1 has no spec lines
  if (c.history) j["history"] = c.history;  // formats 1 and 2 have no history lines
  return j;
}

// The specs read so far, by key: a format-2 job line refers to one that came before it.
using SpecTexts = std::map<std::string, std::shared_ptr<const std::string>>;

// Adds one row line to `batch`; the line's kind is its only key.
void AddRow(const json& line, StoreBatch* batch, BackupCounts* counts, SpecTexts* specs) {
  if (line.contains("spec")) {
    const json& s = line["spec"];
    auto text = std::make_shared<const std::string>(s.at("text").get<std::string>());
    if (SpecKey(*text) != s.at("key").get<std::string>())
      throw std::invalid_argument("a spec whose key is not its text's");
    (*specs)[s.at("key").get<std::string>()] = std::move(text);
    counts->specs++;
  } else if (line.contains("job")) {
    batch->jobs.push_back(JobFrom(line["job"], *specs));
    counts->jobs++;
  } else if (line.contains("node")) {
    const json& n = line["node"];
    batch->nodes.push_back({n.at("name").get<std::string>(), n.at("state").get<std::string>()});
    counts->nodes++;
  } else if (line.contains("value")) {
    const json& v = line["value"];
    batch->values.push_back({v.at("table").get<std::string>(), v.at("key").get<std::string>(),
                             v.at("value").get<std::string>(), false});
    counts->values++;
  } else if (line.contains("event")) {
    const json& e = line["event"];
    batch->events.push_back({0, e.at("time").get<Time>(), e.at("kind").get<std::string>(),
                             e.at("subject").get<std::string>(),
                             e.at("message").get<std::string>()});
    counts->events++;
  } else if (line.contains("audit")) {
    batch->audit.push_back(AuditFrom(line["audit"]));
    counts->audit++;
  } else if (line.contains("history")) {
    batch->history.push_back(HistoryFrom(line["history"]));
    counts->history++;
  } else {
    throw std::invalid_argument(
        "a line that is no spec, job, node, value, event, audit or history row");
  }
}

size_t Rows(const StoreBatch& b) {
  return b.jobs.size() + b.nodes.size() + b.values.size() + b.events.size() + b.audit.size() +
         b.history.size();
}

// Reads every line of `in` after the header; `row` is called for each row line. Checks the header,
// that every line parses, and that the end line is there with the counts of the rows before it.
Status ReadLines(std::istream& in, const std::string& source,
                 const std::function<void(const json&)>& row) {
  std::string text;
  size_t n = 0;
  BackupCounts seen;
  StoreBatch scratch;
  SpecTexts specs;
  bool ended = false;
  for (; std::getline(in, text);) {
    ++n;
    const std::string at = source + ":" + std::to_string(n) + ": ";
    if (ended)
      return Status::InvalidArgument(at +
                                     "a line after the backup's end line; the file is damaged");
    const json line = json::parse(text, nullptr, false);
    if (line.is_discarded() || !line.is_object())
      return Status::InvalidArgument(at + "not a JSON object");
    try {
      if (n == 1) {
        if (!line.contains("hangar_backup")) {
          return Status::InvalidArgument(
              at + "not a hangar backup (its first line has no \"hangar_backup\")");
        }
        if (line["hangar_backup"].get<int>() > kFormat) {
          return Status::InvalidArgument(
              at +
              "this backup's format is newer than this hangar knows; restore it "
              "with the hangar that wrote it");
        }
      } else if (line.contains("end")) {
        if (line["end"] != CountsJson(seen)) {
          return Status::InvalidArgument(at + "the end line's counts " + line["end"].dump() +
                                         " differ from the rows in the file " +
                                         CountsJson(seen).dump());
        }
        ended = true;
      } else {
        AddRow(line, &scratch, &seen, &specs);
        scratch = StoreBatch();
        if (row) row(line);
      }
    } catch (const std::exception& e) {
      return Status::InvalidArgument(at + "bad row: " + e.what());
    }
  }
  if (n == 0) return Status::InvalidArgument(source + " is empty: not a hangar backup");
  if (!ended) {
    return Status::InvalidArgument(
        source + " ends before its end line: the backup is truncated; take it again");
  }
  return Status::Ok();
}

}  // namespace

std::string BackupCounts::ToString() const {
  return std::to_string(jobs) + " jobs, " + std::to_string(nodes) + " nodes, " +
         std::to_string(values) + " values, " + std::to_string(events) + " events, " +
         std::to_string(audit) + " audit records" +
         (history
              ? ", " + std::to_string(history) + (history == 1 ? " history row" : " history rows")
              : "");
}

StatusOr<BackupCounts> WriteBackup(StateStore& store, std::ostream& out) {
  HANGAR_ASSIGN_OR_RETURN(StoreContents c, store.Load());
  HANGAR_ASSIGN_OR_RETURN(std::vector<EventRow> events, store.Events("", INT_MAX));
  HANGAR_ASSIGN_OR_RETURN(std::vector<AuditRow> audit, store.Audit("", INT_MAX));
  HANGAR_ASSIGN_OR_RETURN(std::vector<HistoryRow> history, AllHistory(store));
  out << Dump({{"hangar_backup", kFormat}, {"from", ShownStoreUrl(store.Describe())}}) << "\n";
  BackupCounts n;
  // Each spec once, before the first job that refers to it.
  std::set<std::string_view> written;
  for (const auto& j : c.jobs) {
    if (!j.spec)
      return Status::Internal("job " + std::to_string(j.id) + " refers to spec " + j.spec_key +
                              ", which the store does not hold; the store is damaged");
    if (!written.insert(j.spec_key).second) continue;
    out << Dump({{"spec", {{"key", j.spec_key}, {"user", j.user}, {"text", *j.spec}}}}) << "\n";
  }
  for (const auto& j : c.jobs) out << Dump({{"job", ToJson(j)}}) << "\n";
  for (const auto& node : c.nodes)
    out << Dump({{"node", {{"name", node.name}, {"state", node.state_json}}}}) << "\n";
  for (const auto& v : c.values) {
    out << Dump({{"value", {{"table", v.table}, {"key", v.key}, {"value", v.value}}}}) << "\n";
  }
  // The store answers newest first; a backup is in the order the rows were written.
  for (auto e = events.rbegin(); e != events.rend(); ++e) {
    out << Dump({{"event",
                  {{"time", e->time},
                   {"kind", e->kind},
                   {"subject", e->subject},
                   {"message", e->message}}}})
        << "\n";
  }
  for (auto a = audit.rbegin(); a != audit.rend(); ++a)
    out << Dump({{"audit", ToJson(*a)}}) << "\n";
  for (const HistoryRow& h : history) out << Dump({{"history", ToJson(h)}}) << "\n";
  n = {c.jobs.size(), c.nodes.size(), c.values.size(), events.size(),
       audit.size(),  written.size(), history.size()};
  out << Dump({{"end", CountsJson(n)}}) << "\n";
  out.flush();
  if (!out) return Status::Unavailable("could not write the whole backup (disk full?)");
  return n;
}

StatusOr<bool> StoreIsEmpty(StateStore& store) {
  HANGAR_ASSIGN_OR_RETURN(StoreContents c, store.Load());
  HANGAR_ASSIGN_OR_RETURN(std::vector<EventRow> events, store.Events("", 1));
  HANGAR_ASSIGN_OR_RETURN(std::vector<AuditRow> audit, store.Audit("", 1));
  HANGAR_ASSIGN_OR_RETURN(std::vector<HistoryRow> history, AllHistory(store));
  return c.jobs.empty() && c.nodes.empty() && c.values.empty() && events.empty() && audit.empty() &&
         history.empty();
}

StatusOr<BackupCounts> RestoreBackup(std::istream& in, const std::string& source, StateStore& store,
                                     bool replace) {
  // First the whole file is checked, so that a damaged backup changes nothing.
  HANGAR_RETURN_IF_ERROR(ReadLines(in, source, nullptr));
  HANGAR_ASSIGN_OR_RETURN(bool empty, StoreIsEmpty(store));
  if (!empty && !replace) {
    return Status::FailedPrecondition(
        "the store " + ShownStoreUrl(store.Describe()) +
        " is not empty; restore into an empty store, or add --force to erase "
        "everything in it and replace it with the backup");
  }
  in.clear();
  in.seekg(0);
  if (!in) return Status::InvalidArgument(source + " cannot be read twice; restore from a file");
  BackupCounts counts;
  StoreBatch batch;
  SpecTexts specs;
  batch.erase_all = !empty;
  Status failed;
  auto flush = [&] {
    if (failed.ok() && !batch.empty()) failed = store.Commit(batch);
    batch = StoreBatch();
  };
  HANGAR_RETURN_IF_ERROR(ReadLines(in, source, [&](const json& line) {
    AddRow(line, &batch, &counts, &specs);
    if (Rows(batch) >= kRowsPerCommit) flush();
  }));
  flush();
  if (!failed.ok()) {
    return Status(
        failed.code(),
        failed.message() +
            "; the restore stopped part way: run it again with --force once the store works");
  }
  return counts;
}

}  // namespace hangar::controller
