#include "services/common/trace.h"

#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "services/common/log.h"

namespace convstate::telemetry {
namespace {

thread_local Span* current_span = nullptr;

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& bytes) {
  for (uint8_t b : bytes) {
    if (b != 0) return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // Uppercase is not valid in traceparent.
}

// Lowercase hex of exactly 2*N characters into `out`.
template <size_t N>
bool ParseHex(absl::string_view text, std::array<uint8_t, N>* out) {
  if (text.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = HexValue(text[2 * i]);
    const int lo = HexValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

std::mt19937_64& Random() {
  thread_local std::mt19937_64 engine([] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }());
  return engine;
}

template <size_t N>
void FillRandom(std::array<uint8_t, N>* out) {
  do {
    for (size_t i = 0; i < N; i += 8) {
      const uint64_t r = Random()();
      std::memcpy(out->data() + i, &r, std::min<size_t>(8, N - i));
    }
  } while (AllZero(*out));
}

}  // namespace

bool SpanContext::valid() const { return !AllZero(trace_id) && !AllZero(span_id); }

std::optional<SpanContext> ParseTraceparent(absl::string_view traceparent,
                                            absl::string_view tracestate) {
  // version "-" trace-id "-" parent-id "-" flags: 2+1+32+1+16+1+2 = 55.
  absl::string_view t = absl::StripAsciiWhitespace(traceparent);
  if (t.size() < 55) return std::nullopt;
  std::array<uint8_t, 1> version;
  std::array<uint8_t, 1> flags;
  SpanContext context;
  if (!ParseHex(t.substr(0, 2), &version) || version[0] == 0xff) return std::nullopt;
  if (t[2] != '-' || t[35] != '-' || t[52] != '-') return std::nullopt;
  if (!ParseHex(t.substr(3, 32), &context.trace_id) ||
      !ParseHex(t.substr(36, 16), &context.span_id) || !ParseHex(t.substr(53, 2), &flags)) {
    return std::nullopt;
  }
  // Version 00 is exactly 55 characters; later versions may append fields
  // after a dash.
  if (version[0] == 0 ? t.size() != 55 : (t.size() > 55 && t[55] != '-')) return std::nullopt;
  if (!context.valid()) return std::nullopt;
  context.sampled = (flags[0] & 0x01) != 0;
  // tracestate is passed on, not interpreted: kept when it is what the
  // recommendation allows (printable ASCII, at most 512 characters), else
  // dropped, so that nothing a client sends ends up as invalid text.
  bool printable = tracestate.size() <= 512;
  for (char c : tracestate) printable = printable && c >= 0x20 && c <= 0x7e;
  if (printable) context.trace_state = std::string(tracestate);
  return context;
}

std::string ToHex(const uint8_t* bytes, size_t size) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), size));
}

std::string FormatTraceparent(const SpanContext& c) {
  return absl::StrCat("00-", ToHex(c.trace_id.data(), c.trace_id.size()), "-",
                      ToHex(c.span_id.data(), c.span_id.size()), c.sampled ? "-01" : "-00");
}

absl::StatusOr<Sampler> Sampler::FromNames(absl::string_view name, absl::string_view arg) {
  Sampler s;
  std::string n = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
  if (n.empty()) n = "parentbased_always_on";
  absl::string_view rest = n;
  s.parent_based = absl::ConsumePrefix(&rest, "parentbased_");
  n = std::string(rest);
  if (n == "always_on") {
    s.root = Root::kAlwaysOn;
  } else if (n == "always_off") {
    s.root = Root::kAlwaysOff;
  } else if (n == "traceidratio") {
    s.root = Root::kTraceIdRatio;
    s.ratio = 1.0;
    if (!arg.empty()) {
      double r;
      if (!absl::SimpleAtod(arg, &r) || !(r >= 0.0 && r <= 1.0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("sampler argument: expected a ratio in [0, 1], got '", arg, "'"));
      }
      s.ratio = r;
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampler: expected always_on, always_off, traceidratio or parentbased_ one of them, got '",
        name, "'"));
  }
  return s;
}

bool Sampler::ShouldSample(const SpanContext* remote_parent, const TraceId& trace_id) const {
  if (parent_based && remote_parent != nullptr) return remote_parent->sampled;
  switch (root) {
    case Root::kAlwaysOn:
      return true;
    case Root::kAlwaysOff:
      return false;
    case Root::kTraceIdRatio: {
      // The last 8 bytes of the id as a number below ratio * 2^64: the
      // same id gets the same decision everywhere.
      uint64_t v = 0;
      for (size_t i = 8; i < 16; ++i) v = v << 8 | trace_id[i];
      if (ratio >= 1.0) return true;
      return static_cast<double>(v) < std::ldexp(ratio, 64);
    }
  }
  return false;
}

Span& Span::operator=(Span&& other) {
  if (this != &other) {
    End();
    data_ = std::move(other.data_);
    context_ = std::move(other.context_);
    tracer_ = other.tracer_;
  }
  return *this;
}

void Span::SetAttribute(absl::string_view key, AttributeValue value) {
  if (data_ == nullptr) return;
  for (Attribute& a : data_->attributes) {
    if (a.key == key) {
      a.value = std::move(value);
      return;
    }
  }
  data_->attributes.push_back(Attribute{std::string(key), std::move(value)});
}

void Span::AddEvent(absl::string_view name, std::vector<Attribute> attributes) {
  if (data_ == nullptr) return;
  data_->events.push_back(SpanEvent{std::string(name), absl::Now(), std::move(attributes)});
}

void Span::SetError(absl::string_view message) {
  if (data_ == nullptr) return;
  data_->error = true;
  data_->status_message = std::string(message);
}

void Span::End() {
  if (data_ == nullptr) return;
  data_->end = absl::Now();
  std::unique_ptr<SpanData> data = std::move(data_);
  if (tracer_ != nullptr && tracer_->sink_ != nullptr) tracer_->sink_->OnEnd(std::move(*data));
}

Tracer::Tracer(Sampler sampler, SpanSink* sink) : sampler_(sampler), sink_(sink) {}

Span Tracer::Start(absl::string_view name, SpanKind kind, const TraceId& trace_id,
                   const SpanId& parent, bool sampled, std::string trace_state) {
  Span span;
  span.tracer_ = this;
  span.context_.trace_id = trace_id;
  span.context_.sampled = sampled;
  span.context_.trace_state = std::move(trace_state);
  if (!sampled || sink_ == nullptr) {
    span.context_.span_id = parent;  // Inert: passes its parent on.
    return span;
  }
  FillRandom(&span.context_.span_id);
  span.data_ = std::make_unique<SpanData>();
  span.data_->context = span.context_;
  span.data_->parent_span_id = parent;
  span.data_->name = std::string(name);
  span.data_->kind = kind;
  span.data_->start = absl::Now();
  return span;
}

Span Tracer::StartRoot(absl::string_view name, SpanKind kind, const SpanContext* remote_parent) {
  if (remote_parent != nullptr && remote_parent->valid()) {
    return Start(name, kind, remote_parent->trace_id, remote_parent->span_id,
                 sampler_.ShouldSample(remote_parent, remote_parent->trace_id),
                 remote_parent->trace_state);
  }
  TraceId trace_id;
  FillRandom(&trace_id);
  Span span = Start(name, kind, trace_id, SpanId{}, sampler_.ShouldSample(nullptr, trace_id), "");
  if (!span.recording()) FillRandom(&span.context_.span_id);
  return span;
}

Span Tracer::StartChild(const SpanContext& parent, absl::string_view name, SpanKind kind) {
  return Start(name, kind, parent.trace_id, parent.span_id, parent.sampled, parent.trace_state);
}

namespace {

// Makes `span` the thread's current span, and its ids those of the
// thread's log lines (none unless it is recorded).
void MakeCurrent(Span* span) {
  current_span = span;
  if (span != nullptr && span->recording()) {
    const SpanContext& c = span->context();
    SetLogTraceIds(ToHex(c.trace_id.data(), c.trace_id.size()),
                   ToHex(c.span_id.data(), c.span_id.size()));
  } else {
    SetLogTraceIds("", "");
  }
}

}  // namespace

ScopedSpan::ScopedSpan(Span* span) : previous_(current_span) { MakeCurrent(span); }

ScopedSpan::~ScopedSpan() { MakeCurrent(previous_); }

Span* CurrentSpan() { return current_span; }

Span StartSpan(absl::string_view name, SpanKind kind) {
  Span* parent = current_span;
  if (parent == nullptr || parent->tracer() == nullptr || !parent->recording()) return Span();
  return parent->tracer()->StartChild(parent->context(), name, kind);
}

void SetCurrentAttribute(absl::string_view key, AttributeValue value) {
  if (current_span != nullptr) current_span->SetAttribute(key, std::move(value));
}

}  // namespace convstate::telemetry
