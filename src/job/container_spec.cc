#include "job/container_spec.h"

#include <algorithm>
#include <filesystem>
#include <regex>

namespace hangar::job {
namespace {

constexpr char kImageForm[] =
    "write it as [registry/]repository[:tag][@sha256:<digest>], e.g. 127.0.0.1:5000/team/train:1.2";

bool LooksLikeRegistry(std::string_view first) {
  return first.find('.') != std::string_view::npos || first.find(':') != std::string_view::npos ||
         first == "localhost";
}

bool CleanAbsolute(const std::string& p) {
  if (p.empty() || p.front() != '/') return false;
  return std::filesystem::path(p).lexically_normal().string() == p || p == "/";
}

}  // namespace

std::string ImageRef::Name() const {
  return registry.empty() ? repository : registry + "/" + repository;
}

std::string ImageRef::Reference() const {
  if (!digest.empty()) return Name() + "@" + digest;
  return Name() + ":" + (tag.empty() ? "latest" : tag);
}

bool ImageRef::OnLoopback() const {
  const std::string host = registry.substr(
      0, registry.rfind(':') == std::string::npos || registry.back() == ']' ? registry.size()
                                                                            : registry.rfind(':'));
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]";
}

StatusOr<ImageRef> ParseImageRef(std::string_view text) {
  static const std::regex digest_re("^sha256:[0-9a-f]{64}$");
  static const std::regex path_re("^[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$");
  static const std::regex tag_re("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$");
  const std::string original(text);
  if (text.empty())
    return Status::InvalidArgument("image must not be empty; " + std::string(kImageForm));
  ImageRef r;
  std::string rest(text);
  if (const size_t at = rest.find('@'); at != std::string::npos) {
    r.digest = rest.substr(at + 1);
    rest.resize(at);
    if (!std::regex_match(r.digest, digest_re)) {
      return Status::InvalidArgument("image '" + original + "': digest '" + r.digest +
                                     "' is not sha256: and 64 lowercase hex digits");
    }
  }
  if (const size_t slash = rest.find('/');
      slash != std::string::npos && LooksLikeRegistry(rest.substr(0, slash))) {
    r.registry = rest.substr(0, slash);
    rest = rest.substr(slash + 1);
  }
  if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
    r.tag = rest.substr(colon + 1);
    rest.resize(colon);
    if (!std::regex_match(r.tag, tag_re)) {
      return Status::InvalidArgument("image '" + original + "': tag '" + r.tag +
                                     "' is not a valid tag; " + kImageForm);
    }
  }
  if (!std::regex_match(rest, path_re)) {
    return Status::InvalidArgument(
        "image '" + original + "': repository '" + rest +
        "' must be lowercase letters, digits and . _ - separated by /; " + kImageForm);
  }
  r.repository = rest;
  return r;
}

std::string RegistryOf(const std::string& ref) {
  auto r = ParseImageRef(ref);
  return r.ok() && !r->registry.empty() ? r->registry : "the default registry";
}

RegistryError ClassifyRegistryError(std::string_view err) {
  auto has = [&](const char* s) { return err.find(s) != std::string_view::npos; };
  if (has("manifest unknown") || has("not found") || has("name unknown") || has("NAME_UNKNOWN") ||
      has("MANIFEST_UNKNOWN")) {
    return RegistryError::kNotFound;
  }
  if (has("connection refused") || has("no such host") || has("i/o timeout") || has("connect:") ||
      has("network is unreachable") || has("TLS handshake timeout")) {
    return RegistryError::kUnreachable;
  }
  return RegistryError::kOther;
}

StatusOr<Mount> ParseMount(std::string_view text) {
  const std::string t(text);
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t colon; (colon = t.find(':', start)) != std::string::npos; start = colon + 1) {
    parts.push_back(t.substr(start, colon - start));
  }
  parts.push_back(t.substr(start));
  const std::string form =
      "; write HOST:CONTAINER (read-only) or HOST:CONTAINER:rw, both absolute paths";
  if (parts.size() < 2 || parts.size() > 3)
    return Status::InvalidArgument("mount '" + t + "'" + form);
  Mount m{parts[0], parts[1], true};
  if (parts.size() == 3) {
    if (parts[2] != "ro" && parts[2] != "rw") {
      return Status::InvalidArgument("mount '" + t + "': mode '" + parts[2] + "' must be ro or rw");
    }
    m.read_only = parts[2] == "ro";
  }
  if (!CleanAbsolute(m.host) || !CleanAbsolute(m.path)) {
    return Status::InvalidArgument(
        "mount '" + t + "': both paths must be absolute and normalised (no .., no //)" + form);
  }
  return m;
}

std::string MountText(const Mount& m) {
  return m.host + ":" + m.path + (m.read_only ? ":ro" : ":rw");
}

Status CheckMountsAllowed(const std::vector<Mount>& mounts,
                          const std::vector<std::string>& allowed) {
  for (const Mount& m : mounts) {
    const bool ok = std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
      if (a == "/") return true;
      return m.host == a || (m.host.size() > a.size() && m.host.compare(0, a.size(), a) == 0 &&
                             m.host[a.size()] == '/');
    });
    if (ok) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    return Status::PermissionDenied(
        "mount " + MountText(m) + ": host path " + m.host +
        " is not under a path this cluster allows (" +
        (list.empty() ? std::string("none: cluster.yaml has no containers.mounts_allowed") : list) +
        "); ask an admin to add it to containers.mounts_allowed in cluster.yaml");
  }
  return Status::Ok();
}

}  // namespace hangar::job
