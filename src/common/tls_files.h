// Where a daemon's TLS material is: the cluster CA, and its own certificate and key
// (`hangar certs`). `--tls-dir DIR` names the layout `hangar certs` writes; the three files can
// also be given one by one.
#pragma once

#include <string>

#include "common/status.h"

namespace hangar {

struct TlsFiles {
  std::string ca, cert, key;
  bool empty() const { return ca.empty() && cert.empty() && key.empty(); }
};

// From `--tls-dir DIR` (DIR/ca.crt, DIR/STEM.crt, DIR/STEM.key), overridden by any of the three
// given alone. Empty when none was given; an error naming what is missing when only some were.
StatusOr<TlsFiles> ResolveTls(const std::string& dir, const std::string& stem,
                              TlsFiles explicit_files);

// The whole of a PEM file, or an error that names it and says how to make it.
StatusOr<std::string> ReadPem(const std::string& path);

}  // namespace hangar
