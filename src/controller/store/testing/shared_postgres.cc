#include "controller/store/testing/shared_postgres.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <cctype>
#include <cstdio>
#include <functional>
#include <memory>

namespace hangar::controller::testing {
namespace {

std::unique_ptr<PostgresServer>& Server() {
  static std::unique_ptr<PostgresServer> server;
  return server;
}

class StopAtEnd : public ::testing::Environment {
 public:
  void TearDown() override { Server().reset(); }
};

}  // namespace

PostgresServer* SharedPostgres() {
  static bool registered = false;
  if (!registered) {
    ::testing::AddGlobalTestEnvironment(new StopAtEnd);
    registered = true;
  }
  if (!Server()) {
    auto started = PostgresServer::Start();
    if (!started.ok()) {
      ADD_FAILURE() << started.status().ToString();
      return nullptr;
    }
    Server() = std::move(started).value();
  }
  return Server().get();
}

std::string FreshDatabaseUrl() {
  PostgresServer* server = SharedPostgres();
  if (!server) return "postgres://unstarted";
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  // PostgreSQL keeps 63 bytes of a name: a readable prefix and a hash of the whole test name.
  const std::string full = std::string(info->test_suite_name()) + "." + info->name();
  std::string name = "t_";
  for (char c : full.substr(0, 40)) {
    name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
  }
  char hash[20];
  std::snprintf(hash, sizeof hash, "_%016zx", std::hash<std::string>{}(full));
  name += hash;
  Status s = server->CreateDatabase(name);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return server->Url(name);
}

std::string Sql(const std::string& url, const std::string& sql) {
  PGconn* c = PQconnectdb(url.c_str());
  PGresult* r = PQexec(c, sql.c_str());
  const ExecStatusType st = PQresultStatus(r);
  EXPECT_TRUE(st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
      << sql << ": " << PQresultErrorMessage(r);
  std::string out = st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  PQfinish(c);
  return out;
}

}  // namespace hangar::controller::testing
