#include "srift/measurements.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "validate.hpp"

namespace srift {

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::amp: return "amp";
  }
  detail::require_enum("precision", static_cast<int>(precision), 0, 2);
  return "";  // not reached
}

void require_precision(const std::vector<Measurement>& measurements, Precision precision, const std::string& name) {
  const char* predicted = precision_name(precision);
  for (std::size_t i = 0; i < measurements.size(); ++i) {
    const std::optional<Precision>& at = measurements[i].precision;
    if (!at || *at == precision) continue;
    const std::string field = name + "[" + std::to_string(i) + "].precision";
    detail::require_enum(field.c_str(), static_cast<int>(*at), 0, 2);
    throw std::invalid_argument(field + ": the run was timed at " + precision_name(*at) + ", the prediction is at " +
                                predicted + "; a run at another precision is no evidence of this one's time: pass "
                                "only runs at the predicted precision (measurements_at), or predict at the run's");
  }
}

std::vector<Measurement> measurements_at(const std::vector<Measurement>& measurements, Precision precision) {
  precision_name(precision);  // refuses a value that is no Precision
  std::vector<Measurement> out;
  for (const Measurement& m : measurements) {
    if (!m.precision || *m.precision == precision) out.push_back(m);
  }
  return out;
}

namespace {

// The median point of a group's runs (note "repeated measurements"), as srift/engine.py's
// _median_point computed it before the core did: one summation order, so bit for bit.
Measurement median_point(const std::vector<MeasuredRun>& runs, const std::vector<std::size_t>& members) {
  std::vector<std::size_t> ordered = members;
  std::stable_sort(ordered.begin(), ordered.end(), [&](std::size_t a, std::size_t b) {
    return runs[a].point.iteration_s < runs[b].point.iteration_s;
  });
  const std::size_t n = ordered.size();
  bool split = true;
  for (std::size_t i : members) split = split && runs[i].point.forward_s >= 0 && runs[i].point.backward_s >= 0;
  // the middle run, or the middle two (an even count)
  const std::size_t lo = (n - 1) / 2, hi = n / 2;
  auto mean = [&](double Measurement::*field) {  // Python's sum(values) / len(values)
    double sum = 0.0;
    for (std::size_t k = lo; k <= hi; ++k) sum += runs[ordered[k]].point.*field;
    return sum / static_cast<double>(hi - lo + 1);
  };
  Measurement out = runs[ordered[0]].point;
  out.iteration_s = mean(&Measurement::iteration_s);
  out.forward_s = split ? mean(&Measurement::forward_s) : -1.0;
  out.backward_s = split ? mean(&Measurement::backward_s) : -1.0;
  return out;
}

}  // namespace

MergedRepeats merge_repeats(const std::vector<MeasuredRun>& runs, double spread_share) {
  if (!std::isfinite(spread_share) || spread_share < 0) detail::fail("spread_share", "finite and >= 0", spread_share);
  std::vector<double> seconds(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const MeasuredRun& r = runs[i];
    const std::string f = "runs[" + std::to_string(i) + "].";
    detail::validate_measurement(r.point, f + "point.");
    if (r.accumulation_steps < 1) {
      throw std::invalid_argument(f + "accumulation_steps must be >= 1, got " + std::to_string(r.accumulation_steps));
    }
    if (!std::isfinite(r.measured_s) || r.measured_s == 0) {
      detail::fail(f + "measured_s", "finite and > 0 (< 0: point.iteration_s)", r.measured_s);
    }
    seconds[i] = r.measured_s > 0 ? r.measured_s : r.point.iteration_s;
  }
  // The groups in the order of their first run; an unset precision is a value of its own (-1).
  using Key = std::tuple<double, int, int>;
  std::map<Key, std::size_t> index;
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Measurement& p = runs[i].point;
    const Key key{p.local_batch, runs[i].accumulation_steps, p.precision ? static_cast<int>(*p.precision) : -1};
    const auto [it, added] = index.emplace(key, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  MergedRepeats out;
  out.points.reserve(runs.size());
  for (const MeasuredRun& r : runs) out.points.push_back(r.point);
  for (const std::vector<std::size_t>& members : groups) {
    const std::size_t n = members.size();
    if (n >= 3) {
      const Measurement median = median_point(runs, members);
      for (std::size_t i : members) out.points[i] = median;
    }
    if (n < 2) continue;
    std::vector<double> times;
    for (std::size_t i : members) times.push_back(seconds[i]);
    const double slowest = *std::max_element(times.begin(), times.end());
    const double fastest = *std::min_element(times.begin(), times.end());
    if (slowest <= (1 + spread_share) * fastest) continue;
    std::sort(times.begin(), times.end());
    RepeatGroup g;
    const Measurement& first = runs[members.front()].point;
    g.local_batch = first.local_batch;
    g.accumulation_steps = runs[members.front()].accumulation_steps;
    g.precision = first.precision;
    g.members = members;
    g.spread = slowest / fastest - 1;
    g.used_s = (times[(n - 1) / 2] + times[n / 2]) / 2;
    out.disagreeing.push_back(std::move(g));
  }
  return out;
}

}  // namespace srift
