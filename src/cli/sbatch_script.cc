#include "cli/sbatch_script.h"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <set>

#include "job/job_spec.h"

namespace hangar::cli::sbatch {

namespace {

using Apply = Status (*)(const std::string& value, SbatchOptions* o);

struct Known {
  const char* name;
  char short_name;  // 0: none
  enum { kFlag, kValue, kOptionalValue } arg;
  Apply apply;
};

// Directives sbatch has and hangar sbatch refuses, each with why and what to do instead.
struct Refused {
  const char* name;
  char short_name;
  const char* why;
};

constexpr Refused kRefused[] = {
    {"exclusive", 0,
     "Hangar gives a job only what it asks; ask for all of a node's GPUs (--gpus-per-node) to have "
     "it alone"},
    {"account", 'A', "Hangar charges the job's queue: give --partition (the queue) instead"},
    {"mail-type", 0,
     "Hangar sends no mail; follow the job with `hangar jobs` or `hangar events job/ID`"},
    {"mail-user", 0,
     "Hangar sends no mail; follow the job with `hangar jobs` or `hangar events job/ID`"},
    {"constraint", 'C',
     "node features are node labels in Hangar: convert with --dry-run and add node_selector to the "
     "job file"},
    {"nodelist", 'w', "Hangar chooses the nodes; keep work off a node with `hangar drain`"},
    {"exclude", 'x', "Hangar chooses the nodes; keep work off a node with `hangar drain`"},
    {"reservation", 0, "Hangar has no reservations; use a queue (--partition) with a quota"},
    {"begin", 'b', "Hangar starts a job as soon as it can; submit it later instead"},
    {"deadline", 0, "Hangar has no deadlines; give --time"},
    {"hold", 'H', "Hangar has no held jobs yet; submit it when it should run"},
    {"no-requeue", 0,
     "Hangar always requeues a preempted or drained job (with the checkpoint signal first)"},
    {"mem-per-cpu", 0, "give memory per node (--mem) or per GPU (--mem-per-gpu)"},
    {"gpus", 'G',
     "give GPUs per node (--gpus-per-node or --gres=gpu:N) or per task (--gpus-per-task)"},
    {"ntasks-per-gpu", 0, "give --ntasks-per-node and --gpus-per-task"},
    {"switches", 0,
     "Hangar places a gang on the smallest fabric domain that fits by itself; a job file's "
     "topology: can require one"},
    {"licenses", 'L', "Hangar has no licenses"},
    {"wrap", 0,
     "hangar sbatch reads a script; for a one-line command write a job file (docs/job-format.md)"},
    {"wait", 'W', "follow the job with `hangar logs -f ID` instead"},
    {"get-user-env", 0,
     "Hangar tasks do not load the submitter's login environment; set what they need with "
     "--export=NAME=value"},
    {"distribution", 'm', "Hangar places tasks itself (docs/slurm.md)"},
    {"overcommit", 'O', "Hangar does not overcommit resources"},
    {"oversubscribe", 's',
     "Hangar shares a GPU only through a job file's gpu_fraction (docs/job-format.md)"},
    {"profile", 0, "Hangar's per-job accounting is `hangar history`"},
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
StatusOr<int> TypedGpuCount(const std::string& v, std::string* type) {
  const size_t colon = v.rfind(':');
  if (colon != std::string::npos) *type = v.substr(0, colon);
  return Count(colon == std::string::npos ? v : v.substr(colon + 1), 1, 64, "a GPU count");
}

Status ApplyGres(const std::string& v, SbatchOptions* o) {
  if (v.find(',') != std::string::npos || v.rfind("gpu", 0) != 0 || (v.size() > 3 && v[3] != ':')) {
    return Err("only GPUs can be asked as a gres (gpu:N or gpu:TYPE:N), not '" + v + "'");
  }
  if (v == "gpu") return o->gpus_per_node = 1, Status::Ok();
  std::string rest = v.substr(4), type;
  const size_t colon = rest.find(':');
  if (colon != std::string::npos) type = rest.substr(0, colon), rest = rest.substr(colon + 1);
  if (rest.find(':') != std::string::npos) return Err("'" + v + "' is not gpu:N or gpu:TYPE:N");
  HANGAR_ASSIGN_OR_RETURN(o->gpus_per_node, Count(rest, 1, 64, "a GPU count"));
  if (!type.empty()) o->gpu_type = type;
  return Status::Ok();
}

Status ApplyNodes(const std::string& v, SbatchOptions* o) {
  const size_t dash = v.find('-');
  if (dash != std::string::npos && v.substr(0, dash) != v.substr(dash + 1)) {
    return Err("a range of node counts ('" + v +
               "') is not supported: a Hangar gang has a fixed size; give one number");
  }
  HANGAR_ASSIGN_OR_RETURN(o->nodes, Count(v.substr(0, dash), 1, 100000, "a node count"));
  return Status::Ok();
}

Status ApplyMem(const std::string& v, SbatchOptions* o) {
  HANGAR_ASSIGN_OR_RETURN(int64_t mib, ParseSlurmMemoryMiB(v));
  if (mib == 0)
    return Err(
        "--mem=0 (all of a node's memory) has no Hangar equivalent; give a size such as 64G");
  o->mem_mib = mib;
  return Status::Ok();
}

Status ApplyExport(const std::string& v, SbatchOptions* o) {
  if (v == "NONE")
    return Status::Ok();  // what Hangar does anyway: the submitter's environment stays behind
  size_t start = 0;
  while (start <= v.size()) {
    const size_t comma = std::min(v.find(',', start), v.size());
    const std::string item = v.substr(start, comma - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Err("'" + item +
                 "': Hangar tasks do not get the submitter's environment (sbatch's --export=ALL or "
                 "a bare name); "
                 "give values as --export=NAME=value,NAME2=value2");
    }
    o->export_env.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    start = comma + 1;
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
    {"job-name", 'J', Known::kValue, SetString<&SbatchOptions::job_name>},
    {"nodes", 'N', Known::kValue, ApplyNodes},
    {"ntasks", 'n', Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(Count(v, 1, 100000, "a task count"), &o->ntasks);
     }},
    {"ntasks-per-node", 0, Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(Count(v, 1, 1024, "a task count"), &o->ntasks_per_node);
     }},
    {"gres", 0, Known::kValue, ApplyGres},
    {"gpus-per-node", 0, Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(TypedGpuCount(v, &o->gpu_type), &o->gpus_per_node);
     }},
    {"gpus-per-task", 0, Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(TypedGpuCount(v, &o->gpu_type), &o->gpus_per_task);
     }},
    {"cpus-per-gpu", 0, Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(Count(v, 1, 1024, "a CPU count"), &o->cpus_per_gpu);
     }},
    {"cpus-per-task", 'c', Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(Count(v, 1, 1024, "a CPU count"), &o->cpus_per_task);
     }},
    {"mem", 0, Known::kValue, ApplyMem},
    {"mem-per-gpu", 0, Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(ParseSlurmMemoryMiB(v), &o->mem_per_gpu_mib);
     }},
    {"time", 't', Known::kValue,
     [](const std::string& v, SbatchOptions* o) { return Into(ParseSlurmTime(v), &o->time); }},
    {"partition", 'p', Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       if (v.find(',') != std::string::npos)
         return Err("a list of partitions is not supported: give the one queue to charge");
       return SetString<&SbatchOptions::partition>(v, o);
     }},
    {"qos", 'q', Known::kValue, SetString<&SbatchOptions::qos>},
    {"array", 'a', Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       HANGAR_RETURN_IF_ERROR(ParseArraySpec(v).status());
       return SetString<&SbatchOptions::array>(v, o);
     }},
    {"dependency", 'd', Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(ParseDependency(v), &o->dependency);
     }},
    {"signal", 0, Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       return Into(ParseSignalRequest(v), &o->signal);
     }},
    {"output", 'o', Known::kValue, SetString<&SbatchOptions::output>},
    {"error", 'e', Known::kValue, SetString<&SbatchOptions::error>},
    {"chdir", 'D', Known::kValue, SetString<&SbatchOptions::chdir>},
    {"open-mode", 0, Known::kValue,
     [](const std::string& v, SbatchOptions* o) {
       if (v != "append" && v != "truncate")
         return Err("--open-mode is append or truncate, not '" + v + "'");
       return SetString<&SbatchOptions::open_mode>(v, o);
     }},
    {"export", 0, Known::kValue, ApplyExport},
    {"nice", 0, Known::kOptionalValue,
     [](const std::string& v, SbatchOptions* o) {
       if (v.empty()) return o->nice = 100, Status::Ok();  // sbatch's default adjustment
       const bool neg = v[0] == '-';
       HANGAR_ASSIGN_OR_RETURN(int n, Count(neg ? v.substr(1) : v, 0, 1000000, "a nice value"));
       return o->nice = neg ? -n : n, Status::Ok();
     }},
    // Hangar requeues preempted and drained jobs: what --requeue asks.
    {"requeue", 0, Known::kFlag, [](const std::string&, SbatchOptions*) { return Status::Ok(); }},
};

const Known* FindKnown(std::string_view name, char short_name) {
  for (const auto& k : kKnown) {
    if ((short_name && k.short_name == short_name) || (!short_name && name == k.name)) return &k;
  }
  return nullptr;
}

Status Unsupported(std::string_view name, char short_name, const std::string& where,
                   const std::string& text) {
  for (const auto& r : kRefused) {
    if ((short_name && r.short_name == short_name) || (!short_name && name == r.name)) {
      return Err(where + ": " + text + " is not supported by hangar sbatch; " + r.why);
    }
  }
  return Err(where + ": " + text +
             " is not supported by hangar sbatch; docs/slurm.md lists the directives it reads");
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

// Reads sbatch options from `words` (one #SBATCH line, or the command line) into `out`.
Status ReadWords(const std::vector<std::string>& words, int line, const std::string& where,
                 const std::string& prefix, std::vector<Directive>* out) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const bool is_long = w.rfind("--", 0) == 0 && w.size() > 2;
    if (!is_long && (w.size() < 2 || w[0] != '-')) {
      return Err(where + ": " + prefix + w +
                 " is not an sbatch option; write options like --time=10 or -t 10");
    }
    const size_t eq = w.find('=');
    const std::string name =
        is_long ? w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2) : "";
    const char short_name = is_long ? 0 : w[1];
    const Known* k = FindKnown(name, short_name);
    std::string text = prefix + w;
    if (!k) return Unsupported(name, short_name, where, text);
    Directive d{line, k->name, std::nullopt, text};
    if (is_long && eq != std::string::npos) d.value = w.substr(eq + 1);
    if (!is_long && w.size() > 2) d.value = w.substr(2);
    if (!d.value && k->arg == Known::kValue) {
      if (i + 1 >= words.size())
        return Err(where + ": " + text + " needs a value, e.g. --" + k->name + "=VALUE");
      d.value = words[++i];
      d.text += " " + *d.value;
    }
    if (d.value && k->arg == Known::kFlag)
      return Err(where + ": " + text + " takes no value; write --" + k->name);
    out->push_back(std::move(d));
  }
  return Status::Ok();
}

}  // namespace

std::string WhereOf(const Directive& d, const std::string& file) {
  return d.line == 0 ? "command line" : file + ":" + std::to_string(d.line);
}

StatusOr<std::vector<Directive>> ReadDirectives(std::string_view script, const std::string& file) {
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
      return Err(file + ":" + std::to_string(line_no) +
                 ": #SBATCH after the script's first command (line " +
                 std::to_string(first_command) + ") is ignored by sbatch; move it above line " +
                 std::to_string(first_command) + " or delete it");
    }
    if (directive) {
      HANGAR_RETURN_IF_ERROR(ReadWords(SplitWords(line.substr(7)), line_no,
                                       file + ":" + std::to_string(line_no), "#SBATCH ", &out));
      continue;
    }
    const size_t text = line.find_first_not_of(" \t");
    if (!first_command && text != std::string_view::npos && line[text] != '#')
      first_command = line_no;
  }
  return out;
}

StatusOr<std::vector<Directive>> ReadCommandLine(const std::vector<std::string>& words) {
  std::vector<Directive> out;
  HANGAR_RETURN_IF_ERROR(ReadWords(words, 0, "command line", "", &out));
  return out;
}

Status ApplyDirective(const Directive& d, const std::string& file, SbatchOptions* o) {
  const Known* k = FindKnown(d.name, 0);
  if (!k) return Unsupported(d.name, 0, WhereOf(d, file), d.text);
  Status s = k->apply(d.value.value_or(""), o);
  if (!s.ok()) return Err(WhereOf(d, file) + ": " + d.text + ": " + s.message());
  o->where[d.name] = WhereOf(d, file);
  return Status::Ok();
}

namespace {

// Digits only, as a number; nullopt otherwise (empty, signs, overflow).
std::optional<int64_t> Digits(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || s[0] == '-' || s[0] == '+')
    return std::nullopt;
  return v;
}

std::vector<std::string_view> SplitOn(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    parts.push_back(
        s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

}  // namespace

StatusOr<Duration> ParseSlurmTime(std::string_view text) {
  if (text == "UNLIMITED" || text == "INFINITE" || text == "unlimited" || text == "infinite")
    return Duration{0};
  auto bad = [&] {
    return Err("'" + std::string(text) +
               "' is not a Slurm time; write minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
               "D-HH:MM:SS");
  };
  std::string_view rest = text;
  int64_t days = 0;
  const size_t dash = text.find('-');
  if (dash != std::string_view::npos) {
    auto d = Digits(text.substr(0, dash));
    if (!d) return bad();
    days = *d;
    rest = text.substr(dash + 1);
  }
  std::vector<int64_t> parts;
  for (auto p : SplitOn(rest, ':')) {
    auto v = Digits(p);
    if (!v || *v > 1000000) return bad();
    parts.push_back(*v);
  }
  int64_t seconds = 0;
  if (dash != std::string_view::npos) {  // D-HH, D-HH:MM, D-HH:MM:SS
    if (parts.size() > 3) return bad();
    const int64_t scale[] = {3600, 60, 1};
    for (size_t i = 0; i < parts.size(); ++i) seconds += parts[i] * scale[i];
    seconds += days * 86400;
  } else if (parts.size() == 1) {
    seconds = parts[0] * 60;
  } else if (parts.size() == 2) {
    seconds = parts[0] * 60 + parts[1];
  } else if (parts.size() == 3) {
    seconds = parts[0] * 3600 + parts[1] * 60 + parts[2];
  } else {
    return bad();
  }
  return seconds * kSecond;
}

StatusOr<int64_t> ParseSlurmMemoryMiB(std::string_view text) {
  std::string_view num = text;
  int64_t scale_kib = 1024;  // M, the default
  if (!text.empty() && std::isalpha(static_cast<unsigned char>(text.back()))) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
    num.remove_suffix(1);
    if (u == 'K')
      scale_kib = 1;
    else if (u == 'M')
      scale_kib = 1024;
    else if (u == 'G')
      scale_kib = 1024 * 1024;
    else if (u == 'T')
      scale_kib = int64_t{1024} * 1024 * 1024;
    else
      num = "x";
  }
  auto v = Digits(num);
  if (!v || *v > (int64_t{1} << 40) / scale_kib) {
    return Err("'" + std::string(text) +
               "' is not a Slurm size; write a whole number with K, M (the default), G or T, "
               "e.g. 64G");
  }
  return (*v * scale_kib + 1023) / 1024;
}

StatusOr<Dependencies> ParseDependency(std::string_view text) {
  if (text.find('?') != std::string_view::npos) {
    return Err(
        "'?' (any one of the dependencies) is not supported; Hangar waits for all of them: join "
        "them with ','");
  }
  Dependencies deps;
  for (auto item : SplitOn(text, ',')) {
    auto fields = SplitOn(item, ':');
    const std::string_view type = fields[0];
    std::vector<uint64_t>* list = type == "afterok"      ? &deps.ok
                                  : type == "afterany"   ? &deps.any
                                  : type == "afternotok" ? &deps.notok
                                                         : nullptr;
    if (type == "after")
      return Err(
          "'after' (once the job has started) has no Hangar equivalent; use afterok or afterany");
    if (type == "singleton")
      return Err("'singleton' (one job of this name at a time) has no Hangar equivalent");
    if (type == "aftercorr")
      return Err(
          "'aftercorr' (element by element) is not supported; afterok:ID waits for the whole "
          "array");
    if (!list)
      return Err("'" + std::string(type) +
                 "' is not a dependency type hangar sbatch reads: afterok, afterany, afternotok");
    if (fields.size() < 2)
      return Err("'" + std::string(item) + "' names no job; write e.g. afterok:12:13");
    for (size_t i = 1; i < fields.size(); ++i) {
      if (fields[i].find('_') != std::string_view::npos) {
        return Err("'" + std::string(fields[i]) +
                   "': a dependency on one array element is not supported; depend on the "
                   "whole array (its job id)");
      }
      auto id = Digits(fields[i]);
      if (!id || *id == 0)
        return Err("'" + std::string(fields[i]) +
                   "' is not a job id (a number: see `hangar jobs`)");
      const uint64_t v = static_cast<uint64_t>(*id);
      if (std::find(list->begin(), list->end(), v) == list->end()) list->push_back(v);
    }
  }
  return deps;
}

StatusOr<SignalRequest> ParseSignalRequest(std::string_view text) {
  SignalRequest r;
  std::string_view s = text;
  if (s.rfind("R:", 0) == 0 || s.rfind("BR:", 0) == 0 || s.rfind("RB:", 0) == 0) {
    return Err("R: (a reservation's end) has no meaning in Hangar; write [B:]SIG@SECONDS");
  }
  if (s.rfind("B:", 0) == 0) r.batch_only = true, s.remove_prefix(2);
  const size_t at = s.find('@');
  const std::string sig(s.substr(0, at));
  auto num = job::ParseSignal(sig);
  if (!num) return Err("'" + sig + "' is not a signal; write e.g. USR1@120");
  if (*num == SIGKILL || *num == SIGSTOP)
    return Err("the warning signal cannot be KILL or STOP (they cannot be caught)");
  r.signal = *num;
  if (at != std::string_view::npos) {
    auto secs = Digits(s.substr(at + 1));
    if (!secs || *secs > 65535)
      return Err("'" + std::string(s.substr(at + 1)) + "' is not a number of seconds (0 to 65535)");
    r.before_end = *secs * kSecond;
  }
  return r;
}

StatusOr<ArraySpec> ParseArraySpec(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Err("'" + std::string(text) + "' is not an array spec (" + why +
               "); write e.g. 0-49, 0-49:2, 0-49%8 or 1,3,5-7");
  };
  ArraySpec spec;
  std::string_view body = text;
  if (const size_t pct = text.find('%'); pct != std::string_view::npos) {
    auto cap = Digits(text.substr(pct + 1));
    if (!cap || *cap < 1 || *cap > 100000) return bad("the cap after % is a count of at least 1");
    spec.max_running = static_cast<int>(*cap);
    body = text.substr(0, pct);
  }
  std::set<uint32_t> seen;
  for (auto item : SplitOn(body, ',')) {
    auto range = SplitOn(SplitOn(item, ':')[0], '-');
    auto step_part = SplitOn(item, ':');
    if (range.size() > 2 || step_part.size() > 2) return bad("'" + std::string(item) + "'");
    // As in Slurm and the job file's `array:` (which gets this text): a step only follows a range.
    if (step_part.size() == 2 && range.size() != 2) return bad("a step needs a range, e.g. 0-48:2");
    auto lo = Digits(range[0]);
    auto hi = range.size() == 2 ? Digits(range[1]) : lo;
    auto step = step_part.size() == 2 ? Digits(step_part[1]) : std::optional<int64_t>(1);
    if (!lo || !hi || !step) return bad("'" + std::string(item) + "'");
    if (*hi < *lo || *step < 1 || *hi > 4000000)
      return bad("'" + std::string(item) + "' runs backwards or past 4000000");
    for (int64_t i = *lo; i <= *hi; i += *step) {
      seen.insert(static_cast<uint32_t>(i));
      if (seen.size() > 100000) return bad("more than 100000 elements");
    }
  }
  spec.indices.assign(seen.begin(), seen.end());
  return spec;
}

}  // namespace hangar::cli::sbatch
