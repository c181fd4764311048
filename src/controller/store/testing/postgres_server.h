// PostgresServer: a PostgreSQL server of its own for a test or a benchmark. initdb and postgres
// (Debian's /usr/lib/postgresql/VERSION/bin, or $HANGAR_POSTGRES_BIN) in a fresh folder under
// /tmp, listening on 127.0.0.1 on a free port and on a unix socket in that folder; as the user
// `nobody` when we are root (PostgreSQL refuses to run as root). The destructor stops the server
// (fast shutdown) and removes the folder. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace hangar::controller::testing {

class PostgresServer {
 public:
  struct Options {
    // fsync off makes a throwaway server faster; benchmarks that measure durable commits keep it
    // on.
    bool fsync = true;
  };
  // Starts a server with the superuser `hangar` (trust authentication) and a database `hangar`.
  // Unavailable, with the server's log, when it does not start.
  static StatusOr<std::unique_ptr<PostgresServer>> Start(const Options& options);
  static StatusOr<std::unique_ptr<PostgresServer>> Start() { return Start(Options{}); }
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // postgres://hangar@127.0.0.1:PORT/DATABASE
  std::string Url(const std::string& database = "hangar") const;
  // Creates (dropping first, if it exists) an empty database: one per test keeps tests apart.
  Status CreateDatabase(const std::string& name);
  // Stops the server (fast shutdown: every session ends) and starts it again on the same port and
  // data, as an operator's restart would.
  Status Restart();
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }

 private:
  PostgresServer() = default;
  Status Init(const Options& options);
  Status Launch(const Options& options, int port = 0);  // port 0: a free one
  Status WaitReady();
  void Shutdown();
  std::string LogTail() const;

  Options options_;
  std::string bin_, dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool drop_privileges_ = false;
};

}  // namespace hangar::controller::testing
