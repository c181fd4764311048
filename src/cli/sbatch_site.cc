#include "cli/sbatch_site.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace hangar::cli::sbatch {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
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

// Splits on `&` and `,` outside brackets and parentheses.
std::vector<std::string_view> AndTerms(std::string_view s) {
  std::vector<std::string_view> terms;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    const char c = i < s.size() ? s[i] : '&';
    if (c == '[' || c == '(') ++depth;
    if (c == ']' || c == ')') --depth;
    if (depth <= 0 && (c == '&' || c == ',')) {
      if (i > start) terms.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return terms;
}

std::string_view StripBrackets(std::string_view s) {
  while (s.size() >= 2 &&
         ((s.front() == '[' && s.back() == ']') || (s.front() == '(' && s.back() == ')')))
    s = s.substr(1, s.size() - 2);
  return s;
}

bool IsFeatureName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// Keeps in `models` only what is also in `more` (an `&` of two GPU types); the first sets it.
void Narrow(std::vector<std::string>* models, const std::vector<std::string>& more, bool* first) {
  if (*first) {
    *models = more;
    *first = false;
    return;
  }
  std::vector<std::string> both;
  for (const auto& m : *models)
    if (std::find(more.begin(), more.end(), m) != more.end()) both.push_back(m);
  *models = both;
}

}  // namespace

namespace {

Status ParseAccountQueues(std::string_view text, SiteFacts* site) {
  if (text == "same") {
    site->account_is_queue = true;
    return Status::Ok();
  }
  for (std::string_view entry : Split(text, ',')) {
    const size_t eq = entry.find('=');
    if (eq == 0 || eq == std::string_view::npos || eq + 1 == entry.size()) {
      return Status::InvalidArgument(
          "HANGAR_SBATCH_ACCOUNT_QUEUES: '" + std::string(entry) +
          "' is not ACCOUNT=QUEUE; write e.g. vision=team-vision,nlp=team-nlp, or same (an "
          "account is the queue of its name)");
    }
    site->account_queues[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::optional<std::string>> QueueOfAccount(const SiteFacts& site,
                                                    const std::string& account) {
  if (site.account_is_queue) return std::optional<std::string>(account);
  if (site.account_queues.empty()) return std::optional<std::string>();
  if (auto it = site.account_queues.find(account); it != site.account_queues.end())
    return std::optional<std::string>(it->second);
  std::string known;
  for (const auto& [a, q] : site.account_queues) known += (known.empty() ? "" : ", ") + a;
  return Status::NotFound("account " + account +
                          " is not one this site maps to a queue (HANGAR_SBATCH_ACCOUNT_QUEUES: " +
                          known + "); give one of those, or the queue with --partition");
}

StatusOr<SiteFacts> ParseSiteFacts(const char* gpu_types, const char* node_gpus,
                                   const char* account_queues) {
  SiteFacts site;
  if (account_queues && *account_queues)
    HANGAR_RETURN_IF_ERROR(ParseAccountQueues(account_queues, &site));
  if (node_gpus && *node_gpus) {
    const std::string_view v(node_gpus);
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), site.node_gpus);
    if (ec != std::errc() || p != v.data() + v.size() || site.node_gpus < 1 ||
        site.node_gpus > 64) {
      return Status::InvalidArgument(
          "HANGAR_SBATCH_NODE_GPUS='" + std::string(v) +
          "' is not a GPU count (1 to 64): set it to the GPUs of a whole node");
    }
  }
  if (!gpu_types || !*gpu_types) return site;
  for (std::string_view entry : Split(gpu_types, ',')) {
    const size_t eq = entry.find('=');
    std::vector<std::string> models;
    if (eq != std::string_view::npos) {
      for (std::string_view m : Split(entry.substr(eq + 1), '|'))
        if (!m.empty()) models.emplace_back(m);
    }
    if (eq == 0 || eq == std::string_view::npos || models.empty()) {
      return Status::InvalidArgument("HANGAR_SBATCH_GPU_TYPES: '" + std::string(entry) +
                                     "' is not TYPE=MODEL[|MODEL]; write e.g. "
                                     "a100=A100-SXM-80GB|A100-PCIE-40GB,l40s=L40S-48GB");
    }
    site.gpu_types[Lower(entry.substr(0, eq))] = std::move(models);
  }
  return site;
}

std::optional<std::vector<std::string>> ModelsOfGpuType(const SiteFacts& site,
                                                        std::string_view type) {
  const std::string key = Lower(type);
  if (auto it = site.gpu_types.find(key); it != site.gpu_types.end()) return it->second;
  for (const auto& [name, models] : site.gpu_types) {
    for (const auto& m : models)
      if (Lower(m) == key) return std::vector<std::string>{m};
  }
  return std::nullopt;
}

NodeRequirements ConstraintToNodes(std::string_view constraint, const SiteFacts& site) {
  NodeRequirements r;
  bool first_models = true;
  for (std::string_view raw : AndTerms(constraint)) {
    const std::string_view term = StripBrackets(raw);
    if (term.find('*') != std::string_view::npos) {
      r.dropped.push_back("'" + std::string(raw) +
                          "' asks a count of nodes with a feature, which a job file cannot say");
      continue;
    }
    if (term.find('|') != std::string_view::npos) {
      std::vector<std::string> any;
      bool all_gpu_types = true;
      for (std::string_view alt : Split(term, '|')) {
        const auto models = ModelsOfGpuType(site, StripBrackets(alt));
        if (!models) {
          all_gpu_types = false;
          break;
        }
        for (const auto& m : *models)
          if (std::find(any.begin(), any.end(), m) == any.end()) any.push_back(m);
      }
      if (all_gpu_types) {
        Narrow(&r.models, any, &first_models);
      } else {
        r.dropped.push_back(
            "'" + std::string(raw) +
            "' is a choice of features; a node_selector can only require all of its labels "
            "(a choice of GPU types can be said when HANGAR_SBATCH_GPU_TYPES maps each)");
      }
      continue;
    }
    if (!IsFeatureName(term)) {
      r.dropped.push_back("'" + std::string(raw) + "' is not a feature name a node label can hold");
      continue;
    }
    if (const auto models = ModelsOfGpuType(site, term)) {
      Narrow(&r.models, *models, &first_models);
      continue;
    }
    const std::string key(term);
    if (std::none_of(r.labels.begin(), r.labels.end(),
                     [&](const auto& kv) { return kv.first == key; }))
      r.labels.emplace_back(key, "true");
  }
  std::sort(r.labels.begin(), r.labels.end());
  if (!first_models && r.models.empty())
    r.dropped.push_back("the GPU types it requires together have no model in common");
  return r;
}

}  // namespace hangar::cli::sbatch
