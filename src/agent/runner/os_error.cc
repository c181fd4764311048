#include "agent/runner/os_error.h"

#include <cerrno>
#include <cstring>

namespace hangar::agent {

std::string ErrnoText(int err) {
  // strerrordesc_np (glibc) returns a static string: safe from any thread, unlike strerror().
  const char* text = strerrordesc_np(err);
  return text != nullptr ? text : "error " + std::to_string(err);
}

Status ErrnoStatus(int err, const std::string& what) {
  std::string message = what + ": " + ErrnoText(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
    case ESRCH:
      return Status::NotFound(std::move(message));
    case EACCES:
    case EPERM:
    case EROFS:
      return Status::PermissionDenied(std::move(message));
    case EAGAIN:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOSPC:
      return Status::ResourceExhausted(std::move(message));
    default:
      return Status::Internal(std::move(message));
  }
}

}  // namespace hangar::agent
