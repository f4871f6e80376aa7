#include "services/telemetry/metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace convstate::telemetry {
namespace {

namespace otlp = opentelemetry::proto;

// A map key for a label set: the pairs joined with separators that cannot
// be confused with each other.
std::string KeyOf(const Labels& labels) {
  std::string key;
  for (const auto& [k, v] : labels) absl::StrAppend(&key, k, "\x1f", v, "\x1e");
  return key;
}

void SetAttributes(const Labels& labels,
                   google::protobuf::RepeatedPtrField<otlp::common::v1::KeyValue>* out) {
  for (const auto& [k, v] : labels) {
    otlp::common::v1::KeyValue* kv = out->Add();
    kv->set_key(k);
    kv->mutable_value()->set_string_value(v);
  }
}

uint64_t Nanos(absl::Time t) { return static_cast<uint64_t>(absl::ToUnixNanos(t)); }

}  // namespace

otlp::metrics::v1::Metric* Instrument::NewMetric(otlp::metrics::v1::ScopeMetrics* out) const {
  otlp::metrics::v1::Metric* m = out->add_metrics();
  m->set_name(name_);
  m->set_unit(unit_);
  m->set_description(description_);
  return m;
}

void Counter::Add(int64_t delta, const Labels& labels) {
  const std::string key = KeyOf(labels);
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = points_.try_emplace(key);
  if (inserted) it->second.first = labels;
  it->second.second += delta;
}

int64_t Counter::Value(const Labels& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = points_.find(KeyOf(labels));
  return it == points_.end() ? 0 : it->second.second;
}

void Counter::Collect(uint64_t start_nanos, uint64_t now_nanos,
                      otlp::metrics::v1::ScopeMetrics* out) const {
  absl::MutexLock lock(&mu_);
  if (points_.empty()) return;
  otlp::metrics::v1::Sum* sum = NewMetric(out)->mutable_sum();
  sum->set_is_monotonic(true);
  sum->set_aggregation_temporality(otlp::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  for (const auto& [key, point] : points_) {
    otlp::metrics::v1::NumberDataPoint* p = sum->add_data_points();
    SetAttributes(point.first, p->mutable_attributes());
    p->set_start_time_unix_nano(start_nanos);
    p->set_time_unix_nano(now_nanos);
    p->set_as_int(point.second);
  }
}

void ObservedCounter::Collect(uint64_t start_nanos, uint64_t now_nanos,
                              otlp::metrics::v1::ScopeMetrics* out) const {
  otlp::metrics::v1::Sum* sum = NewMetric(out)->mutable_sum();
  sum->set_is_monotonic(true);
  sum->set_aggregation_temporality(otlp::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  otlp::metrics::v1::NumberDataPoint* p = sum->add_data_points();
  p->set_start_time_unix_nano(start_nanos);
  p->set_time_unix_nano(now_nanos);
  p->set_as_int(read_());
}

void Gauge::Set(double value, const Labels& labels) {
  const std::string key = KeyOf(labels);
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = points_.try_emplace(key);
  if (inserted) it->second.first = labels;
  it->second.second = value;
}

void Gauge::Collect(uint64_t, uint64_t now_nanos, otlp::metrics::v1::ScopeMetrics* out) const {
  absl::MutexLock lock(&mu_);
  if (points_.empty()) return;
  otlp::metrics::v1::Gauge* gauge = NewMetric(out)->mutable_gauge();
  for (const auto& [key, point] : points_) {
    otlp::metrics::v1::NumberDataPoint* p = gauge->add_data_points();
    SetAttributes(point.first, p->mutable_attributes());
    p->set_time_unix_nano(now_nanos);
    p->set_as_double(point.second);
  }
}

Histogram::Histogram(std::string name, std::string unit, std::string description,
                     std::vector<double> bounds)
    : Instrument(std::move(name), std::move(unit), std::move(description)),
      bounds_(std::move(bounds)) {}

void Histogram::Record(double value, const Labels& labels) {
  const std::string key = KeyOf(labels);
  // Bucket i holds (bounds[i-1], bounds[i]]; the last one everything above.
  const size_t bucket =
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = points_.try_emplace(key);
  Point& p = it->second;
  if (inserted) {
    p.labels = labels;
    p.buckets.assign(bounds_.size() + 1, 0);
    p.min = value;
    p.max = value;
  }
  ++p.buckets[bucket];
  ++p.count;
  p.sum += value;
  p.min = std::min(p.min, value);
  p.max = std::max(p.max, value);
}

void Histogram::Collect(uint64_t start_nanos, uint64_t now_nanos,
                        otlp::metrics::v1::ScopeMetrics* out) const {
  absl::MutexLock lock(&mu_);
  if (points_.empty()) return;
  otlp::metrics::v1::Histogram* h = NewMetric(out)->mutable_histogram();
  h->set_aggregation_temporality(otlp::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  for (const auto& [key, point] : points_) {
    otlp::metrics::v1::HistogramDataPoint* p = h->add_data_points();
    SetAttributes(point.labels, p->mutable_attributes());
    p->set_start_time_unix_nano(start_nanos);
    p->set_time_unix_nano(now_nanos);
    p->set_count(point.count);
    p->set_sum(point.sum);
    p->set_min(point.min);
    p->set_max(point.max);
    for (uint64_t b : point.buckets) p->add_bucket_counts(b);
    for (double b : bounds_) p->add_explicit_bounds(b);
  }
}

MetricRegistry::MetricRegistry() : start_(absl::Now()) {}

Counter* MetricRegistry::AddCounter(std::string name, std::string unit, std::string description) {
  auto c = std::make_unique<Counter>(std::move(name), std::move(unit), std::move(description));
  Counter* out = c.get();
  absl::MutexLock lock(&mu_);
  instruments_.push_back(std::move(c));
  return out;
}

Gauge* MetricRegistry::AddGauge(std::string name, std::string unit, std::string description) {
  auto g = std::make_unique<Gauge>(std::move(name), std::move(unit), std::move(description));
  Gauge* out = g.get();
  absl::MutexLock lock(&mu_);
  instruments_.push_back(std::move(g));
  return out;
}

void MetricRegistry::AddObservedCounter(std::string name, std::string unit,
                                        std::string description, std::function<int64_t()> read) {
  auto c = std::make_unique<ObservedCounter>(std::move(name), std::move(unit),
                                             std::move(description), std::move(read));
  absl::MutexLock lock(&mu_);
  instruments_.push_back(std::move(c));
}

Histogram* MetricRegistry::AddHistogram(std::string name, std::string unit,
                                        std::string description, std::vector<double> bounds) {
  auto h = std::make_unique<Histogram>(std::move(name), std::move(unit), std::move(description),
                                       std::move(bounds));
  Histogram* out = h.get();
  absl::MutexLock lock(&mu_);
  instruments_.push_back(std::move(h));
  return out;
}

void MetricRegistry::Collect(otlp::metrics::v1::ScopeMetrics* out) const {
  const uint64_t now = Nanos(absl::Now());
  absl::MutexLock lock(&mu_);
  for (const auto& i : instruments_) i->Collect(Nanos(start_), now, out);
}

}  // namespace convstate::telemetry
