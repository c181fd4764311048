// What the Slurm client commands share (slurm_tools.cc, slurm_admin.cc): Slurm's option forms,
// job lookups by Slurm's ids and selectors, and small formatting helpers.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/views.h"
#include "cli/client.h"
#include "cli/slurm_format.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::cli::slurm {

Time WallNow();
// 8, or 0.5: GPUs as Slurm's counts print them (fractions only where Hangar shares a GPU).
std::string FormatGpus(double g);
std::vector<std::string> SplitCommas(const std::string& s);
std::string Lower(std::string s);
// Prints "TOOL: error: MESSAGE" and returns 1, as Slurm's commands exit.
int Fail(const std::string& tool, const Status& s);
// M:SS since the job started, up to its end or `now`.
std::string Elapsed(const api::JobView& j, Time now);

// Slurm's option forms: -j 7, -j7, --jobs=7, --jobs 7; flags stand alone (-P, --noheader).
struct Option {
  std::string short_name;  // "j" (or "")
  std::string long_name;   // "jobs"
  bool value = false;
};

class Args {
 public:
  // Parses `args` for `tool`; an option it does not know is an error naming those it knows.
  Status Parse(const std::string& tool, const std::vector<std::string>& args,
               const std::vector<Option>& known) {
    auto find = [&](const std::string& name, bool is_long) -> const Option* {
      for (const auto& o : known) {
        if ((is_long ? o.long_name : o.short_name) == name && !name.empty()) return &o;
      }
      return nullptr;
    };
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a.size() < 2 || a[0] != '-') {
        positional_.push_back(a);
        continue;
      }
      const bool is_long = a[1] == '-';
      std::string name = is_long ? a.substr(2) : a.substr(1, 1);
      std::optional<std::string> inline_value;
      if (is_long && name.find('=') != std::string::npos) {
        inline_value = name.substr(name.find('=') + 1);
        name = name.substr(0, name.find('='));
      } else if (!is_long && a.size() > 2) {
        inline_value = a.substr(2);
      }
      const Option* o = find(name, is_long);
      if (o && !o->value && !is_long && inline_value) o = nullptr;  // -Pn: flags bundled
      if (!o) {
        // Short options bundled as Slurm allows them: -Pn, and -nu USER (the last may take a
        // value: the rest of the word, or the next one).
        if (!is_long && inline_value) {
          Status bundled = Bundle(a, args, &i, find);
          if (bundled.ok()) continue;
        }
        std::string names;
        for (const auto& k : known)
          names += (names.empty() ? "" : ", ") +
                   (k.long_name.empty() ? "-" + k.short_name : "--" + k.long_name);
        return Status::InvalidArgument("option " + a + " is not one hangar's " + tool +
                                       " takes (it takes " + names +
                                       "; docs/slurm.md lists what differs from Slurm)");
      }
      if (!o->value) {
        Set(*o, "");
        continue;
      }
      if (!inline_value) {
        if (i + 1 >= args.size()) return Status::InvalidArgument("option " + a + " needs a value");
        inline_value = args[++i];
      }
      Set(*o, *inline_value);
    }
    return Status::Ok();
  }
  template <typename Find>
  Status Bundle(const std::string& a, const std::vector<std::string>& args, size_t* i,
                const Find& find) {
    std::vector<std::pair<const Option*, std::string>> parts;
    for (size_t k = 1; k < a.size(); ++k) {
      const Option* f = find(std::string(1, a[k]), false);
      if (!f) return Status::InvalidArgument(a);
      if (!f->value) {
        parts.emplace_back(f, "");
        continue;
      }
      std::string v = a.substr(k + 1);
      if (v.empty()) {
        if (*i + 1 >= args.size()) return Status::InvalidArgument(a);
        v = args[++*i];
      }
      parts.emplace_back(f, v);
      break;
    }
    for (const auto& [o, v] : parts) Set(*o, v);
    return Status::Ok();
  }
  bool Has(const std::string& long_name) const { return values_.count(long_name) > 0; }
  std::string Get(const std::string& long_name, const std::string& fallback = "") const {
    auto it = values_.find(long_name);
    return it == values_.end() ? fallback : it->second;
  }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  void Set(const Option& o, const std::string& v) {
    const std::string key = o.long_name.empty() ? o.short_name : o.long_name;
    auto [it, fresh] = values_.emplace(key, v);
    if (!fresh && !v.empty()) it->second += "," + v;  // repeated list options add up
  }
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// A job by Slurm's id: 12, or 12_3 (an array element).
StatusOr<api::JobView> FetchJob(ApiClient* api, const std::string& id);
// The jobs of a list query (each state given, or all), by id.
StatusOr<std::vector<api::JobView>> ListJobs(ApiClient* api, const std::string& query,
                                             const std::vector<std::string>& states);
// The jobs the -j/-u/-n/-t/-p options select. `active_only`: squeue's default of jobs not ended.
StatusOr<std::vector<api::JobView>> SelectJobs(ApiClient* api, const Args& a, bool active_only,
                                               const std::string& since);

int Scontrol(ApiClient* api, const std::vector<std::string>& argv);
int Scancel(ApiClient* api, const std::vector<std::string>& argv);
int Sinfo(ApiClient* api, const std::vector<std::string>& argv);
int Sacctmgr(ApiClient* api, const std::vector<std::string>& argv);

}  // namespace hangar::cli::slurm
