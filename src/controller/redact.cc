#include "controller/redact.h"

#include <algorithm>
#include <cctype>

namespace hangar::controller {
namespace {

constexpr std::string_view kMask = "REDACTED";

bool IsTokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

// A parameter name, as sent (percent-encoding and case aside), that names a credential.
bool NamesCredential(std::string_view raw) {
  std::string name;
  for (size_t i = 0; i < raw.size(); ++i) {
    const bool escaped = raw[i] == '%' && i + 2 < raw.size() &&
                         std::isxdigit(static_cast<unsigned char>(raw[i + 1])) &&
                         std::isxdigit(static_cast<unsigned char>(raw[i + 2]));
    const char c =
        escaped ? static_cast<char>(std::stoi(std::string(raw.substr(i + 1, 2)), nullptr, 16))
                : raw[i];
    if (escaped) i += 2;
    name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (std::string_view part : {"token", "secret", "password", "passwd", "auth", "credential",
                                "api_key", "apikey", "api-key"}) {
    if (name.find(part) != std::string::npos) return true;
  }
  return name == "key" || name == "sig" || name == "signature";
}

// Masks the value of each credential parameter of `query` (without its '?').
std::string RedactQuery(std::string_view query) {
  std::string out;
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find_first_of("&;", start);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view pair = query.substr(start, end - start);
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos && NamesCredential(pair.substr(0, eq))) {
      out.append(pair.substr(0, eq + 1)).append(kMask);
    } else {
      out.append(pair);
    }
    if (end < query.size()) out += query[end];
    start = end + 1;
  }
  return out;
}

// hgr_<id>_<secret> -> hgr_<id>_REDACTED, wherever it is.
std::string RedactHangarTokens(std::string s) {
  for (size_t at = s.find("hgr_"); at != std::string::npos; at = s.find("hgr_", at + 4)) {
    size_t id_end = at + 4;
    while (id_end < s.size() && std::isalnum(static_cast<unsigned char>(s[id_end]))) ++id_end;
    if (id_end >= s.size() || s[id_end] != '_') continue;
    size_t secret_end = id_end + 1;
    while (secret_end < s.size() && IsTokenChar(s[secret_end])) ++secret_end;
    if (secret_end == id_end + 1) continue;
    s.replace(id_end + 1, secret_end - id_end - 1, kMask);
  }
  return s;
}

}  // namespace

std::string RedactCredentials(std::string_view target) {
  const size_t q = target.find('?');
  std::string out(target.substr(0, q));
  if (q != std::string_view::npos) out += "?" + RedactQuery(target.substr(q + 1));
  return RedactHangarTokens(std::move(out));
}

}  // namespace hangar::controller
