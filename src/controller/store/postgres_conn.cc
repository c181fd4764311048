#include "controller/store/postgres_conn.h"

#include <cstdlib>

namespace hangar::controller::pg {
namespace {

// libpq's messages end in a newline and may span lines ("...failed: Connection refused\n\tIs the
// server running..."): one line, single spaces, no final full stop (our sentence goes on).
std::string Trim(const std::string& in) {
  std::string s;
  for (char c : in) {
    if (c == '\n' || c == '\t') c = ' ';
    if (c == ' ' && (s.empty() || s.back() == ' ')) continue;
    s += c;
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '.')) s.pop_back();
  return s;
}

}  // namespace

Status Connection::ResultError(const PGresult* r) const {
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  if (state && std::string(state) == kFencedState) {
    const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    return Status::Aborted(
        "store " + shown_ + ": " + (primary ? primary : "fenced") +
        "; this controller must stop acting (nothing of this batch was written)");
  }
  return Status::Unavailable("store " + shown_ + ": " + Trim(PQresultErrorMessage(r)));
}

std::string RedactUrl(const std::string& url) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (!opts) {
    PQfreemem(err);
    // Unparsable: shown as written, less what may be a password (USER:PASSWORD@).
    const auto scheme = url.find("://");
    const auto at = url.rfind('@');
    if (at == std::string::npos || scheme == std::string::npos || at < scheme) return url;
    const std::string user = url.substr(scheme + 3, at - scheme - 3);
    return url.substr(0, scheme + 3) + user.substr(0, user.find(':')) + url.substr(at);
  }
  std::string user, host, port, db;
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (!o->val) continue;
    const std::string k = o->keyword;
    if (k == "user") user = o->val;
    if (k == "host") host = o->val;
    if (k == "port") port = o->val;
    if (k == "dbname") db = o->val;
  }
  PQconninfoFree(opts);
  const bool socket = !host.empty() && host[0] == '/';
  return "postgres://" + (user.empty() ? "" : user + "@") + (socket ? "" : host) +
         (port.empty() ? "" : ":" + port) + "/" + db + (socket ? "?host=" + host : "");
}

Connection::~Connection() {
  if (conn_) PQfinish(conn_);
}

Status Connection::Connect(const std::string& url) {
  shown_ = RedactUrl(url);
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (!opts) {
    std::string why = err ? Trim(err) : "unparsable";
    PQfreemem(err);
    return Status::InvalidArgument("the store URL " + shown_ +
                                   " is not a PostgreSQL URL libpq understands (" + why +
                                   "); write it as postgres://USER@HOST:PORT/DATABASE");
  }
  PQconninfoFree(opts);
  // Defaults that the URL's own parameters override (they come later): give up on a silent host
  // after 10 s instead of the TCP timeout, and name ourselves in pg_stat_activity.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"10", "hangar", url.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
    const std::string why = conn_ ? Trim(PQerrorMessage(conn_)) : "out of memory";
    return Status::Unavailable(
        "cannot reach the store " + shown_ + ": " + why +
        "; check that PostgreSQL runs there and that the URL's user, password and "
        "database are right (the database must exist: createdb)");
  }
  return Status::Ok();
}

Status Connection::Failure(const std::string& what) const {
  return Status::Unavailable("store " + shown_ + ": " + what + ": " + Trim(PQerrorMessage(conn_)));
}

StatusOr<Result> Connection::Exec(const std::string& sql, const std::vector<std::string>& params) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  // Without parameters, the simple protocol: it takes several statements (a migration) at once.
  Result r(values.empty() ? PQexec(conn_, sql.c_str())
                          : PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()),
                                         nullptr, values.data(), nullptr, nullptr, 0));
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    return r ? ResultError(r.get()) : Failure("no answer");
  }
  return r;
}

Status Connection::SendParams(const char* sql, const std::vector<std::string>& params) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  if (PQsendQueryParams(conn_, sql, static_cast<int>(values.size()), nullptr, values.data(),
                        nullptr, nullptr, 0) != 1) {
    return Failure("cannot send a statement");
  }
  return Status::Ok();
}

Status Connection::ExecInTransaction(
    const std::vector<std::pair<const char*, std::vector<std::string>>>& statements) {
  if (PQenterPipelineMode(conn_) != 1) return Failure("cannot start a pipeline");
  Status s = SendParams("BEGIN", {});
  for (const auto& [sql, params] : statements) {
    if (s.ok()) s = SendParams(sql, params);
  }
  if (s.ok()) s = SendParams("COMMIT", {});
  if (s.ok() && PQpipelineSync(conn_) != 1) s = Failure("cannot send the batch");
  if (s.ok()) s = ReadPipeline(statements.size() + 2);
  PQexitPipelineMode(conn_);
  // A statement that failed leaves the transaction open and aborted: end it, so that the
  // connection is clean for the next call.
  if (PQtransactionStatus(conn_) == PQTRANS_INERROR ||
      PQtransactionStatus(conn_) == PQTRANS_INTRANS) {
    (void)Exec("ROLLBACK");
  }
  return s;
}

// The statements' results in order, then the sync point; the first error wins.
Status Connection::ReadPipeline(size_t statements) {
  Status first;
  for (size_t i = 0; i < statements; ++i) {
    Result r(PQgetResult(conn_));
    if (!r) return first.ok() ? Failure("the connection ended before the batch's answer") : first;
    const ExecStatusType st = PQresultStatus(r.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && first.ok()) {
      first =
          st == PGRES_PIPELINE_ABORTED ? Failure("the batch was aborted") : ResultError(r.get());
    }
    while (Result extra{PQgetResult(conn_)}) {  // the NULL that ends each statement's results
    }
  }
  Result sync(PQgetResult(conn_));
  if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) {
    return first.ok() ? Failure("the batch's end was not acknowledged") : first;
  }
  return first;
}

std::string Text(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return "";
  return std::string(PQgetvalue(r, row, col), static_cast<size_t>(PQgetlength(r, row, col)));
}

int64_t Int(const PGresult* r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0 : std::strtoll(PQgetvalue(r, row, col), nullptr, 10);
}

}  // namespace hangar::controller::pg
