#ifndef CONVSTATE_SERVICES_GRPC_PROTOBUF_LOG_H_
#define CONVSTATE_SERVICES_GRPC_PROTOBUF_LOG_H_

#include <cstdint>

#include "services/telemetry/metrics.h"

namespace convstate {

// Routes libprotobuf's own log lines, which it writes to stderr: a request
// whose string field holds invalid UTF-8 makes it log one ERROR line, so a
// client could fill the log at will. Those are counted instead (in
// `invalid_utf8` when not null, and in InvalidUtf8Strings), with at most
// one summary line a minute; the call itself already answers
// INVALID_ARGUMENT naming the field. Any other line of the library's goes
// to the server log, at most ten a minute. Process-wide; the last call
// wins. `invalid_utf8` must stay valid until the next call (null to stop).
void RouteProtobufLogs(telemetry::Counter* invalid_utf8);

// Invalid-UTF-8 complaints libprotobuf made since the process started.
int64_t InvalidUtf8Strings();

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_GRPC_PROTOBUF_LOG_H_
