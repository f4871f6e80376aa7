#ifndef CONVSTATE_SERVICES_COMMON_TRACE_H_
#define CONVSTATE_SERVICES_COMMON_TRACE_H_

// Spans as OpenTelemetry defines them, without its SDK: W3C trace context,
// samplers, spans that hand themselves to a sink when they end, and the
// span the current thread works for. Knows nothing of how spans are sent
// (see otlp_exporter.h).

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace convstate::telemetry {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

struct SpanContext {
  TraceId trace_id{};
  SpanId span_id{};
  bool sampled = false;
  // The W3C tracestate header, passed on unchanged.
  std::string trace_state;

  // Neither id is all zeros.
  bool valid() const;
};

// Parses a W3C `traceparent` (version-traceid-spanid-flags, lowercase hex)
// and keeps `tracestate` with it. nullopt when malformed, when an id is all
// zeros, or for version ff; a later version is read by its first four
// fields, as the recommendation says. A `tracestate` that is not printable
// ASCII of at most 512 characters is dropped.
std::optional<SpanContext> ParseTraceparent(absl::string_view traceparent,
                                            absl::string_view tracestate);
// "00-<trace id>-<span id>-<01 or 00>".
std::string FormatTraceparent(const SpanContext& context);
std::string ToHex(const uint8_t* bytes, size_t size);

using AttributeValue = std::variant<std::string, int64_t, double, bool>;
struct Attribute {
  std::string key;
  AttributeValue value;
};

enum class SpanKind { kInternal, kServer, kClient };

struct SpanEvent {
  std::string name;
  absl::Time time;
  std::vector<Attribute> attributes;
};

// A finished span, as the sink receives it.
struct SpanData {
  SpanContext context;
  SpanId parent_span_id{};  // All zeros for a root span.
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  absl::Time start;
  absl::Time end;
  std::vector<Attribute> attributes;
  std::vector<SpanEvent> events;
  bool error = false;
  std::string status_message;
};

// Receives every sampled span when it ends. Must not block.
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  virtual void OnEnd(SpanData span) = 0;
};

// The decision for spans that have no local parent: always_on, always_off,
// traceidratio, or parentbased_* (follow a remote parent's sampled flag,
// and the root sampler when there is none).
struct Sampler {
  enum class Root { kAlwaysOn, kAlwaysOff, kTraceIdRatio };
  Root root = Root::kAlwaysOn;
  double ratio = 1.0;
  bool parent_based = true;

  // From OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG values (`arg` may be
  // empty). INVALID_ARGUMENT for an unknown name or a ratio outside [0, 1].
  static absl::StatusOr<Sampler> FromNames(absl::string_view name, absl::string_view arg);
  bool ShouldSample(const SpanContext* remote_parent, const TraceId& trace_id) const;
};

class Tracer;

// A span being recorded, or an inert one (not sampled, or no tracer): every
// method is then a no-op, so callers need no checks. Move-only; ends when
// destroyed unless ended before.
class Span {
 public:
  Span() = default;
  Span(Span&&) = default;
  Span& operator=(Span&& other);
  ~Span() { End(); }

  bool recording() const { return data_ != nullptr; }
  // The span's own context; for an inert child, its parent's (so that an
  // unsampled trace is still passed on).
  const SpanContext& context() const { return context_; }
  Tracer* tracer() const { return tracer_; }

  // Replaces an attribute of the same key.
  void SetAttribute(absl::string_view key, AttributeValue value);
  void SetAttribute(absl::string_view key, const char* value) {
    SetAttribute(key, AttributeValue(std::string(value)));
  }
  void AddEvent(absl::string_view name, std::vector<Attribute> attributes = {});
  // Marks the span failed (status ERROR) with `message`.
  void SetError(absl::string_view message);
  void End();

 private:
  friend class Tracer;
  std::unique_ptr<SpanData> data_;
  SpanContext context_;
  Tracer* tracer_ = nullptr;
};

class Tracer {
 public:
  // `sink` (may be null: nothing is recorded) must outlive the tracer.
  Tracer(Sampler sampler, SpanSink* sink);

  // A span with no local parent: the child of `remote_parent` when given
  // (an incoming traceparent), else the root of a new trace.
  Span StartRoot(absl::string_view name, SpanKind kind, const SpanContext* remote_parent);
  // A child of `parent` (sampled with it), or inert when the parent is.
  Span StartChild(const SpanContext& parent, absl::string_view name, SpanKind kind);

 private:
  friend class Span;
  Span Start(absl::string_view name, SpanKind kind, const TraceId& trace_id,
             const SpanId& parent, bool sampled, std::string trace_state);

  const Sampler sampler_;
  SpanSink* const sink_;
};

// Makes `span` the current thread's span (and puts its ids in the thread's
// log lines) for the scope; restores the previous one after.
class ScopedSpan {
 public:
  explicit ScopedSpan(Span* span);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  Span* const previous_;
};

// The current thread's span, or null.
Span* CurrentSpan();

// A child of the current thread's span; inert when there is none.
Span StartSpan(absl::string_view name, SpanKind kind = SpanKind::kInternal);

// Sets an attribute on the current thread's span, if there is one.
void SetCurrentAttribute(absl::string_view key, AttributeValue value);

}  // namespace convstate::telemetry

#endif  // CONVSTATE_SERVICES_COMMON_TRACE_H_
