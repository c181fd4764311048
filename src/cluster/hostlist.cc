#include "cluster/hostlist.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace hangar::cluster {

namespace {
// b is a's successor in one range: n9,n10 are; gpu09,gpu10 are (same width); n09,n10 are not
// (zero-padded and not).
bool Follows(const std::string& a, const std::string& b) {
  const bool padded = (a.size() > 1 && a[0] == '0') || (b.size() > 1 && b[0] == '0');
  return std::stoll(b) == std::stoll(a) + 1 && (!padded || a.size() == b.size());
}
}  // namespace

std::string CompressHostList(const std::vector<std::string>& hosts) {
  // prefix -> numeric suffixes (as written, to keep leading zeros), in first-seen order of prefixes
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> numbered;
  std::vector<std::string> plain;
  for (const auto& h : hosts) {
    size_t cut = h.size();
    while (cut > 0 && std::isdigit(static_cast<unsigned char>(h[cut - 1]))) --cut;
    if (cut == h.size() || cut == 0 || h.size() - cut > 18) {  // no number, or too long for one
      plain.push_back(h);
      continue;
    }
    const std::string prefix = h.substr(0, cut);
    if (!numbered.count(prefix)) order.push_back(prefix);
    numbered[prefix].push_back(h.substr(cut));
  }
  std::string out;
  for (const auto& prefix : order) {
    auto& nums = numbered[prefix];
    std::sort(nums.begin(), nums.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    nums.erase(std::unique(nums.begin(), nums.end()), nums.end());
    if (nums.size() == 1) {
      out += (out.empty() ? "" : ",") + prefix + nums[0];
      continue;
    }
    std::string ranges;
    for (size_t i = 0; i < nums.size();) {
      size_t j = i;
      while (j + 1 < nums.size() && Follows(nums[j], nums[j + 1])) ++j;
      ranges += (ranges.empty() ? "" : ",") + nums[i] + (j > i ? "-" + nums[j] : "");
      i = j + 1;
    }
    out += (out.empty() ? "" : ",") + prefix + "[" + ranges + "]";
  }
  for (const auto& p : plain) out += (out.empty() ? "" : ",") + p;
  return out;
}

namespace {

// Splits at commas outside brackets.
std::vector<std::string> TopLevel(std::string_view list) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

constexpr size_t kMaxNames = 1000000;

Status ExpandOne(const std::string& item, std::string_view whole, std::vector<std::string>* out) {
  const size_t open = item.find('[');
  if (open == std::string::npos) {
    if (item.find(']') != std::string::npos) {
      return Status::InvalidArgument("host list '" + std::string(whole) + "': ']' without '['");
    }
    out->push_back(item);
    return Status::Ok();
  }
  const size_t close = item.find(']', open);
  if (close == std::string::npos) {
    return Status::InvalidArgument("host list '" + std::string(whole) + "': '[' without ']'");
  }
  const std::string prefix = item.substr(0, open), rest = item.substr(close + 1);
  for (const std::string& range : TopLevel(item.substr(open + 1, close - open - 1))) {
    const size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash),
                      hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    auto digits = [](const std::string& s) {
      return !s.empty() && s.size() <= 18 &&
             std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!digits(lo) || !digits(hi) || std::stoll(lo) > std::stoll(hi) ||
        std::stoll(hi) - std::stoll(lo) >= 100000) {
      return Status::InvalidArgument(
          "host list '" + std::string(whole) + "': '" + range +
          "' is not a range such as 1-4 or 01-16 (at most 100000 names)");
    }
    for (long long i = std::stoll(lo); i <= std::stoll(hi); ++i) {
      if (out->size() >= kMaxNames) {
        return Status::InvalidArgument("host list '" + std::string(whole).substr(0, 200) +
                                       "' names more than " + std::to_string(kMaxNames) + " hosts");
      }
      std::string n = std::to_string(i);
      if (n.size() < lo.size()) n.insert(0, lo.size() - n.size(), '0');
      HANGAR_RETURN_IF_ERROR(ExpandOne(prefix + n + rest, whole, out));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<std::string>> ExpandHostList(std::string_view list) {
  std::vector<std::string> out;
  for (const std::string& item : TopLevel(list)) {
    if (item.empty()) continue;
    HANGAR_RETURN_IF_ERROR(ExpandOne(item, list, &out));
  }
  return out;
}

}  // namespace hangar::cluster
