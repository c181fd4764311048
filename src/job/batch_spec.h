// Batch ergonomics in the job spec: job arrays and dependencies, in Slurm's words.
//
//   array: "0-49%8"                       # elements 0..49, at most 8 running at once
//   after: {ok: [12], any: [13], notok: [14]}
//
// An array is submitted as one request and becomes one job per element (HANGAR_ARRAY_JOB_ID,
// HANGAR_ARRAY_INDEX); a dependency names job ids, and an array's id stands for all its elements.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace hangar::job {

struct ArraySpec {
  static constexpr size_t kMaxElements = 100'000;
  static constexpr int64_t kMaxIndex = 9'999'999;
  std::string text;              // as written, e.g. "0-49:2%8"
  std::vector<int64_t> indices;  // expanded: ascending, no repeats
  int max_running = 0;           // the "%N" cap; 0: none
  bool empty() const { return text.empty(); }
};

// "7", "0-49", "0-49:2" (a step), "1,3,5-7", each optionally ending in "%N". The error names the
// part that is wrong and shows the syntax. An index over kMaxIndex, or more than kMaxElements
// elements (CountArrayElements), is refused before anything is expanded.
StatusOr<ArraySpec> ParseArraySpec(std::string_view text);
// How many elements `text` names, counting each part as written (a repeated index counts each
// time), without expanding them: nothing is spent per element before the count is known to be
// under kMaxElements.
StatusOr<size_t> CountArrayElements(std::string_view text);

enum class DependencyKind : uint8_t { kOk, kAny, kNotOk };
std::string_view DependencyKindName(DependencyKind k);  // "ok", "any", "notok"

struct Dependencies {
  std::vector<uint64_t> ok;   // start once these succeeded; never if one did not
  std::vector<uint64_t> any;  // start once these ended, however
  std::vector<uint64_t>
      notok;  // start once these failed, were cancelled or timed out; never if one succeeded
  bool empty() const { return ok.empty() && any.empty() && notok.empty(); }
  size_t size() const { return ok.size() + any.size() + notok.size(); }
  const std::vector<uint64_t>& of(DependencyKind k) const;
  nlohmann::json ToJson() const;
};

// From {"ok": [12, 13], "any": [...], "notok": [...]} (ids as numbers or digit strings).
StatusOr<Dependencies> DependenciesFromJson(const nlohmann::json& j);
// The command line's form, after Slurm's --dependency: "ok:12:13,any:14" (also afterok:12 ...).
StatusOr<Dependencies> ParseDependencyFlag(std::string_view text);

// `begin:` as a job file writes it: a time in UTC, "2026-12-08T22:00:00Z" (the Z, or a space for
// the T, may be left out), or a date alone (its midnight, UTC). InvalidArgument naming the form
// otherwise, an offset from UTC included.
StatusOr<Time> ParseBeginTime(std::string_view text);

}  // namespace hangar::job
