#pragma once
// Plan search: which multiset of (instance type, market) groups, in one region, answers the
// user's question best under the iteration model of simulator.hpp.
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "srift/hardware.hpp"
#include "srift/simulator.hpp"
#include "srift/workload.hpp"

namespace srift {

enum class Market : int { on_demand = 0, spot = 1 };

/// Something that can be rented: an instance type in a region and market at a price.
struct Offer {
  int instance = 0;          ///< index into SearchRequest::instances
  int region = 0;            ///< opaque region id; a plan never mixes regions
  Market market = Market::on_demand;
  double usd_per_hour = 0;   ///< one instance, USD/hour (> 0)
  int max_count = 0;         ///< most instances of this offer in one plan (quota), >= 0
  ComputeModel compute;      ///< the instance's GPU on the workload
};

enum class Objective : int {
  min_cost = 0,        ///< least total USD such that total time <= deadline_s
  max_throughput = 1,  ///< most samples/s such that total USD <= budget_usd
};

/// Set to true from any thread to stop a search early; it returns the best plan found.
struct CancelToken {
  std::atomic<bool> cancelled{false};
  void cancel() { cancelled.store(true, std::memory_order_relaxed); }
  bool is_cancelled() const { return cancelled.load(std::memory_order_relaxed); }
};

struct SearchRequest {
  Workload workload;
  std::vector<InstanceSpec> instances;
  std::vector<Offer> offers;
  int global_batch = 0;          ///< samples per iteration, fixed by the user
  double iterations = 0;         ///< iterations to train (> 0)
  Objective objective = Objective::min_cost;
  double deadline_s = std::numeric_limits<double>::infinity();  ///< total wall time bound
  double budget_usd = std::numeric_limits<double>::infinity();  ///< total USD bound
  double max_usd_per_hour = std::numeric_limits<double>::infinity();  ///< hourly-rate bound
  int max_types = 2;             ///< most distinct offers in one plan (1..kMaxGroups)
  int max_instances = 1 << 30;   ///< most instances in one plan, all groups together
  int top_k = 5;                 ///< plans returned, best first
  int threads = 1;               ///< worker threads (0: hardware concurrency)
  bool collect_pareto = false;   ///< also return the (total time, total USD) Pareto front
  double usable_memory_fraction = 0.95;

  void validate() const;
};

struct PlanGroup {
  int offer = 0;
  int count = 0;
};

struct Plan {
  std::vector<PlanGroup> groups;
  IterationResult iteration;
  double total_s = 0;    ///< iterations x iteration time, seconds
  double total_usd = 0;  ///< USD for the whole run
};

struct SearchStats {
  std::uint64_t evaluated = 0;        ///< clusters simulated
  std::uint64_t feasible = 0;         ///< ... that fit memory and batch
  std::uint64_t infeasible_memory = 0;
  std::uint64_t infeasible_batch = 0;
  std::uint64_t violated_deadline = 0;
  std::uint64_t violated_budget = 0;
  std::uint64_t pruned = 0;           ///< clusters skipped by a bound without simulation
  bool cancelled = false;
  double seconds = 0;
};

struct SearchResult {
  std::vector<Plan> plans;       ///< best first; empty when nothing satisfies the constraint
  std::vector<Plan> pareto;      ///< when requested: increasing time, decreasing USD
  /// The plan that comes closest when nothing satisfies the constraint: the fastest for a
  /// deadline, the cheapest for a budget. Empty groups when no cluster is even feasible.
  Plan closest;
  SearchStats stats;
  std::string why_none;          ///< a sentence when `plans` is empty
};

/// Exhaustive search over every plan of up to `max_types` offers (1 or 2 in this version),
/// each with 1..max_count instances. Throws std::invalid_argument on bad input.
SearchResult search_exhaustive(const SearchRequest& request, const CancelToken* cancel = nullptr);

/// Total wall time and USD of a plan given its iteration: the search's objective terms.
void plan_totals(const SearchRequest& request, Plan& plan);

}  // namespace srift
