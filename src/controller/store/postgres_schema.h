// The PostgreSQL store's schema: numbered migrations, recorded in the table schema_version.
#pragma once

#include "common/status.h"
#include "controller/store/postgres_conn.h"

namespace hangar::controller::pg {

// The newest schema this binary knows.
int LatestSchemaVersion();

// Applies, in one transaction, every migration newer than the database's schema_version (all of
// them on an empty database). FailedPrecondition when the database is newer than this binary.
Status Migrate(Connection& conn);

}  // namespace hangar::controller::pg
