#include "cli/sbatch_script.h"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <set>

#include "cli/sbatch_unhonoured.h"
#include "cluster/hostlist.h"
#include "job/job_spec.h"

namespace hangar::cli::sbatch {

namespace {

using Apply = Status (*)(const std::string& value, SbatchOptions* o);

struct Known {
  const char* name;
  char short_name;  // 0: none
  ArgKind arg;
  Apply apply;
};

Status Err(const std::string& what) { return Status::InvalidArgument(what); }

// Stores a parsed value, or passes its error on.
template <typename T>
Status Into(StatusOr<T> parsed, std::optional<T>* field) {
  if (!parsed.ok()) return parsed.status();
  *field = std::move(*parsed);
  return Status::Ok();
}

StatusOr<int> Count(const std::string& v, int lo, int hi, const char* what) {
  int n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || n < lo || n > hi) {
    return Err("'" + v + "' is not " + what + " (a whole number from " + std::to_string(lo) +
               " to " + std::to_string(hi) + ")");
  }
  return n;
}

// "N" or "TYPE:N"; the type goes to `type`.
StatusOr<int> TypedGpuCount(const std::string& v, std::string* type, int most = 64) {
  const size_t colon = v.rfind(':');
  if (colon != std::string::npos) *type = v.substr(0, colon);
  return Count(colon == std::string::npos ? v : v.substr(colon + 1), 1, most, "a GPU count");
}

// gpu:N, gpu:TYPE:N, gpu (one); other generic resources in a list are left out with a warning.
Status ApplyGres(const std::string& v, SbatchOptions* o) {
  bool gpu_seen = false;
  size_t start = 0;
  while (start <= v.size()) {
    const size_t comma = std::min(v.find(',', start), v.size());
    const std::string item = v.substr(start, comma - start);
    start = comma + 1;
    if (item.rfind("gpu", 0) != 0 || (item.size() > 3 && item[3] != ':')) {
      o->warnings.push_back("the generic resource '" + item +
                            "' is left out: Hangar counts GPUs, CPUs and memory only");
      continue;
    }
    if (gpu_seen) return Err("'" + v + "' asks GPUs twice; give one gpu:N or gpu:TYPE:N");
    gpu_seen = true;
    if (item == "gpu") {
      o->gpus_per_node = 1;
      continue;
    }
    std::string rest = item.substr(4), type;
    const size_t colon = rest.find(':');
    if (colon != std::string::npos) type = rest.substr(0, colon), rest = rest.substr(colon + 1);
    if (rest.find(':') != std::string::npos)
      return Err("'" + item + "' is not gpu:N or gpu:TYPE:N");
    HANGAR_ASSIGN_OR_RETURN(o->gpus_per_node, Count(rest, 1, 64, "a GPU count"));
    if (!type.empty()) o->gpu_type = type;
  }
  return Status::Ok();
}

// N, or MIN-MAX: a Hangar gang has a fixed size, and the least Slurm may start the job with is a
// result the script accepts, so a range asks MIN (with a warning).
Status ApplyNodes(const std::string& v, SbatchOptions* o) {
  const size_t dash = v.find('-');
  HANGAR_ASSIGN_OR_RETURN(o->nodes, Count(v.substr(0, dash), 1, 100000, "a node count"));
  if (dash == std::string::npos) return Status::Ok();
  HANGAR_ASSIGN_OR_RETURN(int most, Count(v.substr(dash + 1), 1, 100000, "a node count"));
  if (most < *o->nodes) return Err("the range '" + v + "' runs backwards; write MIN-MAX");
  if (most != *o->nodes)
    o->warnings.push_back("a Hangar gang has a fixed size: the job asks " +
                          std::to_string(*o->nodes) +
                          " nodes, the least of the range (SLURM_NNODES says so)");
  return Status::Ok();
}

Status ApplyMem(const std::string& v, SbatchOptions* o) {
  HANGAR_ASSIGN_OR_RETURN(int64_t mib, ParseSlurmMemoryMiB(v));
  o->mem_whole_node = mib == 0;
  if (mib == 0) {
    o->mem_mib.reset();
    o->warnings.push_back(
        "all of a node's memory (--mem=0) cannot be asked without knowing the node: the job asks "
        "no memory and is not limited to any; give a size such as 64G to reserve it");
    return Status::Ok();
  }
  o->mem_mib = mib;
  return Status::Ok();
}

// A --nodelist/--exclude value: a host list (node[1-3,5],gpu-a). Slurm also reads a file of names
// when the value holds a '/'; hangar sbatch refuses that, saying to write the names.
Status CheckHostListOption(const std::string& value) {
  if (value.find('/') != std::string::npos) {
    return Status::InvalidArgument(
        "'" + value +
        "' names a file of nodes, which hangar sbatch does not read: write the names "
        "as a host list (node[1-3,5])");
  }
  auto names = cluster::ExpandHostList(value);
  if (!names.ok()) return names.status();
  if (names->empty())
    return Status::InvalidArgument("'" + value +
                                   "' names no node; write a host list (node[1-3,5])");
  return Status::Ok();
}

// NAME=value travels; a bare NAME takes the submitter's value (as sbatch); ALL and NONE say
// what to do with the rest of the submitter's environment, which does not travel here.
Status ApplyExport(const std::string& v, SbatchOptions* o) {
  size_t start = 0;
  while (start <= v.size()) {
    const size_t comma = std::min(v.find(',', start), v.size());
    const std::string item = v.substr(start, comma - start);
    start = comma + 1;
    const size_t eq = item.find('=');
    std::string upper = item;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (upper == "NONE" || upper == "NIL") continue;  // what Hangar does anyway
    if (upper == "ALL") {
      o->warnings.push_back(
          "the submitter's whole environment does not travel to a Hangar task; name what it "
          "needs (--export=NAME or NAME=value), or set it in the script");
    } else if (eq == 0 || item.empty()) {
      return Err("'" + item + "' is not NAME or NAME=value");
    } else if (eq == std::string::npos) {
      o->export_names.push_back(item);
    } else {
      o->export_env.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    }
  }
  return Status::Ok();
}

template <auto Member>
Status SetString(const std::string& v, SbatchOptions* o) {
  if (v.empty()) return Err("needs a value");
  o->*Member = v;
  return Status::Ok();
}

constexpr Known kKnown[] = {
    {"job-name", 'J', ArgKind::kValue, SetString<&SbatchOptions::job_name>},
    {"nodes", 'N', ArgKind::kValue, ApplyNodes},
    {"ntasks", 'n', ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(Count(v, 1, 100000, "a task count"), &o->ntasks);
     }},
    {"ntasks-per-node", 0, ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(Count(v, 1, 1024, "a task count"), &o->ntasks_per_node);
     }},
    {"gres", 0, ArgKind::kValue, ApplyGres},
    {"gpus-per-node", 0, ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(TypedGpuCount(v, &o->gpu_type), &o->gpus_per_node);
     }},
    {"gpus-per-task", 0, ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(TypedGpuCount(v, &o->gpu_type), &o->gpus_per_task);
     }},
    {"cpus-per-gpu", 0, ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(Count(v, 1, 1024, "a CPU count"), &o->cpus_per_gpu);
     }},
    {"cpus-per-task", 'c', ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(Count(v, 1, 1024, "a CPU count"), &o->cpus_per_task);
     }},
    {"mem", 0, ArgKind::kValue, ApplyMem},
    {"mem-per-gpu", 0, ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(ParseSlurmMemoryMiB(v), &o->mem_per_gpu_mib);
     }},
    {"time", 't', ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) { return Into(ParseSlurmTime(v), &o->time); }},
    {"partition", 'p', ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       const size_t comma = v.find(',');
       if (comma != std::string::npos)
         o->warnings.push_back("a Hangar job waits in one queue: it goes to '" +
                               v.substr(0, comma) + "', the first of the list");
       return SetString<&SbatchOptions::partition>(v.substr(0, comma), o);
     }},
    {"qos", 'q', ArgKind::kValue, SetString<&SbatchOptions::qos>},
    {"reservation", 0, ArgKind::kValue, SetString<&SbatchOptions::reservation>},
    {"array", 'a', ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       HANGAR_RETURN_IF_ERROR(ParseArraySpec(v).status());
       return SetString<&SbatchOptions::array>(v, o);
     }},
    {"dependency", 'd', ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       bool singleton = false;
       HANGAR_RETURN_IF_ERROR(Into(ParseDependency(v, &singleton), &o->dependency));
       if (singleton)
         o->warnings.push_back(
             "'singleton' (one job of this name and user at a time) is left out: the job may run "
             "beside another of its name");
       return Status::Ok();
     }},
    {"signal", 0, ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(ParseSignalRequest(v), &o->signal);
     }},
    {"output", 'o', ArgKind::kValue, SetString<&SbatchOptions::output>},
    {"error", 'e', ArgKind::kValue, SetString<&SbatchOptions::error>},
    {"chdir", 'D', ArgKind::kValue, SetString<&SbatchOptions::chdir>},
    {"open-mode", 0, ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       if (v != "append" && v != "truncate")
         return Err("--open-mode is append or truncate, not '" + v + "'");
       return SetString<&SbatchOptions::open_mode>(v, o);
     }},
    {"export", 0, ArgKind::kValue, ApplyExport},
    {"nice", 0, ArgKind::kOptionalValue,
     [](const std::string& v, SbatchOptions* o) {
       if (v.empty()) return o->nice = 100, Status::Ok();  // sbatch's default adjustment
       const bool neg = v[0] == '-';
       HANGAR_ASSIGN_OR_RETURN(int n, Count(neg ? v.substr(1) : v, 0, 1000000, "a nice value"));
       return o->nice = neg ? -n : n, Status::Ok();
     }},
    // Hangar requeues preempted and drained jobs: what --requeue asks.
    {"requeue", 0, ArgKind::kFlag, [](const std::string&, SbatchOptions*) { return Status::Ok(); }},
    {"exclusive", 0, ArgKind::kOptionalValue,
     [](const std::string&, SbatchOptions* o) { return o->exclusive = true, Status::Ok(); }},
    {"account", 'A', ArgKind::kValue, SetString<&SbatchOptions::account>},
    {"begin", 'b', ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       HANGAR_RETURN_IF_ERROR(ParseSlurmBegin(v, 0).status());
       return SetString<&SbatchOptions::begin>(v, o);
     }},
    {"hold", 'H', ArgKind::kFlag,
     [](const std::string&, SbatchOptions* o) { return o->hold = true, Status::Ok(); }},
    {"nodelist", 'w', ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       HANGAR_RETURN_IF_ERROR(CheckHostListOption(v));
       return SetString<&SbatchOptions::nodelist>(v, o);
     }},
    {"exclude", 'x', ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       HANGAR_RETURN_IF_ERROR(CheckHostListOption(v));
       return SetString<&SbatchOptions::exclude>(v, o);
     }},
    {"constraint", 'C', ArgKind::kValue, SetString<&SbatchOptions::constraint>},
    {"gpus", 'G', ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(TypedGpuCount(v, &o->gpu_type, 1024), &o->gpus_total);
     }},
    {"ntasks-per-gpu", 0, ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(Count(v, 1, 1024, "a task count"), &o->ntasks_per_gpu);
     }},
    {"mem-per-cpu", 0, ArgKind::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(ParseSlurmMemoryMiB(v), &o->mem_per_cpu_mib);
     }},
};

// Slurm's other spellings of the options above.
constexpr std::pair<const char*, const char*> kAliases[] = {
    {"tasks-per-node", "ntasks-per-node"}, {"workdir", "chdir"}, {"name", "job-name"}};

const Known* FindKnown(std::string_view name, char short_name) {
  for (auto [alias, real] : kAliases) {
    if (!short_name && name == alias) name = real;
  }
  for (const auto& k : kKnown) {
    if ((short_name && k.short_name == short_name) || (!short_name && name == k.name)) return &k;
  }
  return nullptr;
}

// Splits like a shell would, for the simple cases #SBATCH lines hold: whitespace, '...' and "...";
// a word starting with '#' ends the line (a comment).
std::vector<std::string> SplitWords(std::string_view line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i >= line.size() || line[i] == '#') break;
    std::string w;
    char quote = 0;
    for (; i < line.size() && (quote || !std::isspace(static_cast<unsigned char>(line[i]))); ++i) {
      if (quote && line[i] == quote)
        quote = 0;
      else if (!quote && (line[i] == '"' || line[i] == '\''))
        quote = line[i];
      else
        w += line[i];
    }
    words.push_back(std::move(w));
  }
  return words;
}

// An option's long name and how it takes a value, whether hangar sbatch honours it or not.
struct Spelling {
  std::string name;
  ArgKind arg;
};

std::optional<Spelling> Spell(std::string_view name, char short_name) {
  if (const Known* k = FindKnown(name, short_name)) return Spelling{k->name, k->arg};
  if (const UnhonouredDirective* u = FindUnhonoured(name, short_name))
    return Spelling{u->name, u->arg};
  return std::nullopt;
}

// Reads sbatch options from `words` (one #SBATCH line, or the command line) into `out`; a word
// it cannot read is an error in `errors`, and reading goes on with the next.
void ReadWords(const std::vector<std::string>& words, int line, const std::string& where,
               const std::string& prefix, std::vector<Directive>* out,
               std::vector<std::string>* errors) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const bool is_long = w.rfind("--", 0) == 0 && w.size() > 2;
    if (w == "hetjob" || w == "packjob") {  // the next component of a heterogeneous job
      out->push_back(Directive{line, std::string(kHetjob), std::nullopt, prefix + w});
      continue;
    }
    if (!is_long && (w.size() < 2 || w[0] != '-')) {
      errors->push_back(where + ": " + prefix + w +
                        " is not an sbatch option; write options like --time=10 or -t 10");
      continue;
    }
    const size_t eq = w.find('=');
    const std::string name =
        is_long ? w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2) : "";
    const char short_name = is_long ? 0 : w[1];
    std::string text = prefix + w;
    const std::optional<Spelling> k = Spell(name, short_name);
    if (!k) {
      // Its value, if it has one, is not another error.
      if (eq == std::string::npos && i + 1 < words.size() && words[i + 1][0] != '-')
        text += " " + words[++i];
      errors->push_back(where + ": " + text +
                        " is not an sbatch option hangar sbatch knows; docs/slurm.md lists the "
                        "directives it reads");
      continue;
    }
    Directive d{line, k->name, std::nullopt, text};
    if (is_long && eq != std::string::npos) d.value = w.substr(eq + 1);
    if (!is_long && w.size() > 2) d.value = w.substr(2);
    if (!d.value && k->arg == ArgKind::kValue) {
      if (i + 1 >= words.size()) {
        errors->push_back(where + ": " + text + " needs a value, e.g. --" + k->name + "=VALUE");
        continue;
      }
      d.value = words[++i];
      d.text += " " + *d.value;
    }
    if (d.value && k->arg == ArgKind::kFlag) {
      errors->push_back(where + ": " + text + " takes no value; write --" + k->name);
      continue;
    }
    out->push_back(std::move(d));
  }
}

Status JoinErrors(const std::vector<std::string>& errors) {
  if (errors.empty()) return Status::Ok();
  std::string all;
  for (const auto& e : errors) all += (all.empty() ? "" : "\n") + e;
  return Err(all);
}

}  // namespace

Status Diagnostics::ToStatus() const { return JoinErrors(errors); }

std::string WhereOf(const Directive& d, const std::string& file) {
  return d.line == 0 ? "command line" : file + ":" + std::to_string(d.line);
}

std::string WhereSet(const SbatchOptions& o, const std::string& option) {
  auto it = o.where.find(option);
  return it == o.where.end() ? "command line" : it->second;
}

std::vector<Directive> ReadDirectives(std::string_view script, const std::string& file,
                                      Diagnostics* diag) {
  std::vector<Directive> out;
  int line_no = 0, first_command = 0;
  size_t pos = 0;
  while (pos < script.size()) {
    const size_t end = std::min(script.find('\n', pos), script.size());
    std::string_view line = script.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const bool directive = line.rfind("#SBATCH", 0) == 0 &&
                           (line.size() == 7 || std::isspace(static_cast<unsigned char>(line[7])));
    if (directive && first_command) {
      diag->warnings.push_back(file + ":" + std::to_string(line_no) + ": " + std::string(line) +
                               " comes after the script's first command (line " +
                               std::to_string(first_command) +
                               "), so sbatch ignores it, and so does hangar sbatch; move it up "
                               "to have it read");
      continue;
    }
    if (directive) {
      ReadWords(SplitWords(line.substr(7)), line_no, file + ":" + std::to_string(line_no),
                "#SBATCH ", &out, &diag->errors);
      continue;
    }
    const size_t text = line.find_first_not_of(" \t");
    if (!first_command && text != std::string_view::npos && line[text] != '#')
      first_command = line_no;
  }
  return out;
}

StatusOr<std::vector<Directive>> ReadDirectives(std::string_view script, const std::string& file) {
  Diagnostics diag;
  std::vector<Directive> out = ReadDirectives(script, file, &diag);
  HANGAR_RETURN_IF_ERROR(diag.ToStatus());
  return out;
}

bool TakesNextWord(const std::string& w) {
  const bool is_long = w.rfind("--", 0) == 0 && w.size() > 2;
  if (is_long ? w.find('=') != std::string::npos : w.size() != 2 || w[0] != '-') return false;
  const std::optional<Spelling> k = Spell(is_long ? w.substr(2) : "", is_long ? 0 : w[1]);
  return k && k->arg == ArgKind::kValue;
}

StatusOr<std::vector<Directive>> ReadCommandLine(const std::vector<std::string>& words) {
  std::vector<Directive> out;
  std::vector<std::string> errors;
  ReadWords(words, 0, "command line", "", &out, &errors);
  HANGAR_RETURN_IF_ERROR(JoinErrors(errors));
  return out;
}

Status ApplyDirective(const Directive& d, const std::string& file, SbatchOptions* o) {
  const std::string where = WhereOf(d, file);
  const Known* k = FindKnown(d.name, 0);
  if (!k) {
    const UnhonouredDirective* u = FindUnhonoured(d.name, 0);
    if (!u) return Err(where + ": " + d.text + " is not an sbatch option hangar sbatch knows");
    if (u->refused)
      return Err(where + ": " + d.text + " cannot be honoured by hangar sbatch; " + u->why);
    o->warnings.push_back(where + ": " + d.text + " is set aside: " + u->why);
    return Status::Ok();
  }
  const size_t warned = o->warnings.size();
  const std::string gpu_type = o->gpu_type;
  Status s = k->apply(d.value.value_or(""), o);
  if (!s.ok()) return Err(where + ": " + d.text + ": " + s.message());
  for (size_t i = warned; i < o->warnings.size(); ++i)
    o->warnings[i] = where + ": " + d.text + ": " + o->warnings[i];
  o->where[d.name] = where;
  if (o->gpu_type != gpu_type) o->where["gpu-type"] = where;
  return Status::Ok();
}

}  // namespace hangar::cli::sbatch
