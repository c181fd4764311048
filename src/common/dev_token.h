// `hangar dev`'s per-run token: where it is kept, and how the CLI finds it from any folder.
//
// `hangar dev` makes a new token at every start and writes it, readable by its own account only,
// to DIR/dev-token and to a record keyed by its API port in a folder of that account's:
// $XDG_RUNTIME_DIR/hangar/dev/PORT.token, else $HOME/.config/hangar/dev/PORT.token (folders
// 0700, files 0600; the first line is the token, the second the pid of `hangar dev`). The CLI
// pointed at a loopback address with no token of its own reads the record of that port, if it
// belongs to this account and its `hangar dev` still runs.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "common/status.h"

namespace hangar::dev_token {

// A fresh token: "hgr_dev_" and 64 hex digits (256 random bits).
std::string Make();

// Writes `text` to `path` readable and writable by this account only (0600), replacing what was
// there (a link at `path` is replaced, never followed).
Status WritePrivateFile(const std::string& path, const std::string& text);

// The first line of `path` when it is a regular file of this account that no one else may read
// (what the controller checks before it takes a token file); else a sentence saying why not.
StatusOr<std::string> ReadPrivateFile(const std::string& path);

// Where the records are, for this account ("" when neither folder can be named).
std::string RecordDir();
// Records `token` for the API on loopback port `port`, owned by process `owner`.
Status WriteRecord(int port, const std::string& token, pid_t owner);
// Removes the port's record if `owner` wrote it.
void RemoveRecord(int port, pid_t owner);
// The token for `server` ("http://127.0.0.1:8080", "localhost:8080", "https://[::1]:8443"): the
// record of its port when the host is a loopback address and the record's `hangar dev` runs.
std::optional<std::string> FindForServer(const std::string& server);

}  // namespace hangar::dev_token
