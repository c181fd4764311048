#include "controller/store/testing/shared_postgres.h"

#include <gtest/gtest.h>

#include <cctype>
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
  std::string name = "t_";
  for (char c : std::string(info->test_suite_name()) + "_" + info->name()) {
    name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
  }
  name = name.substr(0, 60);
  Status s = server->CreateDatabase(name);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return server->Url(name);
}

}  // namespace hangar::controller::testing
