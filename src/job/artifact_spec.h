// Artifacts in the job spec (docs/data.md): model weights, datasets and other files a
// task needs, named by their content. Each node stages them into its content-addressed cache
// before the task starts (peers share what they hold), and the task sees them read-only.
//
//   artifacts:
//     - source: https://models.example.com/llama-8b/model.safetensors
//       sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//       size: 16060522496          # bytes (or 64Mi, 2Gi: exact multiples)
//       path: /models/llama-8b.safetensors
//     - path: /data/shards          # a dataset split across the tasks: rank r gets shards r, r+N,
//     ...
//       shard_by: rank
//       shards:
//         - {source: "file:///data/imagenet/part-000.tar", sha256: ..., size: 512Mi}
//
// `path` is where the file appears in a container (absolute); a process task finds it under
// $HANGAR_ARTIFACTS (the leading '/' dropped). Shards appear as <path>/<file name of the source>.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hangar::job {

struct ArtifactObject {
  std::string source;  // https://, http:// or file:// URL of the origin copy
  std::string digest;  // "sha256:<64 lowercase hex>"
  int64_t bytes = 0;
  bool operator==(const ArtifactObject&) const = default;
};

struct ArtifactSpec {
  std::string path;
  std::vector<ArtifactObject> objects;  // one, or the shards
  bool shard_by_rank = false;
  bool operator==(const ArtifactSpec&) const = default;
};

// One object as a task sees it: the object, and where it appears ("/models/x",
// "/data/shards/part-000.tar").
struct ArtifactView {
  const ArtifactObject* object;
  std::string path;
};

// What task `rank` of a job with `world` tasks sees of `a`: every object, or (shard_by: rank)
// shards j with j % world == rank.
std::vector<ArtifactView> ArtifactViews(const ArtifactSpec& a, int rank, int world);

// "sha256:<hex>" from "<hex>" or "sha256:<hex>"; the error says what a digest looks like.
StatusOr<std::string> ParseSha256(std::string_view text);
// https://host/..., http://host/..., file:///absolute/path.
Status CheckArtifactSource(std::string_view url);
// Bytes from "123", "64Mi", "2Gi", "1Ti", "4Ki".
StatusOr<int64_t> ParseByteSize(std::string_view text);
// The last path segment of a source URL ("part-000.tar"), for a shard's file name.
std::string SourceFileName(std::string_view url);
// The whole artifact checked: a path (absolute for containers), objects with digests and
// sizes, and shards only with shard_by: rank. `container` says whether the group has an image.
Status CheckArtifact(const ArtifactSpec& a, bool container);
// Whether every file:// source of `a` lies, as spelled, under one of `roots` (the cluster's
// data.file_roots; a folder holds itself and what is below it). An early, friendly refusal: the
// agent checks again where links lead, opening the file as the job's user.
Status CheckFileSources(const ArtifactSpec& a, const std::vector<std::string>& roots);

}  // namespace hangar::job
