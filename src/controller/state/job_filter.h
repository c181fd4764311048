// Which jobs a list or a bulk operation is about (GET /v1/jobs, POST /v1/jobs/bulk/...), and a
// page of such a list. Shared by the state thread's lists (ClusterState) and the published read
// model's (job_read_model.h), which answer a filter alike.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "api/views.h"
#include "common/time.h"
#include "job/job_spec.h"
#include "job/job_state.h"
#include "sched/snapshot.h"

namespace hangar::controller {

// Empty fields match every job; `state` "held" matches pending jobs on hold.
struct JobFilter {
  std::vector<sched::JobId> ids;
  uint64_t array = 0;
  std::string user, queue, name;  // name: exact, or a prefix ending in '*'
  std::string state;
  Time since = 0, until = 0;  // submitted within [since, until); 0: unbounded
  sched::JobId before =
      0;  // the cursor: ids below it (the list runs newest first); 0: from the newest
  size_t limit = 100;
};

struct JobPage {
  // Past the page, a list looks at this many more candidates to count what is left, so that a
  // page costs the same at 100,000 queued jobs as at 100 (beyond it, "at least" that many).
  static constexpr size_t kCountScan = 5'000;
  std::vector<api::JobView> jobs;
  sched::JobId next = 0;  // the cursor for the next page; 0: this is the last
  size_t more = 0;        // matching jobs after this page (at least this many when more_at_least)
  bool more_at_least = false;  // counting stopped after kCountScan candidates past the page
};

// What a filter looks at of a job: the state's record and the read model's entry alike.
struct FilterFacts {
  const job::JobSpec& spec;
  uint64_t array_id;
  job::JobState state;
  bool held;
  Time submitted;
};

// Whether a job with `facts` matches `f`, the ids and the cursor aside.
bool MatchesFilter(const FilterFacts& facts, const JobFilter& f);

// Whether `name` matches the filter's name: exact, or a prefix ending in '*'.
bool NameMatches(const std::string& name, const std::string& pattern);

}  // namespace hangar::controller
