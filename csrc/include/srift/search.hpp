#pragma once
// Plan search: which multiset of (instance type, market) groups, in one region, answers the
// user's question best under the iteration model of simulator.hpp and, for spot instances,
// the preemption model of spot.hpp (note "spot model").
//
// Two searches answer the same question over the same space:
// - search(): exact branch-and-bound (note "bounds" in csrc/bnb.cpp), any number of regions,
//   up to max_types offers per plan, threads, cancellable with an optimality gap;
// - search_exhaustive(): plain enumeration, the reference the tests hold search() to.
// Both order plans the same way: by the objective, then the other term, then the plan's
// groups (offer index, count) in ascending offer order; so both return the same plans.
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "srift/band.hpp"
#include "srift/hardware.hpp"
#include "srift/simulator.hpp"
#include "srift/spot.hpp"
#include "srift/workload.hpp"

namespace srift {

/// Most plans one search returns (SearchRequest::top_k): the bounds prune only once the
/// top k are full, so a huge k walks the whole space.
constexpr int kMaxTopK = 1000;

enum class Market : int { on_demand = 0, spot = 1 };

/// Something that can be rented: an instance type in a region and market at a price.
struct Offer {
  int instance = 0;          ///< index into SearchRequest::instances
  int region = 0;            ///< opaque region id; a plan never mixes regions
  Market market = Market::on_demand;
  double usd_per_hour = 0;   ///< one instance, USD/hour (> 0)
  int max_count = 0;         ///< most instances of this offer in one plan (quota), >= 0
  ComputeModel compute;      ///< the instance's GPU on the workload
  /// Spot reclaims per instance-hour (>= 0; 0: never preempted, e.g. on-demand). See
  /// interruption_rate_from_class for the catalog's frequency classes.
  double interruptions_per_hour = 0;
  /// The spread of this offer's part of an iteration (band.hpp note "iteration band"); it
  /// enters the deadline test only with a deadline_confidence. Default: none.
  GroupBand band;
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

/// One group of a plan: `count` instances of offer `offer` (an index into the offers).
struct PlanGroup {
  int offer = 0;
  int count = 0;
};

struct SearchRequest {
  Workload workload;
  std::vector<InstanceSpec> instances;
  std::vector<Offer> offers;
  int global_batch = 0;          ///< samples per iteration, fixed by the user
  double iterations = 0;         ///< iterations to train (finite, >= 1)
  Objective objective = Objective::min_cost;
  double deadline_s = std::numeric_limits<double>::infinity();  ///< total wall time bound
  double budget_usd = std::numeric_limits<double>::infinity();  ///< total USD bound
  double max_usd_per_hour = std::numeric_limits<double>::infinity();  ///< hourly-rate bound
  /// Most distinct offers in one plan (1..kMaxGroups). Kept at 2 so a default request stays
  /// cheap for search_exhaustive; srift.recommend asks search() for 3.
  int max_types = 2;
  int max_instances = 1 << 30;   ///< most instances in one plan, all groups together
  /// Offers whose GPUs have less memory (bytes) are left out of every plan.
  double min_gpu_memory_bytes = 0;
  /// Groups every plan must contain (`srift replan`): each held offer appears with at least
  /// its count (more of the same offer may be added); they count towards max_types and
  /// fix the region. Distinct offers, count >= 1, and at most 2^31 - 1 GPUs (instances x GPUs)
  /// over them all, as simulate() allows.
  std::vector<PlanGroup> held;
  /// When > 0 the deadline must be met with this probability (e.g. 0.9) instead of in
  /// expectation: under spot preemption and each plan's iteration band together (band.hpp
  /// note "deadline probability"). 0, or in [0.5, 1): a deadline met less often than not is
  /// no deadline, and the search's bounds rely on it. Every offer's band.compute and
  /// band.compute_several must then be known (validate throws naming the offer).
  double deadline_confidence = 0;
  /// The held-out spread of multi-GPU steps over modelled or probed links, for the bands of
  /// the plans (with the offers' bands). Default: none.
  ScalingBand scaling_band;
  SpotParams spot;               ///< checkpoint and restart assumptions for spot offers
  /// search() stops after this many seconds (wall clock) and returns the best plans found
  /// with the remaining optimality gap; +inf: no limit. Ignored by search_exhaustive. A
  /// scheduler should set one: on srift's catalog searches take milliseconds, but a space
  /// with no plan meeting the constraints is searched again for the closest plan (up to three
  /// more times, note "closest"), which on a catalog of 20 types x 3 regions x 2 markets took
  /// two minutes, and a large batch in many micro-steps took 1-2 minutes before the bounds on
  /// micro-steps (csrc/bnb.cpp note "bounds"; about a second now).
  double time_limit_s = std::numeric_limits<double>::infinity();
  int top_k = 5;                 ///< plans returned, best first; at most kMaxTopK
  /// Worker threads (0: hardware concurrency), capped at 4 x the hardware concurrency and at
  /// the units of work (search_internal.hpp note "threads"). A thread the OS refuses to start
  /// (a pids limit, no address space left) is no error: its work runs on the threads that did.
  int threads = 1;
  bool collect_pareto = false;   ///< also return the (total time, total USD) Pareto front
  double usable_memory_fraction = 0.95;
  /// Most gradient-accumulation micro-steps a plan may take when the global batch does not
  /// fit its GPUs' memory at once (SimOptions::max_accumulation_steps); 1: none.
  int max_accumulation_steps = 1;
  /// Largest local batch one GPU may run in a micro-step, samples (SimOptions::max_local_batch);
  /// 0: GPU memory alone limits it.
  int max_local_batch = 0;

  /// The simulator options every plan of this request is evaluated with.
  SimOptions sim_options() const;

  void validate() const;
};


struct Plan {
  std::vector<PlanGroup> groups;  ///< ascending offer index
  IterationResult iteration;
  /// Expected wall time of the run, seconds: iterations x iteration time, inflated by
  /// preemptions when the plan has spot instances (spot.expected_s).
  double total_s = 0;
  double total_usd = 0;  ///< USD for the whole run: cluster USD/hour x total_s / 3600
  SpotEstimate spot;     ///< the preemption assumptions and outcome (rate 0: none)
  IterationBand band;    ///< the iteration's p10-p90 band (unknown where the slowest group's compute band is)
  /// Chance that the run meets the request's deadline, preemption and band together (1 when
  /// there is no deadline; NaN when the plan has no band: unknown, not certain).
  double deadline_probability = 1;
};

struct SearchStats {
  std::uint64_t evaluated = 0;        ///< clusters simulated
  std::uint64_t feasible = 0;         ///< ... that fit memory and batch
  std::uint64_t infeasible_memory = 0;
  std::uint64_t infeasible_batch = 0;
  std::uint64_t violated_deadline = 0;
  std::uint64_t violated_budget = 0;
  /// Plans of the space never simulated (search(): space - evaluated; they were cut by a
  /// bound or by the instance/batch limits without simulation); 2^64 - 1 where that count is
  /// larger.
  std::uint64_t pruned = 0;
  std::uint64_t nodes = 0;            ///< search(): (offer, count) nodes of the tree visited
  /// Plans in the space: per-offer caps and max_types (not the joint instance/batch limits).
  double space = 0;
  bool cancelled = false;
  double seconds = 0;

  /// Adds another thread's counters (evaluated .. nodes); space, flags and time stay.
  SearchStats& operator+=(const SearchStats& other);
};

struct SearchResult {
  std::vector<Plan> plans;       ///< best first; empty when nothing satisfies the constraint
  std::vector<Plan> pareto;      ///< when requested: increasing time, decreasing USD
  /// The plan that comes closest when nothing satisfies the constraints, found with only the
  /// binding one lifted (note "closest" in search_internal.hpp): with a deadline, the fastest
  /// plan within the budget and the hourly cap; else, with a budget, the cheapest within the
  /// cap; else the plan of the least hourly rate, over the cap. Empty groups when no cluster
  /// is even feasible. why_none names the constraint that binds.
  Plan closest;
  SearchStats stats;
  std::string why_none;          ///< a sentence when `plans` is empty
  /// search(): true when the tree was fully explored (the plans are proven best).
  bool optimal = true;
  /// search(): relative gap between the best plan found and a lower bound on every plan
  /// left unexplored, (best - bound) / best, for the objective (USD or seconds); 0 when
  /// optimal, +inf when stopped before any plan was found.
  double gap = 0;
};

/// Exhaustive search over every plan of up to `max_types` offers of one region, each with
/// 1..max_count instances. Fine for 1-2 offers; meant as the reference for search().
/// Throws std::invalid_argument on bad input.
SearchResult search_exhaustive(const SearchRequest& request, const CancelToken* cancel = nullptr);

/// Exact branch-and-bound over the same space (plus `held` and `time_limit_s`): returns the
/// same plans as search_exhaustive, `top_k` best first; the Pareto front when asked; the
/// closest plan only when no plan satisfies the constraints. Threads share the work across
/// regions and first offers; the first exception on any thread is rethrown here. Stops
/// early on `cancel` or `time_limit_s` with `optimal` false and the remaining `gap`.
/// Throws std::invalid_argument / std::out_of_range on bad input, and std::invalid_argument
/// naming the plan when a plan's run (iterations x iteration), price per hour or cost
/// overflows a double (search_exhaustive too).
SearchResult search(const SearchRequest& request, const CancelToken* cancel = nullptr);

/// Total wall time and USD of a plan given its iteration: the search's objective terms,
/// including the spot estimate (fills plan.spot). Throws std::out_of_range naming a group
/// whose offer (or that offer's instance) indexes nothing, std::invalid_argument when the run,
/// the price per hour or the cost is past a double's range.
void plan_totals(const SearchRequest& request, Plan& plan);

/// Interruption rate of a plan, per hour: Σ count x offers[offer].interruptions_per_hour.
/// Throws std::out_of_range naming groups[i].offer when it indexes no offer.
double plan_interruptions_per_hour(const SearchRequest& request, const std::vector<PlanGroup>& groups);

}  // namespace srift
