#include "job/artifact_spec.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>

namespace hangar::job {

std::vector<ArtifactView> ArtifactViews(const ArtifactSpec& a, int rank, int world) {
  std::vector<ArtifactView> out;
  if (!a.shard_by_rank) {
    for (const auto& o : a.objects) out.push_back({&o, a.path});
    return out;
  }
  const int n = std::max(1, world);
  std::string dir = a.path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  for (size_t j = 0; j < a.objects.size(); ++j) {
    if (static_cast<int>(j % n) == rank % n)
      out.push_back({&a.objects[j], dir + "/" + SourceFileName(a.objects[j].source)});
  }
  return out;
}

StatusOr<std::string> ParseSha256(std::string_view text) {
  std::string_view hex = text;
  if (hex.starts_with("sha256:")) hex.remove_prefix(7);
  const bool ok = hex.size() == 64 && std::all_of(hex.begin(), hex.end(), [](char c) {
                    return std::isxdigit(static_cast<unsigned char>(c));
                  });
  if (!ok) {
    return Status::InvalidArgument(
        "sha256 '" + std::string(text) +
        "' is not a SHA-256 digest: give 64 hex digits (what `sha256sum FILE` prints), "
        "optionally after 'sha256:'");
  }
  std::string out = "sha256:";
  for (char c : hex) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status CheckArtifactSource(std::string_view url) {
  auto rest_after = [&](std::string_view scheme) { return url.substr(scheme.size()); };
  if (url.starts_with("file://")) {
    std::string_view p = rest_after("file://");
    if (p.empty() || p.front() != '/') {
      return Status::InvalidArgument("source '" + std::string(url) +
                                     "': a file:// source names an absolute path (file:///data/x)");
    }
    return Status::Ok();
  }
  for (std::string_view scheme : {"https://", "http://"}) {
    if (url.starts_with(scheme)) {
      std::string_view r = rest_after(scheme);
      const size_t slash = r.find('/');
      if (r.empty() || slash == 0 || slash == std::string_view::npos || slash + 1 == r.size()) {
        return Status::InvalidArgument("source '" + std::string(url) + "' names no file: write " +
                                       std::string(scheme) + "HOST[:PORT]/PATH");
      }
      return Status::Ok();
    }
  }
  return Status::InvalidArgument(
      "source '" + std::string(url) +
      "' is not a URL Hangar can fetch: use https://, http:// or file:///ABSOLUTE/PATH");
}

StatusOr<int64_t> ParseByteSize(std::string_view text) {
  size_t i = 0;
  int64_t v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (v > std::numeric_limits<int64_t>::max() / 10 - 10)
      return Status::InvalidArgument("size '" + std::string(text) + "' is too large");
    v = v * 10 + (text[i++] - '0');
  }
  const std::string_view unit = text.substr(i);
  int shift = -1;
  if (unit.empty())
    shift = 0;
  else if (unit == "Ki")
    shift = 10;
  else if (unit == "Mi")
    shift = 20;
  else if (unit == "Gi")
    shift = 30;
  else if (unit == "Ti")
    shift = 40;
  if (i == 0 || shift < 0) {
    return Status::InvalidArgument(
        "size '" + std::string(text) +
        "' is not a size in bytes: write the exact byte count (what `stat -c %s FILE` "
        "prints), or a whole number of Ki, Mi, Gi or Ti");
  }
  if (v > (std::numeric_limits<int64_t>::max() >> shift))
    return Status::InvalidArgument("size '" + std::string(text) + "' is too large");
  return v << shift;
}

std::string SourceFileName(std::string_view url) {
  const size_t q = url.find_first_of("?#");
  if (q != std::string_view::npos) url = url.substr(0, q);
  const size_t slash = url.rfind('/');
  return std::string(slash == std::string_view::npos ? url : url.substr(slash + 1));
}

Status CheckArtifact(const ArtifactSpec& a, bool container) {
  if (a.path.empty())
    return Status::InvalidArgument("an artifact needs path: where the file appears in the task");
  if (container && a.path.front() != '/') {
    return Status::InvalidArgument("artifact path '" + a.path +
                                   "' is a path inside the container and must be absolute");
  }
  if (a.path.find("..") != std::string::npos)
    return Status::InvalidArgument("artifact path '" + a.path + "' must not contain '..'");
  if (a.objects.empty()) {
    return Status::InvalidArgument(
        "artifact '" + a.path +
        "' has no source: give source, sha256 and size (or shards with shard_by: rank)");
  }
  for (const auto& o : a.objects) {
    if (Status s = CheckArtifactSource(o.source); !s.ok())
      return Status::InvalidArgument("artifact '" + a.path + "': " + s.message());
    if (o.digest.empty()) {
      return Status::InvalidArgument(
          "artifact '" + a.path + "' (" + o.source +
          ") has no sha256: every artifact is named by its digest, so that each node can "
          "verify what it staged; add sha256: (what `sha256sum FILE` prints)");
    }
    if (o.bytes <= 0) {
      return Status::InvalidArgument(
          "artifact '" + a.path + "' (" + o.source +
          ") has no size: add size: with its byte count (what `stat -c %s FILE` prints)");
    }
    if (a.shard_by_rank && SourceFileName(o.source).empty()) {
      return Status::InvalidArgument("shard '" + o.source + "' of artifact '" + a.path +
                                     "' has no file name to appear under");
    }
  }
  return Status::Ok();
}

Status CheckFileSources(const ArtifactSpec& a, const std::vector<std::string>& roots) {
  for (const auto& o : a.objects) {
    if (!std::string_view(o.source).starts_with("file://")) continue;
    const std::string path = std::filesystem::path(o.source.substr(7)).lexically_normal().string();
    const bool under = std::any_of(roots.begin(), roots.end(), [&](const std::string& r) {
      if (r == "/") return true;
      return path == r ||
             (path.size() > r.size() && path.compare(0, r.size(), r) == 0 && path[r.size()] == '/');
    });
    if (under) continue;
    std::string list;
    for (const auto& r : roots) list += (list.empty() ? "" : ", ") + r;
    return Status::PermissionDenied(
        "artifact '" + a.path + "': source " + o.source +
        " is not under a folder this cluster lets jobs read (" +
        (list.empty() ? std::string("none: cluster.yaml sets no data.file_roots")
                      : "data.file_roots: " + list) +
        "); ask an admin to add its folder to data.file_roots in cluster.yaml, or "
        "serve the file over https://");
  }
  return Status::Ok();
}

}  // namespace hangar::job
