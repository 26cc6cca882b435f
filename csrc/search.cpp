#include "srift/search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>

#include "search_internal.hpp"
#include "validate.hpp"

namespace srift {
namespace detail {

std::vector<Candidate> pareto_front(std::vector<Candidate> pool) {
  std::sort(pool.begin(), pool.end(), [](const Candidate& a, const Candidate& b) {
    if (a.total_s != b.total_s) return a.total_s < b.total_s;
    if (a.total_usd != b.total_usd) return a.total_usd < b.total_usd;
    return better(a, b, Objective::max_throughput);  // equal points: the same one as search()
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

Plan materialise(const SearchRequest& r, const Candidate& c) {
  Plan plan;
  GroupSpec groups[kMaxGroups];
  for (int k = 0; k < c.n; ++k) {
    plan.groups.push_back({c.offer[k], c.count[k]});
    const Offer& o = r.offers[c.offer[k]];
    groups[k] = {&r.instances[o.instance], c.count[k], o.compute, o.usd_per_hour};
  }
  simulate_unchecked(r.workload, groups, c.n, r.sim_options(), plan.iteration);
  plan_totals(r, plan);
  return plan;
}

namespace {
std::string plan_text(const SearchRequest& r, const Candidate& c) {
  std::string plan;
  for (int k = 0; k < c.n; ++k) {
    const Offer& o = r.offers[c.offer[k]];
    plan += (k ? " + " : "") + std::to_string(c.count[k]) + "x offers[" + std::to_string(c.offer[k]) + "] (" +
            r.instances[o.instance].name + ")";
  }
  return plan;
}
}  // namespace

void require_finite_iteration(const SearchRequest& r, const Candidate& c, const IterationResult& it) {
  if (std::isfinite(it.iteration_s)) return;
  require_finite_iteration("plan " + plan_text(r, c), it.iteration_s, it.compute_s, it.comm_s);
}

void fail_totals(const SearchRequest& r, const Candidate& c, const IterationResult& it, double total_s) {
  const std::string plan = "plan " + plan_text(r, c);
  if (std::isfinite(it.usd_per_hour) && std::isfinite(r.iterations * it.iteration_s)) {
    throw std::invalid_argument(plan + ": its cost overflows ($" + fmt(it.usd_per_hour) + "/h x " + fmt(total_s) +
                                " s): an offer's usd_per_hour or a compute model is out of any real range");
  }
  if (!std::isfinite(it.usd_per_hour)) {
    throw std::invalid_argument(plan + ": its price overflows (usd_per_hour over the groups " + fmt(it.usd_per_hour) +
                                "): an offer's usd_per_hour is out of any real range");
  }
  throw std::invalid_argument(plan + ": its run overflows (iterations " + fmt(r.iterations) + " x iteration " +
                              fmt(it.iteration_s) + " s): the iterations or a compute model are out of any real range");
}

namespace {
// A duration as a person reads it: seconds under a minute, minutes under an hour, else hours
// (a deadline of 1 s read "0.000278 h").
std::string hours(double seconds) {
  std::ostringstream s;
  s.precision(3);
  if (seconds < 60.0) {
    s << seconds << " s";
  } else if (seconds < 3600.0) {
    s << seconds / 60.0 << " min";
  } else {
    s << seconds / 3600.0 << " h";
  }
  return s.str();
}

// `srift replan`: every plan keeps the held groups, so a held instance can bound them all (a
// small instance's NIC in the ring makes every plan's allreduce slow). Say which groups are
// held, and when the closest plan's ring is bounded by a held group's network link, that too.
void describe_held(std::ostringstream& why, const SearchRequest& r, const Plan* closest) {
  if (r.held.empty()) return;
  why << "; every plan keeps the held ";
  for (std::size_t i = 0; i < r.held.size(); ++i) {
    if (i > 0) why << " + ";
    why << r.held[i].count << "x " << r.instances[r.offers[r.held[i].offer].instance].name;
  }
  if (closest == nullptr || closest->iteration.bottleneck != Bottleneck::network) return;
  const int g = closest->iteration.bottleneck_group;
  if (g < 0 || g >= static_cast<int>(closest->groups.size())) return;
  const int offer = closest->groups[static_cast<std::size_t>(g)].offer;
  for (const PlanGroup& h : r.held) {
    if (h.offer != offer) continue;
    std::ostringstream gbs;
    gbs.precision(3);
    gbs << closest->iteration.ring_bandwidth / 1e9;
    why << ", and the network link of " << r.instances[r.offers[offer].instance].name << " (" << gbs.str()
        << " GB/s) bounds the allreduce of the closest";
    return;
  }
}
}  // namespace

// Note "held conflicts". Every plan keeps the held groups, so a held group the request's own
// limits exclude (a count past its offer's cap, a GPU below min_gpu_memory_bytes or too small
// for the model) leaves nothing to search. bnb's build() then drops the region and the search
// reports the batch as the reason; name the held group and the limit instead. Empty: none.
std::string held_conflict(const SearchRequest& r) {
  if (r.held.empty()) return "";
  std::ostringstream why;
  long long instances = 0, gpus = 0;
  for (const PlanGroup& h : r.held) {
    const Offer& o = r.offers[h.offer];
    const InstanceSpec& inst = r.instances[o.instance];
    const std::string group = std::to_string(h.count) + "x " + inst.name;
    instances += h.count;
    gpus += static_cast<long long>(h.count) * inst.gpus;
    if (h.count > o.max_count) {
      why << "every plan keeps the held " << group << ", more than that offer's cap of " << o.max_count
          << " instances (max_instances_per_type or its quota): raise the cap";
      return why.str();
    }
    if (inst.gpu_memory_bytes < r.min_gpu_memory_bytes) {
      why.precision(4);
      why << "every plan keeps the held " << group << ", whose GPUs have " << inst.gpu_memory_bytes / (1u << 30)
          << " GiB, below min_gpu_memory (" << r.min_gpu_memory_bytes / (1u << 30) << " GiB)";
      return why.str();
    }
    if (max_local_batch(r.workload, inst, r.sim_options()) < 1) {
      why << "every plan keeps the held " << group << ", whose GPUs cannot hold the model and one sample in memory";
      return why.str();
    }
  }
  if (instances > r.max_instances) {
    why << "every plan keeps the held groups' " << instances << " instances, more than max_instances ("
        << r.max_instances << ")";
  } else if (gpus > r.global_batch) {
    why << "every plan keeps the held groups' " << gpus << " GPUs, more than the global batch of "
        << r.global_batch << " samples (each GPU takes at least one)";
  }
  return why.str();
}

namespace {
std::string usd(double value, int digits = 6) {
  std::ostringstream s;
  s.precision(digits);
  s << "USD " << value;
  return s.str();
}

// " within the budget of USD 500 and the hourly cap of USD 2/h", or "" with neither.
std::string limits(const SearchRequest& r) {
  const bool budget = std::isfinite(r.budget_usd), cap = std::isfinite(r.max_usd_per_hour);
  std::string s;
  if (budget) s += " within the budget of " + usd(r.budget_usd);
  if (cap) s += std::string(budget ? " and" : " within") + " the hourly cap of " + usd(r.max_usd_per_hour) + "/h";
  return s;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}  // namespace

std::string why_none(const SearchRequest& r, const NoPlan& info, const Plan* closest) {
  std::ostringstream why;
  const bool any_feasible = info.binds != Binds::nothing_runs;
  const bool has_closest = closest != nullptr && !closest->groups.empty();
  const std::string conflict = any_feasible || r.offers.empty() ? "" : held_conflict(r);
  // Offers the request's own minimum GPU memory keeps (bnb's build() and the walk skip the rest).
  double largest = 0, largest_usable = 0;
  for (const Offer& o : r.offers) {
    const double bytes = r.instances[o.instance].gpu_memory_bytes;
    largest = std::max(largest, bytes);
    if (bytes >= r.min_gpu_memory_bytes) largest_usable = std::max(largest_usable, bytes);
  }
  if (!conflict.empty()) {
    why << "no cluster can run the workload: " << conflict;
  } else if (r.offers.empty()) {
    why << "no offers to choose from (no instance type is priced in the requested regions and markets)";
  } else if (!any_feasible && !(largest_usable > 0)) {
    // min_gpu_memory leaves no offer: that, not the batch or the model, is why nothing runs
    why.precision(4);
    why << "no offer has GPUs of at least " << r.min_gpu_memory_bytes / kGiB
        << " GiB (min_gpu_memory): the largest GPU offered has " << largest / kGiB
        << " GiB; lower the minimum or offer larger GPUs (other regions or types)";
  } else if (!any_feasible) {
    why << "no cluster can run the workload: ";
    // Note "model too large". When no offered GPU holds the model and one sample, no plan,
    // cap or accumulation can help: every DDP rank keeps a whole copy of the model's state.
    // (Memory is monotone, so the largest GPU min_gpu_memory keeps decides.)
    const SimOptions sim = r.sim_options();
    InstanceSpec probe;
    probe.gpu_memory_bytes = largest_usable;
    if (max_local_batch(r.workload, probe, sim.usable_memory_fraction, 1) < 1) {
      why.precision(4);
      why << "the model's weights, gradients, optimizer state, buffers and workspace take "
          << r.workload.fixed_memory_bytes / kGiB << " GiB on every GPU (DDP keeps a whole copy per rank) plus "
          << r.workload.activation_bytes_per_sample / (1024.0 * 1024.0)
          << " MiB per sample, and the largest GPU offered has " << largest_usable / kGiB << " GiB, "
          << sim.usable_memory_fraction * largest_usable / kGiB
          << " of them usable; no cluster, limit or accumulation changes that: use a larger GPU, less "
             "optimizer state (SGD keeps none), or shard the model (FSDP, ZeRO: srift does not model them)";
      return why.str();
    }
    if (info.infeasible_memory + info.infeasible_batch > 0) {
      why << info.infeasible_memory << " evaluated do not fit GPU memory and " << info.infeasible_batch
          << " have more GPUs than the global batch has samples; ";
    }
    // The search cuts whole subtrees whose GPUs cannot hold the batch (bnb.cpp note "bounds"),
    // so memory is the reason unless only batch-smaller-than-GPU clusters were met.
    if (info.infeasible_memory == 0 && info.infeasible_batch > 0) return why.str() + "use fewer or smaller instances";
    why << "no plan within the limits (" << r.max_types << " instance types, their instance caps";
    if (r.max_instances < (1 << 30)) why << ", " << r.max_instances << " instances";
    if (r.min_gpu_memory_bytes > 0) {
      std::ostringstream gib;
      gib.precision(4);
      gib << r.min_gpu_memory_bytes / kGiB;
      why << ", GPUs of at least " << gib.str() << " GiB";
    }
    why << ") holds the global batch of " << r.global_batch
        << " samples in its GPUs' memory";
    if (r.max_local_batch > 0) why << " at " << r.max_local_batch << " samples per GPU (max_local_batch)";
    if (r.max_accumulation_steps <= 1) {
      why << " (allow gradient accumulation, raise the limits, or lower the global batch)";
    } else {
      why << " in " << r.max_accumulation_steps << " accumulation micro-steps";
    }
  } else if (info.binds == Binds::deadline) {
    // Note "closest": some plan keeps within the budget and the cap, none of them in time.
    const std::string within = limits(r);
    why << "no plan" << within << " meets the deadline of " << hours(r.deadline_s);
    if (r.deadline_confidence > 0) why << " with probability " << r.deadline_confidence;
    if (has_closest) {
      const bool both = std::isfinite(r.budget_usd) && std::isfinite(r.max_usd_per_hour);
      why << "; the fastest" << (within.empty() ? "" : both ? " within them" : " within it");
      if (std::isfinite(closest->total_s)) {
        why << " takes " << hours(closest->total_s);
      } else {  // "takes inf h": a spot rate whose restarts outrun the time between interruptions
        why << " never finishes at its spot interruption rate (each restart costs more than the mean "
               "time between interruptions)";
      }
      if (r.deadline_confidence > 0 && std::isfinite(closest->total_s)) {
        std::ostringstream p;
        p.precision(2);
        p << closest->deadline_probability;
        why << " and meets it with probability " << p.str();
      }
    }
    if (!within.empty() && std::isfinite(info.fastest_s)) {
      const bool budget = std::isfinite(r.budget_usd), cap = std::isfinite(r.max_usd_per_hour);
      why << "; with no " << (budget && cap ? "budget or hourly cap" : budget ? "budget" : "hourly cap")
          << " the fastest takes " << hours(info.fastest_s);
    }
    describe_held(why, r, has_closest ? closest : nullptr);
  } else if (info.binds == Binds::budget) {
    // Some plan keeps within the hourly cap; none within the budget, deadline or not.
    why << "no plan fits the budget of " << usd(r.budget_usd);
    if (has_closest) {
      why << "; the cheapest";
      if (std::isfinite(r.max_usd_per_hour)) why << " within the hourly cap of " << usd(r.max_usd_per_hour) << "/h";
      why << " costs " << usd(closest->total_usd);
    }
    describe_held(why, r, nullptr);  // the cheapest plan's ring says nothing of the budget
  } else {
    // The cap admits no plan at all: the closest is the plan of the least hourly rate.
    why << "no plan runs within the hourly cap of " << usd(r.max_usd_per_hour) << "/h";
    if (has_closest) {
      why << ": the least any plan runs at is " << usd(closest->iteration.usd_per_hour) << "/h (the closest, over the cap)";
    }
    describe_held(why, r, nullptr);
  }
  return why.str();
}

double count_space(const std::vector<std::vector<int>>& caps_by_region, int max_optional,
                   double held_choices, bool has_held) {
  double total = 0;
  for (const std::vector<int>& caps : caps_by_region) {
    // Elementary symmetric polynomials e_0..e_k of the caps: plans with k distinct offers.
    std::vector<double> e(static_cast<std::size_t>(max_optional) + 1, 0.0);
    e[0] = 1;
    for (int c : caps) {
      for (int k = max_optional; k >= 1; --k) e[k] += e[k - 1] * c;
    }
    double region = 0;
    for (int k = has_held ? 0 : 1; k <= max_optional; ++k) region += e[k];
    total += region * held_choices;
  }
  return total;
}

}  // namespace detail

namespace {

using detail::Candidate;
using detail::kInf;

struct ThreadState {
  std::vector<Candidate> top;
  detail::Nearest nearest;  // note "closest"
  std::vector<Candidate> pareto_pool;
  SearchStats stats;
};


// Enumerates every plan: offers in ascending order, each region on its own.
class Enumerator {
 public:
  Enumerator(const SearchRequest& r, ThreadState& state, const CancelToken* cancel)
      : r_(r), s_(state), cancel_(cancel), options_(r.sim_options()) {}

  // All plans whose first (smallest) offer is i.
  void from(int i) {
    if (!usable(i)) return;
    recurse(0, i, i + 1);
  }

 private:
  bool usable(int i) const {
    const Offer& o = r_.offers[i];
    return r_.instances[o.instance].gpu_memory_bytes >= r_.min_gpu_memory_bytes;
  }

  void recurse(int depth, int i, int next) {
    const Offer& o = r_.offers[i];
    const long long gpus = r_.instances[o.instance].gpus;
    // Counts, ranks and instances in 64 bits: GPUs x count past INT_MAX wrapped, and a rank
    // count of 0 then divided by zero in the simulator (a count loop up to INT_MAX too).
    for (long long a = 1; a <= o.max_count && instances_ + a <= r_.max_instances; ++a) {
      if (workers_ + gpus * a > r_.global_batch) break;  // more ranks than samples: never feasible
      if (cancel_ != nullptr && cancel_->is_cancelled()) return;
      c_.offer[depth] = i;
      c_.count[depth] = static_cast<int>(a);  // <= max_count, an int
      c_.n = depth + 1;
      workers_ += gpus * a;
      instances_ += a;
      rate_ += static_cast<double>(a) * o.interruptions_per_hour;
      if (holds_all()) evaluate();
      if (depth + 1 < r_.max_types) {
        for (int j = next; j < static_cast<int>(r_.offers.size()); ++j) {
          if (r_.offers[j].region != o.region || !usable(j)) continue;
          recurse(depth + 1, j, j + 1);
        }
      }
      workers_ -= gpus * a;
      instances_ -= a;
      rate_ -= static_cast<double>(a) * o.interruptions_per_hour;
      c_.offer[depth] = -1;
      c_.count[depth] = 0;
      c_.n = depth;
    }
  }

  bool holds_all() const {
    for (const PlanGroup& h : r_.held) {
      bool found = false;
      for (int k = 0; k < c_.n; ++k) found = found || (c_.offer[k] == h.offer && c_.count[k] >= h.count);
      if (!found) return false;
    }
    return true;
  }

  void evaluate() {
    GroupSpec groups[kMaxGroups];
    double rate = 0;
    for (int k = 0; k < c_.n; ++k) {
      const Offer& o = r_.offers[c_.offer[k]];
      groups[k] = {&r_.instances[o.instance], c_.count[k], o.compute, o.usd_per_hour};
      rate += c_.count[k] * o.interruptions_per_hour;  // same sum order as search()
    }
    simulate_unchecked(r_.workload, groups, c_.n, options_, result_);
    if (result_.feasible()) detail::require_finite_iteration(r_, c_, result_);
    ++s_.stats.evaluated;
    if (!result_.feasible()) {
      if (result_.infeasible == Infeasible::memory) ++s_.stats.infeasible_memory;
      else ++s_.stats.infeasible_batch;
      return;
    }
    ++s_.stats.feasible;
    Candidate c = c_;
    detail::set_totals(r_, result_, rate, c);
    if (r_.collect_pareto) s_.pareto_pool.push_back(c);
    s_.nearest.offer(r_, c, result_.usd_per_hour);
    if (detail::satisfies(r_, c, result_, rate, s_.stats)) detail::offer_top_k(s_.top, c, r_.top_k, r_.objective);
  }

  const SearchRequest& r_;
  ThreadState& s_;
  const CancelToken* cancel_;
  SimOptions options_;
  IterationResult result_;
  Candidate c_;
  long long workers_ = 0;
  long long instances_ = 0;
  double rate_ = 0;
};

}  // namespace

SimOptions SearchRequest::sim_options() const {
  SimOptions options;
  options.global_batch = global_batch;
  options.usable_memory_fraction = usable_memory_fraction;
  options.max_accumulation_steps = max_accumulation_steps;
  options.max_local_batch = max_local_batch;
  return options;
}

void SearchRequest::validate() const {
  workload.validate();
  detail::require_enum("objective", static_cast<int>(objective), 0, 1);
  if (global_batch < 1) detail::fail("global_batch", ">= 1", global_batch);
  // At least one: a run of 1e-322 iterations underflowed every plan's totals to 0, and a
  // branch-and-bound whose bounds are all 0 prunes nothing (it ran for hours).
  if (!(iterations >= 1 && std::isfinite(iterations))) detail::fail("iterations", "finite and >= 1", iterations);
  if (!(deadline_s > 0)) detail::fail("deadline_s", "> 0", deadline_s);
  if (!(budget_usd > 0)) detail::fail("budget_usd", "> 0", budget_usd);
  if (!(max_usd_per_hour > 0)) detail::fail("max_usd_per_hour", "> 0", max_usd_per_hour);
  if (max_types < 1 || max_types > kMaxGroups) {
    detail::fail("max_types", "in [1, " + std::to_string(kMaxGroups) + "]", max_types);
  }
  if (max_instances < 1) detail::fail("max_instances", ">= 1", max_instances);
  if (top_k < 1 || top_k > kMaxTopK) detail::fail("top_k", "in [1, " + std::to_string(kMaxTopK) + "]", top_k);
  if (threads < 0) detail::fail("threads", ">= 0", threads);
  if (!(usable_memory_fraction > 0 && usable_memory_fraction <= 1)) {
    detail::fail("usable_memory_fraction", "in (0, 1]", usable_memory_fraction);
  }
  if (max_accumulation_steps < 1) detail::fail("max_accumulation_steps", ">= 1", max_accumulation_steps);
  if (max_local_batch < 0) detail::fail("max_local_batch", ">= 0 (0: no cap)", max_local_batch);
  if (!(min_gpu_memory_bytes >= 0) || std::isnan(min_gpu_memory_bytes)) {
    detail::fail("min_gpu_memory_bytes", ">= 0", min_gpu_memory_bytes);
  }
  if (!(deadline_confidence == 0 || (deadline_confidence >= 0.5 && deadline_confidence < 1))) {
    detail::fail("deadline_confidence", "0 or in [0.5, 1)", deadline_confidence);
  }
  scaling_band.validate();
  if (!(time_limit_s > 0)) detail::fail("time_limit_s", "> 0", time_limit_s);
  spot.validate();
  for (std::size_t i = 0; i < instances.size(); ++i) instances[i].validate();
  for (std::size_t i = 0; i < offers.size(); ++i) {
    const Offer& o = offers[i];
    // The field's name is built only to report it (a search call checks every offer, twice).
    auto f = [i](const char* name) { return "offers[" + std::to_string(i) + "]." + name; };
    if (o.instance < 0 || o.instance >= static_cast<int>(instances.size())) {
      throw std::out_of_range(f("instance must index instances (size ") +
                              std::to_string(instances.size()) + "), got " + std::to_string(o.instance));
    }
    const int market = static_cast<int>(o.market);
    if (market < 0 || market > 1) detail::require_enum(f("market").c_str(), market, 0, 1);
    if (!std::isfinite(o.usd_per_hour) || o.usd_per_hour <= 0) {
      detail::require_positive(f("usd_per_hour"), o.usd_per_hour);
    }
    if (o.max_count < 0) detail::fail(f("max_count"), ">= 0", o.max_count);
    if (!std::isfinite(o.interruptions_per_hour) || o.interruptions_per_hour < 0) {
      detail::require_finite_nonneg(f("interruptions_per_hour"), o.interruptions_per_hour);
    }
    o.compute.validate();
    o.band.validate(f("band").c_str());
    if (deadline_confidence > 0 && !(o.band.compute.known() && o.band.compute_several.known())) {
      // the deadline test at a confidence needs the spread it is taken over
      detail::fail(f("band.compute") + (o.band.compute.known() ? "_several" : ""),
                   "known when deadline_confidence > 0 (a compute model with no band cannot meet a deadline at a "
                   "stated probability; leave deadline_confidence at 0)",
                   o.band.compute.known() ? o.band.compute_several.p10 : o.band.compute.p10);
    }
  }
  if (static_cast<int>(held.size()) > max_types) {
    detail::fail("held (count)", "<= max_types (" + std::to_string(max_types) + ")",
                 static_cast<double>(held.size()));
  }
  long long held_workers = 0;  // every plan holds these ranks: simulate()'s limit on them
  for (std::size_t i = 0; i < held.size(); ++i) {
    const std::string f = "held[" + std::to_string(i) + "].";
    const PlanGroup& h = held[i];
    if (h.offer < 0 || h.offer >= static_cast<int>(offers.size())) {
      throw std::out_of_range(f + "offer must index offers (size " + std::to_string(offers.size()) +
                              "), got " + std::to_string(h.offer));
    }
    if (h.count < 1) detail::fail(f + "count", ">= 1", h.count);
    held_workers += static_cast<long long>(h.count) * instances[offers[h.offer].instance].gpus;
    if (held_workers > std::numeric_limits<int>::max()) {
      detail::fail(f + "count (workers: instances x GPUs over the held groups)", "<= 2147483647",
                   static_cast<double>(held_workers));
    }
    if (offers[h.offer].region != offers[held[0].offer].region) {
      detail::fail(f + "offer's region", "the region of held[0] (" +
                                             std::to_string(offers[held[0].offer].region) + ")",
                   offers[h.offer].region);
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (held[j].offer == h.offer) detail::fail(f + "offer", "distinct from held[" + std::to_string(j) + "]", h.offer);
    }
  }
}

double plan_interruptions_per_hour(const SearchRequest& request, const std::vector<PlanGroup>& groups) {
  double rate = 0;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const PlanGroup& g = groups[i];
    if (g.offer < 0 || g.offer >= static_cast<int>(request.offers.size())) {
      throw std::out_of_range("groups[" + std::to_string(i) + "].offer must index request.offers (size " +
                              std::to_string(request.offers.size()) + "), got " + std::to_string(g.offer));
    }
    rate += g.count * request.offers[static_cast<std::size_t>(g.offer)].interruptions_per_hour;
  }
  return rate;
}

SearchStats& SearchStats::operator+=(const SearchStats& other) {
  evaluated += other.evaluated;
  feasible += other.feasible;
  infeasible_memory += other.infeasible_memory;
  infeasible_batch += other.infeasible_batch;
  violated_deadline += other.violated_deadline;
  violated_budget += other.violated_budget;
  pruned += other.pruned;
  nodes += other.nodes;
  return *this;
}

void plan_totals(const SearchRequest& request, Plan& plan) {
  // A caller's plan: name a group that indexes no offer (std::vector::at said only "_M_range_check").
  if (plan.groups.size() > static_cast<std::size_t>(kMaxGroups)) {
    detail::fail("plan.groups (count)", "<= " + std::to_string(kMaxGroups), static_cast<double>(plan.groups.size()));
  }
  for (std::size_t k = 0; k < plan.groups.size(); ++k) {
    const PlanGroup& g = plan.groups[k];
    if (g.offer < 0 || g.offer >= static_cast<int>(request.offers.size())) {
      throw std::out_of_range("plan.groups[" + std::to_string(k) + "].offer must index request.offers (size " +
                              std::to_string(request.offers.size()) + "), got " + std::to_string(g.offer));
    }
    // plan_band below reads the offer's instance: an unvalidated request's index read past
    // request.instances (as SearchRequest::validate says it).
    const int instance = request.offers[static_cast<std::size_t>(g.offer)].instance;
    if (instance < 0 || instance >= static_cast<int>(request.instances.size())) {
      throw std::out_of_range("request.offers[" + std::to_string(g.offer) +
                              "].instance must index request.instances (size " +
                              std::to_string(request.instances.size()) + "), got " + std::to_string(instance));
    }
  }
  const double rate = plan_interruptions_per_hour(request, plan.groups);
  const double nominal = request.iterations * plan.iteration.iteration_s;
  if (plan.iteration.feasible() && !std::isfinite(nominal)) {
    detail::fail("iterations x iteration_s (" + detail::fmt(request.iterations) + " x " +
                     detail::fmt(plan.iteration.iteration_s) + " s)",
                 "finite (the iterations or a compute model are out of any real range)", nominal);
  }
  if (!std::isfinite(plan.iteration.usd_per_hour)) {
    detail::fail("plan.iteration.usd_per_hour", "finite (a price is out of any real range)",
                 plan.iteration.usd_per_hour);
  }
  plan.spot = estimate_spot(nominal, rate, request.spot, request.deadline_s);
  plan.total_s = plan.spot.expected_s;
  plan.total_usd = plan.iteration.usd_per_hour * plan.total_s / 3600.0;
  if (std::isfinite(plan.total_s) && !std::isfinite(plan.total_usd)) {
    detail::fail("total_usd (usd_per_hour x total_s, $" + detail::fmt(plan.iteration.usd_per_hour) + "/h x " +
                     detail::fmt(plan.total_s) + " s)",
                 "finite (a price or compute model is out of any real range)", plan.total_usd);
  }
  plan.band = IterationBand{};
  plan.deadline_probability = 1;
  if (!plan.iteration.feasible()) return;
  const int n = static_cast<int>(plan.groups.size());
  int offers[kMaxGroups], counts[kMaxGroups];
  for (int k = 0; k < n && k < kMaxGroups; ++k) {
    offers[k] = plan.groups[k].offer;
    counts[k] = plan.groups[k].count;
  }
  plan.band = detail::plan_band(request, plan.iteration, offers, counts, std::min(n, kMaxGroups));
  if (std::isfinite(request.deadline_s)) {
    // No band (a compute model with no held-out spread): the chance is unknown, not certain.
    if (!plan.band.known()) {
      plan.deadline_probability = std::numeric_limits<double>::quiet_NaN();
      return;
    }
    plan.deadline_probability = deadline_probability_unchecked(
        nominal, plan.band.factors(plan.iteration.iteration_s), rate, request.spot, request.deadline_s);
  }
}

SearchResult search_exhaustive(const SearchRequest& request, const CancelToken* cancel) {
  request.validate();
  const auto started = std::chrono::steady_clock::now();
  const int n_offers = static_cast<int>(request.offers.size());
  const int threads = detail::worker_threads(request.threads, static_cast<std::size_t>(n_offers));

  std::vector<ThreadState> states(threads);
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto work = [&](int t) {
    try {
      Enumerator e(request, states[t], cancel);
      // Interleaved outer offers balance the threads: early offers pair with more others.
      for (int i = t; i < n_offers; i += threads) e.from(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
  };
  detail::run_on_threads(threads, work);  // note "threads" in search_internal.hpp
  if (first_error) std::rethrow_exception(first_error);

  // Merge the threads' findings.
  std::vector<Candidate> top, pool;
  detail::Nearest nearest;
  SearchResult result;
  for (ThreadState& s : states) {
    for (const Candidate& c : s.top) detail::offer_top_k(top, c, request.top_k, request.objective);
    nearest.merge(s.nearest);
    pool.insert(pool.end(), s.pareto_pool.begin(), s.pareto_pool.end());
    result.stats += s.stats;
  }
  detail::add_plans(request, top, std::move(pool), result);
  result.stats.cancelled = cancel != nullptr && cancel->is_cancelled();
  result.optimal = !result.stats.cancelled;
  result.gap = result.optimal ? 0.0 : kInf;

  if (result.plans.empty()) {
    detail::NoPlan info;
    Candidate closest, unlimited;
    info.binds = nearest.decide(request, closest, unlimited);
    if (!unlimited.empty()) info.fastest_s = detail::materialise(request, unlimited).total_s;
    info.infeasible_memory = result.stats.infeasible_memory;
    info.infeasible_batch = result.stats.infeasible_batch;
    if (!closest.empty()) result.closest = detail::materialise(request, closest);
    result.why_none = detail::why_none(request, info, &result.closest);
  }
  result.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace srift
