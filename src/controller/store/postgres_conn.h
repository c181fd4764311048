// A libpq connection with the few calls the PostgreSQL store makes: statements with text
// parameters, results as owned values, and the store URL as it may be shown (no password).
// Not thread-safe: one owner, like the store.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace hangar::controller::pg {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// The SQLSTATE that hangar_check_epoch raises when a commit's lease epoch is no longer current.
inline constexpr const char* kFencedState = "HF001";

// The URL without its password (user, host, port, database and the socket folder), for messages.
std::string RedactUrl(const std::string& url);

class Connection {
 public:
  ~Connection();
  // Connects to `url` (a libpq URI: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=...]).
  // InvalidArgument when libpq cannot parse it; Unavailable when the server cannot be reached or
  // refuses; both sentences name the URL without its password.
  Status Connect(const std::string& url);
  // One statement outside a pipeline; `params` are sent as text.
  StatusOr<Result> Exec(const std::string& sql, const std::vector<std::string>& params = {});
  // Runs `statements` (each with its text parameters) in one transaction and one round trip (libpq
  // pipeline mode): BEGIN, the statements, COMMIT. OK only when COMMIT succeeded.
  Status ExecInTransaction(
      const std::vector<std::pair<const char*, std::vector<std::string>>>& statements);
  const std::string& shown() const { return shown_; }

 private:
  Status SendParams(const char* sql, const std::vector<std::string>& params);
  Status ReadPipeline(size_t statements);
  Status Failure(const std::string& what) const;
  // A failed result as a Status: Aborted for the fence (kFencedState), Unavailable otherwise.
  Status ResultError(const PGresult* r) const;

  PGconn* conn_ = nullptr;
  std::string shown_;
};

// A text column of row `row`; "" for NULL.
std::string Text(const PGresult* r, int row, int col);
int64_t Int(const PGresult* r, int row, int col);

}  // namespace hangar::controller::pg
