#include "cli/slurm_common.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "cli/squeue.h"

namespace hangar::cli::slurm {

Time WallNow() { return SystemClock::Default()->Now(); }

// 8, or 0.5: GPUs as Slurm's counts print them (fractions only where Hangar shares a GPU).
std::string FormatGpus(double g) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", g);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = std::min(s.find(',', start), s.size());
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A job id as Slurm tools take it: 12, or 12_3 (an array element: its own id is looked up).
StatusOr<api::JobView> FetchJob(ApiClient* api, const std::string& id) {
  const size_t underscore = id.find('_');
  const std::string base = id.substr(0, underscore);
  if (base.empty() || base.size() > 19 || !std::all_of(base.begin(), base.end(), ::isdigit)) {
    return Status::InvalidArgument("'" + id + "' is not a job id (a number, or ARRAYID_INDEX)");
  }
  if (underscore == std::string::npos) {
    HANGAR_ASSIGN_OR_RETURN(auto j, api->Get("/v1/jobs/" + base));
    return api::JobViewFromJson(j);
  }
  const std::string index = id.substr(underscore + 1);
  HANGAR_ASSIGN_OR_RETURN(auto list, api->Get("/v1/jobs?array=" + base + "&limit=100000"));
  for (const auto& j : list.value("jobs", nlohmann::json::array())) {
    HANGAR_ASSIGN_OR_RETURN(api::JobView v, api::JobViewFromJson(j));
    if (std::to_string(v.array_index) == index) return v;
  }
  return Status::NotFound("array " + base + " has no element " + index);
}

// The jobs of a list query (each state given, or all), oldest first.
StatusOr<std::vector<api::JobView>> ListJobs(ApiClient* api, const std::string& query,
                                             const std::vector<std::string>& states) {
  std::vector<api::JobView> out;
  const std::vector<std::string> each = states.empty() ? std::vector<std::string>{""} : states;
  for (const std::string& state : each) {
    std::string q = "/v1/jobs?limit=100000" + query + (state.empty() ? "" : "&state=" + state);
    HANGAR_ASSIGN_OR_RETURN(auto list, api->Get(q));
    for (const auto& j : list.value("jobs", nlohmann::json::array())) {
      HANGAR_ASSIGN_OR_RETURN(api::JobView v, api::JobViewFromJson(j));
      out.push_back(std::move(v));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const api::JobView& a, const api::JobView& b) { return a.id < b.id; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const api::JobView& a, const api::JobView& b) { return a.id == b.id; }),
            out.end());
  return out;
}

// The jobs the -j/-u/-n/-t options select. `active_only`: squeue's default of the jobs not ended.
StatusOr<std::vector<api::JobView>> SelectJobs(ApiClient* api, const Args& a, bool active_only,
                                               const std::string& since) {
  std::vector<std::string> states;
  for (const std::string& t : SplitCommas(a.Get("states"))) {
    HANGAR_ASSIGN_OR_RETURN(auto s, slurm::HangarStates(t));
    if (s.empty()) active_only = false;  // "all"
    states.insert(states.end(), s.begin(), s.end());
  }
  if (states.empty() && active_only) states = {"pending", "starting", "running", "preempting"};
  std::vector<api::JobView> jobs;
  if (a.Has("jobs") && !a.Get("jobs").empty()) {
    for (const std::string& id : SplitCommas(a.Get("jobs"))) {
      auto j = FetchJob(api, id);
      if (!j.ok() && j.status().code() == StatusCode::kNotFound)
        continue;  // as Slurm: nothing printed
      if (!j.ok()) return j.status();
      // An array's id alone is the whole array, as in Slurm (its first element has that id).
      if (id.find('_') == std::string::npos && j->array_id == j->id) {
        HANGAR_ASSIGN_OR_RETURN(auto elements,
                                ListJobs(api, "&array=" + std::to_string(j->id), {}));
        jobs.insert(jobs.end(), elements.begin(), elements.end());
        continue;
      }
      jobs.push_back(std::move(*j));
    }
  } else {
    std::string query;
    if (!since.empty()) query += "&since=" + since;
    HANGAR_ASSIGN_OR_RETURN(jobs, ListJobs(api, query, states));
  }
  const std::vector<std::string> users = SplitCommas(a.Get("user")),
                                 names = SplitCommas(a.Get("name")),
                                 partitions = SplitCommas(a.Get("partition"));
  auto keep = [&](const api::JobView& j) {
    auto in = [](const std::vector<std::string>& list, const std::string& v) {
      return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
    };
    const bool state_ok =
        states.empty() || std::find(states.begin(), states.end(), j.state) != states.end();
    return state_ok && in(users, j.user) && in(names, j.name) && in(partitions, j.queue);
  };
  std::erase_if(jobs, [&](const api::JobView& j) { return !keep(j); });
  return jobs;
}

std::string Elapsed(const api::JobView& j, Time now) {
  if (!j.started) return SlurmElapsed(0);
  return SlurmElapsed((j.ended ? j.ended : now) - j.started);
}

// squeue's %LETTER values.

int Fail(const std::string& tool, const Status& s) {
  std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), s.message().c_str());
  return 1;
}

}  // namespace hangar::cli::slurm
