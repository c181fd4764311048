// Container tasks in the job spec: a task group that names an OCI image runs in a
// container on its nodes (docs/containers.md).
//
//   image: 127.0.0.1:5000/team/train:1.2     # a tag is resolved to a digest once, at submission
//   workdir: /workspace                       # inside the container
//   mounts: ["/data/imagenet:/data", "/scratch/run7:/out:rw"]   # read-only unless :rw
//   shm_size: 8Gi
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hangar::job {

// An OCI image reference, as Docker and podman read it: [registry/]repository[:tag][@digest].
struct ImageRef {
  std::string registry;    // "127.0.0.1:5000", "nvcr.io"; empty: the client's default
  std::string repository;  // "team/train"
  std::string tag;         // "1.2"; empty when only a digest (or nothing) is given
  std::string digest;      // "sha256:<64 hex>"; empty when not pinned
  // registry/repository (no tag, no digest).
  std::string Name() const;
  // registry/repository@digest when pinned, else registry/repository:tag (":latest" if none).
  std::string Reference() const;
  // Whether pulls from this registry go without TLS: 127.0.0.1, [::1] and localhost, any port.
  bool OnLoopback() const;
};

// The error names the part that is wrong and shows the form.
StatusOr<ImageRef> ParseImageRef(std::string_view text);

// "127.0.0.1:5000" for a reference that names its registry, else "the default registry"; for
// messages.
std::string RegistryOf(const std::string& ref);

// What a registry client's (podman's, skopeo's) error output says went wrong.
enum class RegistryError { kOther, kNotFound, kUnreachable };
RegistryError ClassifyRegistryError(std::string_view err);

struct Mount {
  std::string host;  // an absolute path on the node
  std::string path;  // an absolute path in the container
  bool read_only = true;
  bool operator==(const Mount&) const = default;
};

// "HOST:CONTAINER", "HOST:CONTAINER:ro" or "HOST:CONTAINER:rw"; both paths absolute.
StatusOr<Mount> ParseMount(std::string_view text);
std::string MountText(const Mount& m);  // the form ParseMount reads

struct ContainerSpec {
  std::string image;  // as written; after submission, pinned to its digest (ImageRef::Reference)
  std::vector<Mount> mounts;
  int64_t shm_size_mib = 0;  // 0: podman's default (64 MiB)
  bool empty() const { return image.empty(); }
};

// Whether every mount's host path lies under one of `allowed` (absolute paths; a path is under
// itself). The error names the mount and lists what the cluster allows.
Status CheckMountsAllowed(const std::vector<Mount>& mounts,
                          const std::vector<std::string>& allowed);

}  // namespace hangar::job
