#ifndef CONVSTATE_SERVICES_TELEMETRY_METRICS_H_
#define CONVSTATE_SERVICES_TELEMETRY_METRICS_H_

// Counters, gauges and histograms aggregated in memory and read out as OTLP
// data points (cumulative since the registry was made). Recording takes one
// short lock per instrument and never blocks on export.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "opentelemetry/proto/metrics/v1/metrics.pb.h"

namespace convstate::telemetry {

// Attributes of a data point: string keys and values, in a fixed order.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Instrument {
 public:
  Instrument(std::string name, std::string unit, std::string description)
      : name_(std::move(name)), unit_(std::move(unit)), description_(std::move(description)) {}
  virtual ~Instrument() = default;
  const std::string& name() const { return name_; }
  // Appends this instrument's metric (nothing if it has no points yet).
  virtual void Collect(uint64_t start_nanos, uint64_t now_nanos,
                       opentelemetry::proto::metrics::v1::ScopeMetrics* out) const = 0;

 protected:
  opentelemetry::proto::metrics::v1::Metric* NewMetric(
      opentelemetry::proto::metrics::v1::ScopeMetrics* out) const;

 private:
  const std::string name_;
  const std::string unit_;
  const std::string description_;
};

// A monotonic sum.
class Counter final : public Instrument {
 public:
  using Instrument::Instrument;
  void Add(int64_t delta, const Labels& labels = {});
  // The sum for `labels` so far (tests and tools).
  int64_t Value(const Labels& labels = {}) const;
  void Collect(uint64_t start_nanos, uint64_t now_nanos,
               opentelemetry::proto::metrics::v1::ScopeMetrics* out) const override;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::pair<Labels, int64_t>> points_ ABSL_GUARDED_BY(mu_);
};

// A monotonic sum kept elsewhere (a process-wide count), read when
// collected.
class ObservedCounter final : public Instrument {
 public:
  ObservedCounter(std::string name, std::string unit, std::string description,
                  std::function<int64_t()> read)
      : Instrument(std::move(name), std::move(unit), std::move(description)),
        read_(std::move(read)) {}
  void Collect(uint64_t start_nanos, uint64_t now_nanos,
               opentelemetry::proto::metrics::v1::ScopeMetrics* out) const override;

 private:
  const std::function<int64_t()> read_;
};

// The last value set.
class Gauge final : public Instrument {
 public:
  using Instrument::Instrument;
  void Set(double value, const Labels& labels = {});
  void Collect(uint64_t start_nanos, uint64_t now_nanos,
               opentelemetry::proto::metrics::v1::ScopeMetrics* out) const override;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::pair<Labels, double>> points_ ABSL_GUARDED_BY(mu_);
};

// Explicit-bucket histogram.
class Histogram final : public Instrument {
 public:
  Histogram(std::string name, std::string unit, std::string description,
            std::vector<double> bounds);
  void Record(double value, const Labels& labels = {});
  void Collect(uint64_t start_nanos, uint64_t now_nanos,
               opentelemetry::proto::metrics::v1::ScopeMetrics* out) const override;

 private:
  struct Point {
    Labels labels;
    std::vector<uint64_t> buckets;
    uint64_t count = 0;
    double sum = 0;
    double min = 0;
    double max = 0;
  };
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Point> points_ ABSL_GUARDED_BY(mu_);
};

class MetricRegistry {
 public:
  MetricRegistry();
  // The registry owns what these return; pointers stay valid for its life.
  Counter* AddCounter(std::string name, std::string unit, std::string description);
  Gauge* AddGauge(std::string name, std::string unit, std::string description);
  // `read` is called at every collection and must stay callable.
  void AddObservedCounter(std::string name, std::string unit, std::string description,
                          std::function<int64_t()> read);
  Histogram* AddHistogram(std::string name, std::string unit, std::string description,
                          std::vector<double> bounds);
  // Every instrument's points, cumulative since the registry was made.
  void Collect(opentelemetry::proto::metrics::v1::ScopeMetrics* out) const;

 private:
  const absl::Time start_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Instrument>> instruments_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convstate::telemetry

#endif  // CONVSTATE_SERVICES_TELEMETRY_METRICS_H_
