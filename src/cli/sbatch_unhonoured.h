// The sbatch options `hangar sbatch` reads but does not turn into anything: those with no effect
// here, or whose effect Hangar has anyway, are accepted with a warning that names them; those
// whose meaning would change what the job does, and that a job cannot carry, are refused. Each
// with the sentence that says why and what to do. (What it honours is sbatch_script.cc's table.)
#pragma once

#include <string_view>

namespace hangar::cli::sbatch {

enum class ArgKind { kFlag, kValue, kOptionalValue };

struct UnhonouredDirective {
  const char* name;  // the long name
  char short_name;   // 0: none
  ArgKind arg;
  bool refused;     // false: accepted with `why` as a warning
  const char* why;  // "Hangar sends no mail; ..."
};

// By long name (short_name 0) or by short name; nullptr when sbatch has no such option here.
const UnhonouredDirective* FindUnhonoured(std::string_view name, char short_name);

}  // namespace hangar::cli::sbatch
