#ifndef CONVSTATE_MIGRATIONS_EMBEDDED_MIGRATIONS_H_
#define CONVSTATE_MIGRATIONS_EMBEDDED_MIGRATIONS_H_

#include <string>
#include <vector>

namespace convstate {

// One numbered schema change from migrations/NNNN_name.sql.
struct Migration {
  int version;
  std::string name;
  std::string sql;
};

// Every migration in this directory, ordered by version.
const std::vector<Migration>& EmbeddedMigrations();

}  // namespace convstate

#endif  // CONVSTATE_MIGRATIONS_EMBEDDED_MIGRATIONS_H_
