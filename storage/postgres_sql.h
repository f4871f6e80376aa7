#ifndef CONVSTATE_STORAGE_POSTGRES_SQL_H_
#define CONVSTATE_STORAGE_POSTGRES_SQL_H_

// The parts the PostgreSQL backend's statements (postgres_statements.cc) are
// composed of, and the statements composed in code. Internal to the
// backend's target; what each one is says its definition (postgres_sql.cc).

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "storage/postgres_statements.h"

namespace convstate::pg {

const std::string& ConversationColumns();
const std::string& ItemColumns();
const std::string& ChunkColumns();
std::string ItemsOf(ForkLayout layout, absl::string_view reader, absl::string_view where = "",
                    absl::string_view limit = "");
std::string Rekeyed(absl::string_view to, absl::string_view search);
std::string CopyItemsSql(absl::string_view to, absl::string_view from,
                         absl::string_view appended_version = "i.appended_version");
std::string ItemsWithPins(ForkLayout layout, absl::string_view reader, const char* encoding,
                          bool recounted, absl::string_view where = "",
                          absl::string_view limit = "");
std::string Named(int key);
std::vector<std::string> Columns(absl::Span<const char* const> list);
std::string PagedSelect(const std::vector<std::string>& columns, const std::string& from,
                        const std::string& order, const std::string& bytes, int rows_param,
                        int bytes_param);

std::string LoadContextSql(ForkLayout layout);
std::string LoadAppendedSql();
std::string InsertEventsSql(absl::string_view conv_key, absl::string_view from, int first);
std::string RecordViewStateSql(absl::string_view from, absl::string_view chunk_ids,
                               absl::string_view pins);
std::string SearchHistorySql(ForkLayout layout);
std::string SearchRepliesSql(ForkLayout layout);
std::string SearchOpeningSql(ForkLayout layout);

// The word of an indexed lexeme `u.lexeme` (its conversation's key and a
// '#' before it).
inline constexpr char kLexemeWord[] = "substr(u.lexeme, strpos(u.lexeme, '#') + 1)";

}  // namespace convstate::pg

#endif  // CONVSTATE_STORAGE_POSTGRES_SQL_H_
