#pragma once
// What search_exhaustive (search.cpp) and search (bnb.cpp) share: the plan order, the
// objective terms, the constraints, top-k and Pareto bookkeeping, and the result assembly.
// Both searches must agree bit for bit on a plan's totals, so they are computed only here.
#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "srift/band.hpp"
#include "srift/search.hpp"
#include "srift/spot.hpp"

namespace srift::detail {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A compact plan: up to kMaxGroups (offer, count) groups in ascending offer order, unused
/// slots hold offer -1, and its objective terms.
struct Candidate {
  int n = 0;
  int offer[kMaxGroups];
  int count[kMaxGroups];
  double total_s = kInf;
  double total_usd = kInf;
  Candidate() {
    for (int i = 0; i < kMaxGroups; ++i) offer[i] = -1, count[i] = 0;
  }
  bool empty() const { return n == 0; }
};

/// Throws std::invalid_argument naming the plan's offers when its feasible iteration time is
/// not finite (validate.hpp, require_finite_iteration): the search must not rank such a plan.
void require_finite_iteration(const SearchRequest& r, const Candidate& c, const IterationResult& it);

/// True when a is strictly better than b for the objective: the objective term, then the
/// other term, then the groups (offer, count) in order with -1 for missing groups, so a
/// result does not depend on the order plans were met in (threads, search strategy).
inline bool better(const Candidate& a, const Candidate& b, Objective objective) {
  if (objective == Objective::min_cost) {
    if (a.total_usd != b.total_usd) return a.total_usd < b.total_usd;
    if (a.total_s != b.total_s) return a.total_s < b.total_s;
  } else {
    if (a.total_s != b.total_s) return a.total_s < b.total_s;
    if (a.total_usd != b.total_usd) return a.total_usd < b.total_usd;
  }
  const int n = std::max(a.n, b.n);
  for (int i = 0; i < n; ++i) {
    if (a.offer[i] != b.offer[i]) return a.offer[i] < b.offer[i];
    if (a.count[i] != b.count[i]) return a.count[i] < b.count[i];
  }
  return false;
}

inline Objective flipped(Objective o) {
  return o == Objective::min_cost ? Objective::max_throughput : Objective::min_cost;
}

/// The objective's term of a candidate (USD or seconds).
inline double objective_value(const Candidate& c, Objective o) {
  return o == Objective::min_cost ? c.total_usd : c.total_s;
}

/// Best-first list of at most k candidates.
inline void offer_top_k(std::vector<Candidate>& top, const Candidate& c, int k, Objective objective) {
  if (static_cast<int>(top.size()) == k && !better(c, top.back(), objective)) return;
  auto pos = std::upper_bound(top.begin(), top.end(), c, [&](const Candidate& a, const Candidate& b) {
    return better(a, b, objective);
  });
  top.insert(pos, c);
  if (static_cast<int>(top.size()) > k) top.pop_back();
}

/// Note "threads". The worker threads one search runs: SearchRequest::threads (0: the hardware
/// concurrency), at most kThreadsPerCore per hardware thread (a search is CPU-bound: more only
/// costs stacks, and a `threads` of 2^31 - 1 from Python asked the OS for that many) and at
/// most `tasks` (the units of work that can run at once), and at least 1.
constexpr int kThreadsPerCore = 4;
inline int worker_threads(int requested, std::size_t tasks) {
  const long long cores = std::max(1u, std::thread::hardware_concurrency());
  long long threads = requested == 0 ? cores : requested;
  threads = std::min({threads, kThreadsPerCore * cores, static_cast<long long>(std::max<std::size_t>(1, tasks))});
  return static_cast<int>(std::max(1LL, threads));
}

/// Runs work(0) .. work(n - 1), each exactly once, on up to n threads, the caller's included.
/// A thread the OS refuses to start (std::thread throws std::system_error: EAGAIN under a pids
/// limit or out of address space) is no error: the caller runs the work of every thread that
/// did not start after its own, so the result is the same. A throwing std::thread inside a
/// std::vector<std::thread> of running threads called std::terminate. Every started thread is
/// joined before this returns or throws. `work` reports its own errors (it should not throw).
template <class Work>
void run_on_threads(int n, Work&& work) {
  std::vector<std::thread> pool;
  struct Joiner {
    std::vector<std::thread>& pool;
    ~Joiner() {
      for (std::thread& th : pool) {
        if (th.joinable()) th.join();
      }
    }
  } joiner{pool};
  int started = 1;  // work(0) is the caller's
  try {
    pool.reserve(static_cast<std::size_t>(std::max(0, n - 1)));
    for (int t = 1; t < n; ++t) {
      pool.emplace_back(work, t);  // a throw here leaves the pool as it was
      started = t + 1;
    }
  } catch (const std::exception&) {
    // fewer threads: the caller takes the rest below
  }
  work(0);
  for (int t = started; t < n; ++t) work(t);
}

/// Expected wall time of a run of `nominal_s` seconds at `rate` interruptions per hour: the
/// hot-path part of estimate_spot (same arithmetic, no quantiles).
inline double expected_total_s(double nominal_s, double rate, const SpotParams& p) {
  return spot_expected_s(nominal_s, rate, p);
}

/// Throws std::invalid_argument naming the plan when its run without preemption
/// (iterations x iteration_s), its price per hour (the groups' sum) or its cost (price x a
/// finite run) is not finite: a total of inf met an unbounded deadline or budget and was
/// ranked as a plan. (A spot run whose expected time is infinite, one preemption outrunning
/// every restart, is the spot model's answer, not an overflow.)
[[noreturn]] void fail_totals(const SearchRequest& r, const Candidate& c, const IterationResult& it,
                              double total_s = 0);

/// Fills a candidate's totals from a feasible iteration; `rate` is the plan's spot rate.
inline void set_totals(const SearchRequest& r, const IterationResult& it, double rate, Candidate& c) {
  const double nominal = r.iterations * it.iteration_s;
  if (!(std::isfinite(nominal) && std::isfinite(it.usd_per_hour))) fail_totals(r, c, it);
  c.total_s = expected_total_s(nominal, rate, r.spot);
  c.total_usd = it.usd_per_hour * c.total_s / 3600.0;
  if (std::isfinite(c.total_s) && !std::isfinite(c.total_usd)) fail_totals(r, c, it, c.total_s);
}

/// The band of a feasible iteration `it` of `n` groups (counts[k] instances of offers[k]),
/// band.hpp note "iteration band".
inline IterationBand plan_band(const SearchRequest& r, const IterationResult& it, const int* offers,
                               const int* counts, int n) {
  GroupSpec groups[kMaxGroups];
  GroupBand bands[kMaxGroups];
  for (int k = 0; k < n; ++k) {
    const Offer& o = r.offers[offers[k]];
    groups[k] = {&r.instances[o.instance], counts[k], o.compute, o.usd_per_hour};
    bands[k] = o.band;
  }
  return iteration_band_unchecked(it, groups, bands, n, r.scaling_band);
}

/// The band factors of a feasible candidate's iteration `it`.
inline BandFactors candidate_band(const SearchRequest& r, const IterationResult& it, const Candidate& c) {
  return plan_band(r, it, c.offer, c.count, c.n).factors(it.iteration_s);
}

/// Whether a candidate meets the deadline: in expectation, or with deadline_confidence under
/// preemption and the plan's band together (note "deadline probability").
inline bool meets_deadline(const SearchRequest& r, const IterationResult& it, double rate,
                           const Candidate& c) {
  if (!(r.deadline_confidence > 0) || !std::isfinite(r.deadline_s)) return c.total_s <= r.deadline_s;
  const double nominal = r.iterations * it.iteration_s;
  if (nominal > r.deadline_s) return false;  // at q >= 0.5 the median run must fit
  const BandFactors band = candidate_band(r, it, c);
  // The band's q-quantile run must fit (exact without spot; a necessary condition with it,
  // since preemption only adds time); tested on the time, not through the CDF's rounding.
  if (nominal * band_quantile_factor(band, r.deadline_confidence) > r.deadline_s) return false;
  if (!(rate > 0)) return true;
  return deadline_probability_unchecked(nominal, band, rate, r.spot, r.deadline_s) >= r.deadline_confidence;
}

inline bool meets_budget(const SearchRequest& r, const Candidate& c, double usd_per_hour) {
  return !(c.total_usd > r.budget_usd || usd_per_hour > r.max_usd_per_hour);
}

/// Pareto front of (total_s, total_usd): increasing time, strictly decreasing USD.
std::vector<Candidate> pareto_front(std::vector<Candidate> pool);

/// Simulates a candidate again and fills a Plan (groups, iteration, totals, spot estimate).
Plan materialise(const SearchRequest& r, const Candidate& c);

/// Note "closest". When no plan meets the constraints, the first of these that holds says
/// what binds and which plan comes closest (both searches decide alike):
/// - a deadline is set and some plan keeps within the budget and the hourly cap: the deadline
///   binds; the closest is the fastest such plan (and, where a budget or cap is set, the
///   fastest plan with neither is timed too, to tell how much they cost in time);
/// - a budget is set and some plan keeps within the hourly cap: the budget binds; the closest
///   is the cheapest such plan;
/// - an hourly cap is set and some plan runs at all: the cap binds; the closest is the plan
///   of the least hourly rate (then the fastest of those), over the cap;
/// - else no plan of the space runs (memory, the batch, the filters).
enum class Binds : int { nothing_runs = 0, deadline = 1, budget = 2, hourly_cap = 3 };

struct NoPlan {
  Binds binds = Binds::nothing_runs;
  std::uint64_t infeasible_memory = 0;
  std::uint64_t infeasible_batch = 0;
  double fastest_s = kInf;  ///< deadline binds under a budget or cap: the fastest plan's time with neither
};

/// The plans note "closest" may need, kept as an exhaustive walk meets feasible plans.
struct Nearest {
  Candidate fastest_within;       ///< within the budget and the hourly cap, the fastest
  Candidate fastest;              ///< the fastest
  Candidate cheapest_within_cap;  ///< within the hourly cap, the cheapest
  Candidate least_rate;           ///< the least USD/hour, then the fastest
  double least_usd_per_hour = kInf;

  void offer(const SearchRequest& r, const Candidate& c, double usd_per_hour) {
    if (meets_budget(r, c, usd_per_hour)) keep(fastest_within, c, Objective::max_throughput);
    keep(fastest, c, Objective::max_throughput);
    if (!(usd_per_hour > r.max_usd_per_hour)) keep(cheapest_within_cap, c, Objective::min_cost);
    keep_rate(c, usd_per_hour);
  }
  void merge(const Nearest& other) {
    keep(fastest_within, other.fastest_within, Objective::max_throughput);
    keep(fastest, other.fastest, Objective::max_throughput);
    keep(cheapest_within_cap, other.cheapest_within_cap, Objective::min_cost);
    keep_rate(other.least_rate, other.least_usd_per_hour);
  }
  /// Note "closest": what binds, the closest plan (empty when nothing runs) and, where the
  /// deadline binds under a budget or cap, the fastest plan with neither (else empty).
  Binds decide(const SearchRequest& r, Candidate& closest, Candidate& unlimited) const {
    closest = unlimited = Candidate{};
    if (std::isfinite(r.deadline_s) && !fastest_within.empty()) {
      closest = fastest_within;
      if (std::isfinite(r.budget_usd) || std::isfinite(r.max_usd_per_hour)) unlimited = fastest;
      return Binds::deadline;
    }
    if (std::isfinite(r.budget_usd) && !cheapest_within_cap.empty()) {
      closest = cheapest_within_cap;
      return Binds::budget;
    }
    if (std::isfinite(r.max_usd_per_hour) && !least_rate.empty()) {
      closest = least_rate;
      return Binds::hourly_cap;
    }
    return Binds::nothing_runs;
  }

 private:
  static void keep(Candidate& slot, const Candidate& c, Objective o) {
    if (!c.empty() && (slot.empty() || better(c, slot, o))) slot = c;
  }
  void keep_rate(const Candidate& c, double usd_per_hour) {
    if (c.empty()) return;
    if (least_rate.empty() || usd_per_hour < least_usd_per_hour ||
        (usd_per_hour == least_usd_per_hour && better(c, least_rate, Objective::max_throughput))) {
      least_rate = c;
      least_usd_per_hour = usd_per_hour;
    }
  }
};

/// The sentence of SearchResult::why_none; `closest` may be empty.
std::string why_none(const SearchRequest& r, const NoPlan& info, const Plan* closest);



/// Number of plans of the space: Σ over regions of Σ_{k <= max_types} e_k(caps), with
/// held groups forced; caps = per-offer usable counts. `caps_by_region` lists caps of the
/// optional offers; `held_choices` the product of the held groups' count ranges (1 if none);
/// with held groups a plan may add no optional offer.
double count_space(const std::vector<std::vector<int>>& caps_by_region, int max_optional,
                   double held_choices, bool has_held);

/// Whether a simulated candidate meets the request's deadline and budget limits; counts each
/// violated limit in `stats`. Shared by both searches so they agree on feasibility.
inline bool satisfies(const SearchRequest& r, const Candidate& c, const IterationResult& it, double rate,
                      SearchStats& stats) {
  bool ok = true;
  if (!meets_deadline(r, it, rate, c)) {
    ++stats.violated_deadline;
    ok = false;
  }
  if (!meets_budget(r, c, it.usd_per_hour)) {
    ++stats.violated_budget;
    ok = false;
  }
  return ok;
}

/// Fills result.plans (best first) from the merged top-k and, when asked, result.pareto from
/// the pooled candidates; both searches end this way.
inline void add_plans(const SearchRequest& request, const std::vector<Candidate>& top,
                      std::vector<Candidate> pool, SearchResult& result) {
  for (const Candidate& c : top) result.plans.push_back(materialise(request, c));
  if (request.collect_pareto) {
    for (const Candidate& c : pareto_front(std::move(pool))) result.pareto.push_back(materialise(request, c));
  }
}

}  // namespace srift::detail
