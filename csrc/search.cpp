#include "srift/search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>

#include "validate.hpp"

namespace srift {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A compact candidate: up to two (offer, count) groups and its objective terms.
struct Candidate {
  int offer[2] = {-1, -1};
  int count[2] = {0, 0};
  double total_s = kInf;
  double total_usd = kInf;
};

// True when a is strictly better than b for the objective (ties broken by the other term,
// then by a fixed order on the plan so results are deterministic across thread counts).
bool better(const Candidate& a, const Candidate& b, Objective objective) {
  if (objective == Objective::min_cost) {
    if (a.total_usd != b.total_usd) return a.total_usd < b.total_usd;
    if (a.total_s != b.total_s) return a.total_s < b.total_s;
  } else {
    if (a.total_s != b.total_s) return a.total_s < b.total_s;
    if (a.total_usd != b.total_usd) return a.total_usd < b.total_usd;
  }
  for (int i = 0; i < 2; ++i) {
    if (a.offer[i] != b.offer[i]) return a.offer[i] < b.offer[i];
    if (a.count[i] != b.count[i]) return a.count[i] < b.count[i];
  }
  return false;
}

// Best-first list of at most k candidates.
void offer_top_k(std::vector<Candidate>& top, const Candidate& c, int k, Objective objective) {
  if (static_cast<int>(top.size()) == k && !better(c, top.back(), objective)) return;
  auto pos = std::upper_bound(top.begin(), top.end(), c, [&](const Candidate& a, const Candidate& b) {
    return better(a, b, objective);
  });
  top.insert(pos, c);
  if (static_cast<int>(top.size()) > k) top.pop_back();
}

struct ThreadState {
  std::vector<Candidate> top;
  Candidate closest;
  std::vector<Candidate> pareto_pool;
  SearchStats stats;
};

bool satisfies(const SearchRequest& r, const Candidate& c, double usd_per_hour, SearchStats& stats) {
  bool ok = true;
  if (c.total_s > r.deadline_s) {
    ++stats.violated_deadline;
    ok = false;
  }
  if (c.total_usd > r.budget_usd || usd_per_hour > r.max_usd_per_hour) {
    ++stats.violated_budget;
    ok = false;
  }
  return ok;
}

class Evaluator {
 public:
  Evaluator(const SearchRequest& r, ThreadState& state) : r_(r), s_(state) {
    options_.global_batch = r.global_batch;
    options_.usable_memory_fraction = r.usable_memory_fraction;
  }

  void evaluate(int i, int a, int j, int b) {
    GroupSpec groups[2];
    int n = 0;
    set_group(groups[n++], i, a);
    if (j >= 0) set_group(groups[n++], j, b);
    simulate_unchecked(r_.workload, groups, n, options_, result_);
    ++s_.stats.evaluated;
    if (!result_.feasible()) {
      if (result_.infeasible == Infeasible::memory) ++s_.stats.infeasible_memory;
      else ++s_.stats.infeasible_batch;
      return;
    }
    ++s_.stats.feasible;
    Candidate c;
    c.offer[0] = i;
    c.count[0] = a;
    c.offer[1] = j;
    c.count[1] = j >= 0 ? b : 0;
    c.total_s = r_.iterations * result_.iteration_s;
    c.total_usd = result_.usd_per_hour * c.total_s / 3600.0;
    if (r_.collect_pareto) s_.pareto_pool.push_back(c);
    if (satisfies(r_, c, result_.usd_per_hour, s_.stats)) {
      offer_top_k(s_.top, c, r_.top_k, r_.objective);
    } else if (closer(c)) {
      s_.closest = c;
    }
  }

 private:
  void set_group(GroupSpec& g, int offer, int count) const {
    const Offer& o = r_.offers[offer];
    g.instance = &r_.instances[o.instance];
    g.count = count;
    g.compute = o.compute;
    g.usd_per_hour = o.usd_per_hour;
  }

  // Among plans that miss the constraint: the fastest for a deadline, cheapest for a budget.
  bool closer(const Candidate& c) const {
    if (s_.closest.offer[0] < 0) return true;
    const Objective flipped = r_.objective == Objective::min_cost ? Objective::max_throughput
                                                                   : Objective::min_cost;
    return better(c, s_.closest, flipped);
  }

  const SearchRequest& r_;
  ThreadState& s_;
  SimOptions options_;
  IterationResult result_;
};

int workers_of(const SearchRequest& r, int offer, int count) {
  return r.instances[r.offers[offer].instance].gpus * count;
}

void search_outer(const SearchRequest& r, int i, Evaluator& eval, const CancelToken* cancel) {
  const int n_offers = static_cast<int>(r.offers.size());
  for (int a = 1; a <= r.offers[i].max_count && a <= r.max_instances; ++a) {
    if (workers_of(r, i, a) > r.global_batch) break;  // more ranks than samples: never feasible
    if (cancel != nullptr && cancel->is_cancelled()) return;
    eval.evaluate(i, a, -1, 0);
    if (r.max_types < 2) continue;
    for (int j = i + 1; j < n_offers; ++j) {
      if (r.offers[j].region != r.offers[i].region) continue;
      for (int b = 1; b <= r.offers[j].max_count && a + b <= r.max_instances; ++b) {
        if (workers_of(r, i, a) + workers_of(r, j, b) > r.global_batch) break;
        eval.evaluate(i, a, j, b);
      }
    }
  }
}

Plan materialise(const SearchRequest& r, const Candidate& c) {
  Plan plan;
  std::vector<GroupSpec> groups;
  for (int k = 0; k < 2; ++k) {
    if (c.offer[k] < 0) continue;
    plan.groups.push_back({c.offer[k], c.count[k]});
    const Offer& o = r.offers[c.offer[k]];
    groups.push_back({&r.instances[o.instance], c.count[k], o.compute, o.usd_per_hour});
  }
  SimOptions options;
  options.global_batch = r.global_batch;
  options.usable_memory_fraction = r.usable_memory_fraction;
  simulate_unchecked(r.workload, groups.data(), static_cast<int>(groups.size()), options, plan.iteration);
  plan_totals(r, plan);
  return plan;
}

std::vector<Candidate> pareto_front(std::vector<Candidate> pool) {
  std::sort(pool.begin(), pool.end(), [](const Candidate& a, const Candidate& b) {
    if (a.total_s != b.total_s) return a.total_s < b.total_s;
    return a.total_usd < b.total_usd;
  });
  std::vector<Candidate> front;
  double best_usd = kInf;
  for (const Candidate& c : pool) {
    if (c.total_usd < best_usd) {
      front.push_back(c);
      best_usd = c.total_usd;
    }
  }
  return front;
}

std::string hours(double seconds) {
  std::ostringstream s;
  s.precision(3);
  s << seconds / 3600.0 << " h";
  return s.str();
}

}  // namespace

void SearchRequest::validate() const {
  workload.validate();
  if (global_batch < 1) detail::fail("global_batch", ">= 1", global_batch);
  detail::require_positive("iterations", iterations);
  if (!(deadline_s > 0)) detail::fail("deadline_s", "> 0", deadline_s);
  if (!(budget_usd > 0)) detail::fail("budget_usd", "> 0", budget_usd);
  if (!(max_usd_per_hour > 0)) detail::fail("max_usd_per_hour", "> 0", max_usd_per_hour);
  if (max_types < 1 || max_types > 2) {
    detail::fail("max_types", "1 or 2 for the exhaustive search", max_types);
  }
  if (max_instances < 1) detail::fail("max_instances", ">= 1", max_instances);
  if (top_k < 1) detail::fail("top_k", ">= 1", top_k);
  if (threads < 0) detail::fail("threads", ">= 0", threads);
  if (!(usable_memory_fraction > 0 && usable_memory_fraction <= 1)) {
    detail::fail("usable_memory_fraction", "in (0, 1]", usable_memory_fraction);
  }
  for (std::size_t i = 0; i < instances.size(); ++i) instances[i].validate();
  for (std::size_t i = 0; i < offers.size(); ++i) {
    const Offer& o = offers[i];
    const std::string f = "offers[" + std::to_string(i) + "].";
    if (o.instance < 0 || o.instance >= static_cast<int>(instances.size())) {
      throw std::out_of_range(f + "instance must index instances (size " +
                              std::to_string(instances.size()) + "), got " + std::to_string(o.instance));
    }
    detail::require_positive(f + "usd_per_hour", o.usd_per_hour);
    if (o.max_count < 0) detail::fail(f + "max_count", ">= 0", o.max_count);
    o.compute.validate();
  }
}

void plan_totals(const SearchRequest& request, Plan& plan) {
  plan.total_s = request.iterations * plan.iteration.iteration_s;
  plan.total_usd = plan.iteration.usd_per_hour * plan.total_s / 3600.0;
}

SearchResult search_exhaustive(const SearchRequest& request, const CancelToken* cancel) {
  request.validate();
  const auto started = std::chrono::steady_clock::now();
  const int n_offers = static_cast<int>(request.offers.size());
  int threads = request.threads == 0 ? static_cast<int>(std::thread::hardware_concurrency())
                                     : request.threads;
  threads = std::max(1, std::min(threads, std::max(1, n_offers)));

  std::vector<ThreadState> states(threads);
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto work = [&](int t) {
    try {
      Evaluator eval(request, states[t]);
      // Interleaved outer offers balance the threads: early offers pair with more others.
      for (int i = t; i < n_offers; i += threads) search_outer(request, i, eval, cancel);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
  };
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (std::thread& th : pool) th.join();
  }
  if (first_error) std::rethrow_exception(first_error);

  // Merge the threads' findings.
  std::vector<Candidate> top, pool;
  Candidate closest;
  SearchResult result;
  for (ThreadState& s : states) {
    for (const Candidate& c : s.top) offer_top_k(top, c, request.top_k, request.objective);
    const Objective flipped = request.objective == Objective::min_cost ? Objective::max_throughput
                                                                        : Objective::min_cost;
    if (s.closest.offer[0] >= 0 && (closest.offer[0] < 0 || better(s.closest, closest, flipped))) {
      closest = s.closest;
    }
    pool.insert(pool.end(), s.pareto_pool.begin(), s.pareto_pool.end());
    SearchStats& st = result.stats;
    st.evaluated += s.stats.evaluated;
    st.feasible += s.stats.feasible;
    st.infeasible_memory += s.stats.infeasible_memory;
    st.infeasible_batch += s.stats.infeasible_batch;
    st.violated_deadline += s.stats.violated_deadline;
    st.violated_budget += s.stats.violated_budget;
  }
  for (const Candidate& c : top) result.plans.push_back(materialise(request, c));
  if (request.collect_pareto) {
    for (const Candidate& c : pareto_front(std::move(pool))) result.pareto.push_back(materialise(request, c));
  }
  if (closest.offer[0] >= 0) result.closest = materialise(request, closest);
  result.stats.cancelled = cancel != nullptr && cancel->is_cancelled();

  if (result.plans.empty()) {
    std::ostringstream why;
    if (request.offers.empty()) {
      why << "no offers to choose from (no instance type is priced in the requested regions and markets)";
    } else if (result.stats.feasible == 0) {
      why << "no cluster can run the workload: " << result.stats.infeasible_memory
          << " do not fit GPU memory and " << result.stats.infeasible_batch
          << " have more GPUs than the global batch has samples";
    } else if (request.objective == Objective::min_cost) {
      why << "no plan meets the deadline of " << hours(request.deadline_s);
      if (!result.closest.groups.empty()) why << "; the fastest takes " << hours(result.closest.total_s);
      if (std::isfinite(request.budget_usd) || std::isfinite(request.max_usd_per_hour)) {
        why << " (within the budget limits)";
      }
    } else {
      why << "no plan fits the budget";
      if (!result.closest.groups.empty()) {
        std::ostringstream usd;
        usd.precision(6);
        usd << result.closest.total_usd;
        why << "; the cheapest costs USD " << usd.str();
      }
    }
    result.why_none = why.str();
  }
  result.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace srift
