// One PostgresServer for a whole test binary, started by the first test that needs it and
// stopped when the binary's tests end (a GoogleTest environment). Each test takes a database of
// its own (FreshDatabaseUrl), so tests stay apart on the shared server.
#pragma once

#include <string>

#include "controller/store/testing/postgres_server.h"

namespace hangar::controller::testing {

// The server; fails the calling test (ADD_FAILURE) and returns nullptr if it cannot start.
PostgresServer* SharedPostgres();

// An empty database named after the running test (dropped and made anew), as a store URL.
std::string FreshDatabaseUrl();

// Runs `sql` (one or more statements) on a connection of the test's own; returns the first value
// of the last result ("" when none). A failure fails the calling test.
std::string Sql(const std::string& url, const std::string& sql);

}  // namespace hangar::controller::testing
