// search(): exact branch-and-bound over plans of up to max_types (offer, count) groups.
//
// Note "bounds". A node is a partial plan P (groups with fixed counts) plus the offers it may
// still add: those after a position in its region's offer list, at most K - |P| of them. Every
// plan X below the node contains P; what is bounded is what adding groups can do:
// - price, instances, workers, the optimizer step, the spot rate and the ring (a ring over
//   more ranks and links is never faster: 2(n-1)/n grows, the bottleneck bandwidth can only
//   fall and the latency only rise) never decrease when groups or instances are added;
// - compute: with real local batches in [1, max batch] (what fits memory, capped at
//   SearchRequest::max_local_batch when set), the slowest worker of X needs at least the level
//   L at which P's workers plus the best possible additions absorb the global batch. With
//   gradient accumulation (up to A micro-steps, simulator.cpp note "accumulation") a worker's
//   samples over the iteration are at most A x its max batch, and its compute over j
//   micro-steps, j c + s b, is at least c + s b: the same bound holds with max batch read as
//   A x max batch, and a bucket is still ready no earlier than f_k L.
// - memory: X holds at most P's workers x their max batch plus, for the additions, the fewer
//   of (workers they may add) x the largest max batch and (groups left) x the most samples one
//   group holds; below the global batch the whole subtree is infeasible and is cut (a
//   group's counts too small for any extension to hold the batch are skipped, not visited).
//   A worker of offer o takes at most min((L - c_o)/s_o, m_o) samples at level L; an
//   added worker takes at most (L - c_r)/s_r (component-wise minima over the offers it may
//   come from) and, per USD/hour of its price, at most (L - c_r)/e_r with e = price per GPU x
//   s. The additions are limited by the remaining workers (global batch, instances, groups)
//   and, for the objective, by the price the constraints and the incumbent leave;
// - iteration time: T >= broadcast + max(L, ready_k + Σ_{j>=k} allreduce_j) + optimizer, where
//   bucket k is ready no earlier than f_k L (and than P's forward plus f_0 backward at batch 1)
//   and the buffer broadcast (simulator.hpp note "buffer broadcast") runs on P's ring;
// - cost: USD = price x T = Σ_w price_w T >= Σ_w price_w (c_w + s_w b_w + opt) >=
//   Σ_{w in P} price_w (c_w + opt + s_w) + (B - W_P) min e (the "efficiency" bound, monotone
//   in every count); >= price_P x T_lb; and with a deadline D (iteration time T <= D), the
//   samples P cannot absorb by D cost at least e_r D / (D - opt - c_r) each.
// Spot preemption only inflates time (monotonically in the nominal time and in the rate), so
// every bound on the nominal time also bounds the expected one, and the expected time of the
// rate P already has is applied to the time bounds.
// A deadline met with confidence q >= 0.5 under the plans' bands (band.hpp note "deadline
// probability") needs the run's q-quantile without preemption to fit: W F_q <= D, with
// F_q = f90^(z_q / z90) for the plan's iteration p90 factor f90. Every plan below a node
// has f90 >= the widest learned-link p90 of the node's groups, and, once the node holds two
// instances one of which was not measured whole (or one multi-GPU instance on modelled or
// probed links), >= the least scaling-band p90 its plans can take (buckets only grow with
// more groups; one group whose links were not probed keeps them all on the modelled scope). So the deadline bounds use D / floor^(z_q / z90) (deadline_factor). This
// holds only where every offer's compute band is known: an unknown band has no spread.
// A subtree is cut when its bound cannot beat the k-th best plan found so far or cannot meet
// a constraint, and - when a Pareto front is collected - is weakly dominated by a found plan.
// Bounds are compared after shrinking them by kSlack so rounding never cuts an optimum.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>

#include "search_internal.hpp"
#include "srift/band.hpp"
#include "srift/search.hpp"

namespace srift {
namespace {

using detail::Candidate;
using detail::kInf;
using Clock = std::chrono::steady_clock;

constexpr double kSlack = 1e-9;

// What the bounds need of one offer.
struct OfferInfo {
  int offer = 0;      // index into request.offers
  int gpus = 1;
  int cap = 0;        // most instances in a plan: quota, max_instances, global batch
  int m = 0;          // largest local batch in memory
  double price = 0;   // USD/hour, one instance
  double pi = 0;      // USD/hour per GPU
  double c = 0;       // forward + backward fixed, s
  double s = 0;       // forward + backward per sample, s
  double e = 0;       // pi * s
  double opt = 0;     // optimizer, s
  double ready0 = 0;  // forward + f_0 backward at batch 1, s
  double rate = 0;    // interruptions per instance-hour
  bool multi = false; // gpus > 1
  double link90 = 1;  // its learned link band's p90 factor (1: none)
  bool whole = false; // measured whole (band.measured_whole)
  bool intra_probed = false;
  bool own_link = false;  // a link band of its own (band.link not (1, 1))
  bool probed = false;    // the links a multi-instance plan needs probed (network; intra if multi-GPU)
  double intra_bw = kInf, intra_lat = 0, net_bw = kInf, net_lat = 0;
};

// Component-wise best of a set of offers a node may still add.
struct RestStats {
  bool any = false;
  double c = kInf, s = kInf, e = kInf;
  int g = 0;      // most GPUs per instance
  int wcap = 0;   // most workers one group can bring
  double m = 0;   // most samples one worker holds in an iteration (memory, the cap, micro-steps)
  double scap = 0;  // most samples one group holds in an iteration
  void add(const OfferInfo& o) {
    any = true;
    c = std::min(c, o.c);
    s = std::min(s, o.s);
    e = std::min(e, o.e);
    g = std::max(g, o.gpus);
    wcap = std::max(wcap, o.cap * o.gpus);
    m = std::max(m, static_cast<double>(o.m));
    scap = std::max(scap, static_cast<double>(o.cap) * o.gpus * o.m);
  }
};

struct Region {
  int id = 0;
  std::vector<OfferInfo> held;
  std::vector<int> held_min;
  std::vector<OfferInfo> opt;      // optional offers, ascending offer index
  std::vector<RestStats> suffix;   // suffix[i]: opt[i..]; suffix[n] empty
  RestStats all;                   // held and optional
};

// A partial plan and its monotone aggregates.
struct State {
  int n = 0;
  const OfferInfo* info[kMaxGroups];
  int count[kMaxGroups];
  // Ranks and instances in 64 bits: held groups at their minimum counts, pushed on top of a
  // count up to the batch, summed past INT_MAX (signed overflow, though the check after it
  // caught the wrapped value).
  long long W = 0, N = 0;
  double price = 0, sum_pic = 0, sum_e = 0, opt = 0, e_min = kInf, L0 = 0, ready0 = 0, rate = 0;
  double intra_bw = kInf, intra_lat = 0, net_bw = kInf, net_lat = 0;
  double intra_hops_lat = 0;  // Σ instances x (GPUs - 1) x intra latency: a broadcast chain's hops inside instances

  void push(const OfferInfo& o, int a) {
    info[n] = &o;
    count[n] = a;
    ++n;
    W += static_cast<long long>(a) * o.gpus;
    N += a;
    price += a * o.price;
    sum_pic += a * o.price * o.c;
    sum_e += static_cast<double>(a) * o.gpus * o.e;
    opt = std::max(opt, o.opt);
    e_min = std::min(e_min, o.e);
    L0 = std::max(L0, o.c + o.s);
    ready0 = std::max(ready0, o.ready0);
    rate += a * o.rate;
    if (o.multi) {
      intra_bw = std::min(intra_bw, o.intra_bw);
      intra_lat = std::max(intra_lat, o.intra_lat);
      intra_hops_lat += a * (o.gpus - 1.0) * o.intra_lat;
    }
    net_bw = std::min(net_bw, o.net_bw);
    net_lat = std::max(net_lat, o.net_lat);
  }
};

struct Bound {
  bool infeasible = false;  // no plan below the node fits memory / the batch
  double time_plain = 0;    // total seconds, no constraint assumed
  double usd_plain = 0;     // total USD, no constraint assumed
  double time_obj = 0;      // total seconds for plans that can matter to the objective
  double nominal_obj = 0;   // ... without preemption (for a deadline met with a confidence)
  double usd_obj = 0;
  double deadline_factor = 1;  // deadline_factor() of the node
};

// Read-only context shared by the threads.
struct Context {
  const SearchRequest& r;
  std::vector<Region> regions;
  double B = 0;
  double iters = 0;
  double per_it_usd = 0;  // iterations / 3600: USD per (USD/hour x seconds of one iteration)
  // Buckets with bytes > 0: ready fraction, suffix bytes, suffix count.
  std::vector<double> f, tail_bytes, tail_count;
  bool has_buckets = false;
  // DDP's buffer broadcast (simulator.hpp note "buffer broadcast"): total bytes, messages.
  double broadcast_bytes = 0, broadcast_count = 0;
  // Deadline confidence over the bands (note "bounds"): z_q / z90 (0: no band bound), the
  // least multi-instance p90 factor from each bucket up, and each single-instance cell's.
  double band_exponent = 0;
  double multi_p90_from[kScalingBuckets] = {1, 1, 1, 1};         // modelled links
  double any_multi_p90_from[kScalingBuckets] = {1, 1, 1, 1};     // modelled or probed
  double single_p90[2][kScalingBuckets] = {{1, 1, 1, 1}, {1, 1, 1, 1}};
  explicit Context(const SearchRequest& req) : r(req) {}
};

struct Shared {
  std::atomic<double> threshold{kInf};  // best k-th objective value of any thread
  std::atomic<bool> stop{false};
  std::atomic<int> next_task{0};
  std::mutex error_mutex;
  std::exception_ptr error;
};

void atomic_min(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

struct Task {
  int region = 0;
  int pos = 0;
  double bound = 0;  // objective bound of every plan of the task
};

class Searcher {
 public:
  Searcher(const Context& ctx, Shared& shared, const CancelToken* cancel, Clock::time_point stop_at)
      : x_(ctx), r_(ctx.r), sh_(shared), cancel_(cancel), stop_at_(stop_at), options_(r_.sim_options()) {
    K_ = r_.max_types;
    min_cost_ = r_.objective == Objective::min_cost;
    pareto_ = r_.collect_pareto;
  }

  std::vector<Candidate> top;
  std::vector<Candidate> front;  // local Pareto front: increasing time, decreasing USD
  SearchStats stats;

  // ---- bounds ---------------------------------------------------------------------------

  // Smallest level L >= L0 at which P's workers plus k_add (L - c_r)^+ absorb the batch.
  double level(const State& P, double k_add, double c_r, double L0) const {
    auto absorbed = [&](double L) {
      double sum = 0;
      for (int g = 0; g < P.n; ++g) {
        const OfferInfo& o = *P.info[g];
        // Saturation is tested on the breakpoint itself so a cluster whose memory holds
        // exactly the batch is not lost to rounding.
        const double full = o.c + o.s * o.m;
        sum += static_cast<double>(P.count[g]) * o.gpus * (L >= full ? static_cast<double>(o.m) : (L - o.c) / o.s);
      }
      if (k_add > 0 && L > c_r) sum += k_add * (L - c_r);
      return sum;
    };
    const double B = x_.B;
    double lo = L0, f_lo = absorbed(L0);
    if (f_lo >= B) return L0;
    double bp[kMaxGroups + 1];
    int nb = 0;
    for (int g = 0; g < P.n; ++g) {
      const OfferInfo& o = *P.info[g];
      const double v = o.c + o.s * o.m;
      if (v > L0) bp[nb++] = v;
    }
    if (k_add > 0 && c_r > L0) bp[nb++] = c_r;
    std::sort(bp, bp + nb);
    for (int i = 0; i < nb; ++i) {
      const double f_hi = absorbed(bp[i]);
      if (f_hi >= B) return lo + (B - f_lo) * (bp[i] - lo) / (f_hi - f_lo);
      lo = bp[i];
      f_lo = f_hi;
    }
    if (k_add > 0) return lo + (B - f_lo) / k_add;
    return kInf;
  }

  // Lower bound of one iteration given a compute level bound L, seconds.
  double iteration_bound(const State& P, double L) const {
    double t = L, broadcast = 0;
    if (P.W >= 2 && (x_.has_buckets || x_.broadcast_count > 0)) {
      double bw = P.intra_bw, lat = P.intra_lat;
      if (P.N > 1) {
        bw = std::min(bw, P.net_bw);
        lat = std::max(lat, P.net_lat);
      }
      const double w = P.W;
      // the buffers go first and every time after them waits: it adds to the whole bound;
      // a chain's hops only grow with more instances, and its slowest NIC only slows
      const double chain = P.intra_hops_lat + (P.N > 1 ? (P.N - 1.0) * P.net_lat : 0.0);
      broadcast = x_.broadcast_bytes / bw + x_.broadcast_count * chain;
      if (!x_.has_buckets) return t + broadcast + P.opt;
      const double alpha = 2.0 * (w - 1.0) / w / bw, beta = 2.0 * (w - 1.0) * lat;
      t = std::max(t, std::max(P.ready0, x_.f[0] * L) + alpha * x_.tail_bytes[0] + beta * x_.tail_count[0]);
      for (std::size_t k = 1; k < x_.f.size(); ++k) {
        t = std::max(t, x_.f[k] * L + alpha * x_.tail_bytes[k] + beta * x_.tail_count[k]);
      }
    }
    return t + broadcast + P.opt;
  }

  // What a deadline met with the request's confidence asks of a node's nominal time: every
  // plan below it must have nominal x factor <= deadline (note "bounds"); 1 without a band.
  double deadline_factor(const State& P) const {
    if (!(x_.band_exponent > 0) || P.n == 0) return 1.0;
    double floor = 1.0;
    long long instances = 0;  // counts summed in 64 bits (held groups may pass INT_MAX together)
    int gpus = 0;
    bool not_whole = false, all_probed = true;
    for (int g = 0; g < P.n; ++g) {
      const OfferInfo& o = *P.info[g];
      instances += P.count[g];
      gpus = std::max(gpus, o.gpus);
      not_whole = not_whole || !o.whole;
      all_probed = all_probed && o.probed;
      floor = std::max(floor, o.link90);
    }
    const int b = scaling_bucket(gpus);
    // one unprobed group keeps every plan below on the modelled scope
    const double multi = all_probed ? x_.any_multi_p90_from[b] : x_.multi_p90_from[b];
    if (instances >= 2 && not_whole) {
      floor = std::max(floor, multi);
    } else if (instances == 1 && gpus >= 2) {
      const OfferInfo& o = *P.info[0];
      if (!o.whole && !o.own_link) floor = std::max(floor, std::min(x_.single_p90[o.intra_probed][b], multi));
    }
    return std::pow(floor, x_.band_exponent);
  }

  double total_time(const State& P, double iteration_s) const {
    return detail::expected_total_s(x_.iters * iteration_s, P.rate, r_.spot);
  }

  // Bound of every plan P ∪ A with A drawn from `rest`, at most `groups_left` groups (A may be
  // empty). `objective` also computes the constrained bounds.
  Bound bound(const State& P, const RestStats& rest, int groups_left) const {
    Bound b;
    const double B = x_.B;
    double Wadd = 0;
    if (groups_left > 0 && rest.any) {
      Wadd = std::min({B - P.W, static_cast<double>(r_.max_instances - P.N) * rest.g,
                       static_cast<double>(groups_left) * rest.wcap});
    }
    const bool adds = Wadd > 0;
    // Memory: no plan below holds more samples than P's workers at their caps plus the
    // additions at theirs; a subtree that cannot hold the batch is cut whole (without it a
    // batch no plan holds walks the entire space).
    double hold = adds ? std::min(Wadd * rest.m, groups_left * rest.scap) : 0.0;
    for (int g = 0; g < P.n; ++g) hold += static_cast<double>(P.count[g]) * P.info[g]->gpus * P.info[g]->m;
    if (hold < B) {
      b.infeasible = true;
      return b;
    }
    double L0 = P.L0;
    if (P.n == 0) {
      if (!adds) {
        b.infeasible = true;
        return b;
      }
      L0 = rest.c + rest.s;
    }
    const double k_plain = adds ? Wadd / rest.s : 0.0;
    const double L = level(P, k_plain, rest.c, L0);
    if (!std::isfinite(L)) {
      b.infeasible = true;
      return b;
    }
    const double T = iteration_bound(P, L);
    b.time_plain = total_time(P, T);
    b.nominal_obj = x_.iters * T;
    const double e_all = adds ? std::min(P.e_min, rest.e) : P.e_min;
    const double efficiency = x_.per_it_usd * (P.sum_pic + P.opt * P.price + P.sum_e + (B - P.W) * e_all);
    b.usd_plain = std::max(P.price * b.time_plain / 3600.0, efficiency);
    b.time_obj = b.time_plain;
    b.usd_obj = b.usd_plain;

    // Constrained: the additions' price is limited by the hourly cap, the budget and (for
    // min_cost) the incumbent; that lifts the level.
    double usd_cap = r_.budget_usd;
    if (min_cost_) usd_cap = std::min(usd_cap, threshold());
    double Tit = T;
    if (adds) {
      for (int round = 0; round < 2; ++round) {
        double p_add = r_.max_usd_per_hour - P.price;
        if (std::isfinite(usd_cap)) p_add = std::min(p_add, usd_cap / (x_.per_it_usd * Tit) - P.price);
        if (!std::isfinite(p_add)) break;
        if (p_add <= 0) {
          p_add = 0;
        }
        const double k = std::min(k_plain, p_add / rest.e);
        const double L2 = level(P, k, rest.c, L0);
        if (!std::isfinite(L2)) {
          b.time_obj = b.nominal_obj = b.usd_obj = kInf;
          return b;
        }
        Tit = std::max(Tit, iteration_bound(P, L2));
      }
      b.time_obj = total_time(P, Tit);
      b.nominal_obj = x_.iters * Tit;
      b.usd_obj = std::max({b.usd_obj, P.price * b.time_obj / 3600.0});
    }
    // Deadline: what P cannot absorb by the deadline is done by additions at >= e_r per
    // sample, inflated by their fixed cost and the optimizer.
    if (std::isfinite(r_.deadline_s)) {
      b.deadline_factor = deadline_factor(P);
      const double D = r_.deadline_s / x_.iters / b.deadline_factor;  // iteration time bound, seconds
      const double Lmax = D - P.opt;
      double absorbed = 0;
      for (int g = 0; g < P.n; ++g) {
        const OfferInfo& o = *P.info[g];
        const double full = o.c + o.s * o.m;
        absorbed += static_cast<double>(P.count[g]) * o.gpus * (Lmax >= full ? static_cast<double>(o.m) : (Lmax - o.c) / o.s);
      }
      const double need = B - absorbed;
      if (need > kSlack * B) {  // rounding must not turn "exactly meets" into "misses"
        if (!adds || Lmax <= rest.c) {
          b.time_obj = b.nominal_obj = kInf;  // cannot meet the deadline
        } else {
          const double usd = x_.per_it_usd * (P.price * Tit + need * rest.e * D / (Lmax - rest.c));
          b.usd_obj = std::max(b.usd_obj, usd);
        }
      }
    }
    return b;
  }

  double threshold() const {
    double local = static_cast<int>(top.size()) == r_.top_k ? detail::objective_value(top.back(), r_.objective) : kInf;
    return std::min(local, sh_.threshold.load(std::memory_order_relaxed));
  }

  static bool above(double lower_bound, double limit) { return lower_bound * (1.0 - kSlack) > limit; }

  // True when no plan the bound covers can enter the top-k while meeting the constraints.
  bool objective_cut(const Bound& b, double price) const {
    if (b.infeasible) return true;
    if (above(price, r_.max_usd_per_hour)) return true;
    if (above(b.usd_obj, r_.budget_usd)) return true;
    // With a confidence the deadline binds a quantile, which may lie below the expectation
    // but never below the nominal time, nor below the band's floor on it.
    const double time_for_deadline = r_.deadline_confidence > 0 ? b.nominal_obj * b.deadline_factor : b.time_obj;
    if (above(time_for_deadline, r_.deadline_s)) return true;
    const double thr = threshold();
    return min_cost_ ? above(b.usd_obj, thr) : above(b.time_obj, thr);
  }

  bool dominated(double time_s, double usd) const {
    // Last point with time <= time_s has the least USD among those.
    auto it = std::upper_bound(front.begin(), front.end(), time_s * (1.0 - kSlack),
                               [](double t, const Candidate& c) { return t < c.total_s; });
    if (it == front.begin()) return false;
    --it;
    return it->total_usd <= usd * (1.0 - kSlack);
  }

  bool cut(const Bound& b, double price) const {
    if (b.infeasible) return true;
    if (!objective_cut(b, price)) return false;
    return !pareto_ || dominated(b.time_plain, b.usd_plain);
  }

  // Monotone part of a node's bound: valid for the node, every larger count of its last
  // group and every extension. `rest_e` is the best efficiency the extensions may add.
  bool monotone_cut(const State& P, double rest_e) const {
    const double L = P.L0;
    const double iteration_s = iteration_bound(P, L);
    const double time_s = total_time(P, iteration_s);
    const double deadline_time =
        r_.deadline_confidence > 0 ? x_.iters * iteration_s * deadline_factor(P) : time_s;
    const double usd = x_.per_it_usd * (P.sum_pic + P.opt * P.price + P.sum_e +
                                        (x_.B - P.W) * std::min(P.e_min, rest_e));
    bool obj = above(P.price, r_.max_usd_per_hour) || above(usd, r_.budget_usd) ||
               above(deadline_time, r_.deadline_s);
    if (!obj) {
      const double thr = threshold();
      obj = min_cost_ ? above(usd, thr) : above(time_s, thr);
    }
    if (!obj) return false;
    return !pareto_ || dominated(time_s, usd);
  }

  // ---- evaluation -----------------------------------------------------------------------

  void evaluate(const State& P) {
    Candidate c;
    c.n = P.n;
    int order[kMaxGroups];
    for (int g = 0; g < P.n; ++g) order[g] = g;
    std::sort(order, order + P.n, [&](int a, int b) { return P.info[a]->offer < P.info[b]->offer; });
    GroupSpec groups[kMaxGroups];
    double rate = 0;
    for (int k = 0; k < P.n; ++k) {
      const OfferInfo& o = *P.info[order[k]];
      c.offer[k] = o.offer;
      c.count[k] = P.count[order[k]];
      const Offer& offer = r_.offers[o.offer];
      groups[k] = {&r_.instances[offer.instance], c.count[k], offer.compute, offer.usd_per_hour};
      rate += c.count[k] * offer.interruptions_per_hour;
    }
    simulate_unchecked(r_.workload, groups, c.n, options_, result_);
    ++stats.evaluated;
    if (!result_.feasible()) {
      if (result_.infeasible == Infeasible::memory) ++stats.infeasible_memory;
      else ++stats.infeasible_batch;
      return;
    }
    ++stats.feasible;
    detail::set_totals(r_, result_, rate, c);
    if (pareto_) add_to_front(c);
    if (!detail::satisfies(r_, c, result_, rate, stats)) return;
    detail::offer_top_k(top, c, r_.top_k, r_.objective);
    if (static_cast<int>(top.size()) == r_.top_k) {
      atomic_min(sh_.threshold, detail::objective_value(top.back(), r_.objective));
    }
  }

  void add_to_front(const Candidate& c) {
    auto it = std::upper_bound(front.begin(), front.end(), c.total_s,
                               [](double t, const Candidate& x) { return t < x.total_s; });
    if (it != front.begin() && std::prev(it)->total_usd <= c.total_usd) return;  // weakly dominated
    // Remove the points c dominates: time >= c's and USD >= c's (they follow `it`, or sit
    // just before it with equal time).
    auto first = it;
    while (first != front.begin() && std::prev(first)->total_s == c.total_s) --first;
    auto last = first;
    while (last != front.end() && last->total_usd >= c.total_usd) ++last;
    it = front.erase(first, last);
    front.insert(it, c);
  }

  // ---- tree -----------------------------------------------------------------------------

  bool stopped() {
    if ((++stats.nodes & 1023u) == 0) {
      if ((cancel_ != nullptr && cancel_->is_cancelled()) || Clock::now() >= stop_at_) {
        sh_.stop.store(true, std::memory_order_relaxed);
      }
    }
    return sh_.stop.load(std::memory_order_relaxed);
  }

  // Evaluates P unless a bound shows it cannot matter.
  void consider(const State& P) {
    const Bound b = bound(P, RestStats{}, 0);
    if (cut(b, P.price)) return;
    evaluate(P);
  }

  // Plans P ∪ A, A a non-empty set of optional offers at positions >= pos0.
  void extend(const Region& reg, const State& P, int pos0) {
    const int n = static_cast<int>(reg.opt.size());
    const int groups_left = K_ - P.n;
    if (groups_left <= 0) return;
    for (int pos = pos0; pos < n; ++pos) {
      if (cut(bound(P, reg.suffix[pos], groups_left), P.price)) return;  // covers later positions
      count_loop(reg, P, pos, true);
      if (sh_.stop.load(std::memory_order_relaxed)) return;
    }
  }

  // The least count of `o` added to P below which no plan holds the global batch: P's
  // workers, `a` instances of o and `groups_left` more groups of `rest` at their largest.
  // Those counts are skipped, not iterated (a large batch left thousands of them per node).
  long long first_count(const State& P, const OfferInfo& o, const RestStats& rest, int groups_left) const {
    double hold = groups_left > 0 && rest.any ? groups_left * rest.scap : 0.0;
    for (int g = 0; g < P.n; ++g) hold += static_cast<double>(P.count[g]) * P.info[g]->gpus * P.info[g]->m;
    const double need = x_.B - hold;
    if (!(need > 0)) return 1;
    const double a = std::ceil(need / (static_cast<double>(o.gpus) * o.m));
    return a > static_cast<double>(o.cap) ? o.cap + 1LL : std::max(1LL, static_cast<long long>(a));
  }

  // Adds opt[pos] with every count; evaluates the plans when `evaluate_here`, recurses.
  void count_loop(const Region& reg, const State& P, int pos, bool evaluate_here) {
    const OfferInfo& o = reg.opt[pos];
    const RestStats& after = reg.suffix[pos + 1];
    const long long hi =
        std::min({static_cast<long long>(o.cap), r_.max_instances - P.N, (r_.global_batch - P.W) / o.gpus});
    const bool deeper = P.n + 1 < K_ && after.any;
    for (long long a = first_count(P, o, after, deeper ? K_ - P.n - 1 : 0); a <= hi; ++a) {
      if (stopped()) return;
      State Q = P;
      Q.push(o, static_cast<int>(a));  // a <= cap, an int
      if (monotone_cut(Q, deeper ? after.e : kInf)) break;
      if (deeper) {
        const Bound b = bound(Q, after, K_ - Q.n);
        if (cut(b, Q.price)) continue;
      }
      if (evaluate_here) consider(Q);
      if (deeper) extend(reg, Q, pos + 1);
    }
  }

  // Held groups first (each count from its minimum up), then the optional offers.
  void held_loop(const Region& reg, const State& P, int h) {
    const int H = static_cast<int>(reg.held.size());
    if (h == H) {
      consider(P);
      extend(reg, P, 0);
      return;
    }
    const OfferInfo& o = reg.held[h];
    const long long hi =
        std::min({static_cast<long long>(o.cap), r_.max_instances - P.N, (r_.global_batch - P.W) / o.gpus});
    for (long long a = reg.held_min[h]; a <= hi; ++a) {
      if (stopped()) return;
      State Q = P;
      Q.push(o, static_cast<int>(a));  // a <= cap, an int
      State M = Q;  // with the held groups still to come at their minimum: in every plan below
      bool fits = true;
      for (int j = h + 1; j < H; ++j) {
        M.push(reg.held[j], reg.held_min[j]);
        fits = fits && M.W <= r_.global_batch && M.N <= r_.max_instances;
      }
      if (!fits || monotone_cut(M, reg.all.e)) break;
      held_loop(reg, Q, h + 1);
    }
  }

  // Phase 1: the single-offer plans of one offer.
  void homogeneous(const Region& reg, int pos) {
    const OfferInfo& o = reg.opt[pos];
    const long long hi = std::min({o.cap, r_.max_instances, r_.global_batch / o.gpus});
    for (long long a = first_count(State{}, o, RestStats{}, 0); a <= hi; ++a) {  // 64 bits: hi may be INT_MAX
      if (stopped()) return;
      State Q;
      Q.push(o, static_cast<int>(a));
      if (monotone_cut(Q, kInf)) break;
      consider(Q);
    }
  }

  // Phase 2: plans of two or more groups whose first offer is opt[pos].
  void heterogeneous(const Region& reg, int pos) {
    if (K_ < 2) return;
    const OfferInfo& o = reg.opt[pos];
    const RestStats& after = reg.suffix[pos + 1];
    if (!after.any) return;
    const long long hi = std::min({o.cap, r_.max_instances, r_.global_batch / o.gpus});
    for (long long a = first_count(State{}, o, after, K_ - 1); a <= hi; ++a) {
      if (stopped()) return;
      State Q;
      Q.push(o, static_cast<int>(a));
      if (monotone_cut(Q, after.e)) break;
      if (cut(bound(Q, after, K_ - 1), Q.price)) continue;
      extend(reg, Q, pos + 1);
    }
  }

 private:
  const Context& x_;
  const SearchRequest& r_;
  Shared& sh_;
  const CancelToken* cancel_;
  Clock::time_point stop_at_;
  SimOptions options_;
  IterationResult result_;
  int K_ = 1;
  bool min_cost_ = true;
  bool pareto_ = false;
};

OfferInfo make_info(const SearchRequest& r, int i, const Context& x) {
  const Offer& of = r.offers[i];
  const InstanceSpec& inst = r.instances[of.instance];
  OfferInfo o;
  o.offer = i;
  o.gpus = inst.gpus;
  o.cap = std::min({of.max_count, r.max_instances, r.global_batch / inst.gpus});
  o.m = max_local_batch(r.workload, inst, r.sim_options());
  if (o.m >= 1 && r.max_accumulation_steps > 1) {  // note "bounds": samples over every micro-step
    o.m = static_cast<int>(std::min<long long>(r.global_batch, static_cast<long long>(o.m) * r.max_accumulation_steps));
  }
  o.price = of.usd_per_hour;
  o.pi = of.usd_per_hour / inst.gpus;
  o.c = of.compute.fixed_s();
  o.s = of.compute.per_sample_s();
  o.e = o.pi * o.s;
  o.opt = of.compute.optimizer_s;
  const double f0 = x.f.empty() ? 0.0 : x.f[0];
  o.ready0 = of.compute.forward_s(1) + f0 * of.compute.backward_s(1);
  o.rate = of.interruptions_per_hour;
  o.multi = inst.gpus > 1;
  if (o.multi) {
    o.intra_bw = inst.intra.bandwidth;
    o.intra_lat = inst.intra.latency;
  }
  o.net_bw = inst.network.bandwidth;
  o.net_lat = inst.network.latency;
  o.link90 = of.band.link.p90;
  o.whole = of.band.measured_whole;
  o.intra_probed = of.band.intra_probed;
  o.own_link = !of.band.link.trivial();
  o.probed = of.band.network_probed && (inst.gpus == 1 || of.band.intra_probed);
  return o;
}

void build(Context& x) {
  const SearchRequest& r = x.r;
  x.B = r.global_batch;
  x.iters = r.iterations;
  x.per_it_usd = r.iterations / 3600.0;
  const auto& wb = r.workload.bucket_bytes;
  for (std::size_t k = 0; k < wb.size(); ++k) {
    if (wb[k] > 0) x.f.push_back(r.workload.bucket_ready_fraction[k]);
  }
  x.tail_bytes.assign(x.f.size(), 0);
  x.tail_count.assign(x.f.size(), 0);
  double bytes = 0, count = 0;
  std::size_t j = x.f.size();
  for (std::size_t k = wb.size(); k-- > 0;) {
    if (!(wb[k] > 0)) continue;
    bytes += wb[k];
    count += 1;
    --j;
    x.tail_bytes[j] = bytes;
    x.tail_count[j] = count;
  }
  x.has_buckets = !x.f.empty();
  for (double b : r.workload.broadcast_bytes) {
    if (b > 0) {
      x.broadcast_bytes += b;
      x.broadcast_count += 1;
    }
  }

  // the band's floor on deadlines met with a confidence (note "bounds")
  bool bands_known = true;
  for (const Offer& o : r.offers) bands_known = bands_known && o.band.compute.known() && o.band.compute_several.known();
  if (r.deadline_confidence > 0 && bands_known) {
    x.band_exponent = normal_quantile(r.deadline_confidence) / normal_quantile(0.9);
    const ScalingBand& t = r.scaling_band;
    double least = kInf, least_any = kInf;
    for (int b = kScalingBuckets; b-- > 0;) {
      least = std::min(least, t.cell(ScalingScope::multi_instance, b).p90);
      least_any = std::min({least_any, least, t.cell(ScalingScope::probed_multi_instance, b).p90});
      x.multi_p90_from[b] = least;
      x.any_multi_p90_from[b] = least_any;
      x.single_p90[0][b] = t.cell(ScalingScope::single_instance, b).p90;
      x.single_p90[1][b] = t.cell(ScalingScope::probed_single_instance, b).p90;
    }
  }

  std::vector<int> region_ids;
  for (const Offer& o : r.offers) region_ids.push_back(o.region);
  std::sort(region_ids.begin(), region_ids.end());
  region_ids.erase(std::unique(region_ids.begin(), region_ids.end()), region_ids.end());
  const bool has_held = !r.held.empty();
  const int held_region = has_held ? r.offers[r.held[0].offer].region : 0;
  for (int id : region_ids) {
    if (has_held && id != held_region) continue;
    Region reg;
    reg.id = id;
    bool held_ok = true;
    for (const PlanGroup& h : r.held) {
      OfferInfo o = make_info(r, h.offer, x);
      const InstanceSpec& inst = r.instances[r.offers[h.offer].instance];
      if (o.m < 1 || o.cap < h.count || inst.gpu_memory_bytes < r.min_gpu_memory_bytes) held_ok = false;
      reg.held.push_back(o);
      reg.held_min.push_back(h.count);
    }
    if (!held_ok) continue;  // no plan can hold what is held: nothing fits
    for (int i = 0; i < static_cast<int>(r.offers.size()); ++i) {
      const Offer& of = r.offers[i];
      if (of.region != id) continue;
      bool is_held = false;
      for (const PlanGroup& h : r.held) is_held = is_held || h.offer == i;
      if (is_held) continue;
      if (r.instances[of.instance].gpu_memory_bytes < r.min_gpu_memory_bytes) continue;
      OfferInfo o = make_info(r, i, x);
      // An offer whose GPU cannot hold the model makes every plan with it infeasible.
      if (o.cap < 1 || o.m < 1) continue;
      reg.opt.push_back(o);
    }
    reg.suffix.assign(reg.opt.size() + 1, RestStats{});
    for (std::size_t i = reg.opt.size(); i-- > 0;) {
      reg.suffix[i] = reg.suffix[i + 1];
      reg.suffix[i].add(reg.opt[i]);
    }
    reg.all = reg.suffix[0];
    for (const OfferInfo& o : reg.held) reg.all.add(o);
    if (reg.opt.empty() && reg.held.empty()) continue;
    x.regions.push_back(std::move(reg));
  }
}

// Runs the branch-and-bound for one request; fills plans, pareto, stats, optimal, gap.
SearchResult run(const SearchRequest& request, const CancelToken* cancel, Clock::time_point stop_at) {
  Context x(request);
  build(x);
  Shared shared;
  const bool has_held = !request.held.empty();

  // Tasks, ordered by their bound so good incumbents come early.
  Searcher probe(x, shared, nullptr, stop_at);
  auto task_bound = [&](const RestStats& rest) {
    const Bound b = probe.bound(State{}, rest, request.max_types);
    if (b.infeasible) return kInf;
    return request.objective == Objective::min_cost ? b.usd_plain : b.time_plain;
  };
  std::vector<Task> phase1, phase2;
  for (int ri = 0; ri < static_cast<int>(x.regions.size()); ++ri) {
    const Region& reg = x.regions[ri];
    if (has_held) {
      phase2.push_back({ri, -1, task_bound(reg.all)});
      continue;
    }
    for (int pos = 0; pos < static_cast<int>(reg.opt.size()); ++pos) {
      RestStats single;
      single.add(reg.opt[pos]);
      const Bound b = probe.bound(State{}, single, 1);
      phase1.push_back({ri, pos, b.infeasible ? kInf : (request.objective == Objective::min_cost ? b.usd_plain : b.time_plain)});
      phase2.push_back({ri, pos, task_bound(reg.suffix[pos])});
    }
  }
  auto by_bound = [](const Task& a, const Task& b) {
    if (a.bound != b.bound) return a.bound < b.bound;
    if (a.region != b.region) return a.region < b.region;
    return a.pos < b.pos;
  };
  std::sort(phase1.begin(), phase1.end(), by_bound);
  std::sort(phase2.begin(), phase2.end(), by_bound);
  std::vector<char> done2(phase2.size(), 0);
  const int threads = detail::worker_threads(request.threads, std::max(phase1.size(), phase2.size()));

  std::vector<Searcher> searchers;
  searchers.reserve(threads);
  for (int t = 0; t < threads; ++t) searchers.emplace_back(x, shared, cancel, stop_at);

  auto run_phase = [&](std::vector<Task>& tasks, bool second) {
    shared.next_task.store(0);
    auto work = [&](int t) {
      Searcher& s = searchers[t];
      try {
        while (true) {
          if ((cancel != nullptr && cancel->is_cancelled()) || Clock::now() >= stop_at) shared.stop.store(true);
          if (shared.stop.load(std::memory_order_relaxed)) break;
          const int i = shared.next_task.fetch_add(1);
          if (i >= static_cast<int>(tasks.size())) break;
          const Task& task = tasks[i];
          const Region& reg = x.regions[task.region];
          if (!second) {
            s.homogeneous(reg, task.pos);
          } else if (task.pos < 0) {
            s.held_loop(reg, State{}, 0);
          } else {
            s.heterogeneous(reg, task.pos);
          }
          if (second && !shared.stop.load(std::memory_order_relaxed)) done2[i] = 1;
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(shared.error_mutex);
        if (!shared.error) shared.error = std::current_exception();
        shared.stop.store(true);
      }
    };
    detail::run_on_threads(threads, work);  // note "threads" in search_internal.hpp
    if (shared.error) std::rethrow_exception(shared.error);
  };
  run_phase(phase1, false);
  run_phase(phase2, true);

  SearchResult result;
  std::vector<Candidate> top, pool;
  for (Searcher& s : searchers) {
    for (const Candidate& c : s.top) detail::offer_top_k(top, c, request.top_k, request.objective);
    pool.insert(pool.end(), s.front.begin(), s.front.end());
    result.stats += s.stats;
  }
  detail::add_plans(request, top, std::move(pool), result);

  // The space and what of it was never simulated.
  std::vector<std::vector<int>> caps;
  double held_choices = 1;
  for (const Region& reg : x.regions) {
    std::vector<int> c;
    for (const OfferInfo& o : reg.opt) c.push_back(o.cap);
    caps.push_back(std::move(c));
    for (std::size_t h = 0; h < reg.held.size(); ++h) held_choices *= reg.held[h].cap - reg.held_min[h] + 1;
  }
  result.stats.space = detail::count_space(caps, request.max_types - static_cast<int>(request.held.size()),
                                           held_choices, has_held);
  result.stats.pruned = result.stats.space > static_cast<double>(result.stats.evaluated)
                            ? static_cast<std::uint64_t>(result.stats.space - static_cast<double>(result.stats.evaluated))
                            : 0;

  // Optimality gap: the unexplored tasks' bounds against the best plan.
  result.stats.cancelled = shared.stop.load();
  result.optimal = !result.stats.cancelled;
  result.gap = 0;
  if (!result.optimal) {
    double lower = kInf;
    for (std::size_t i = 0; i < phase2.size(); ++i) {
      if (!done2[i]) lower = std::min(lower, phase2[i].bound);
    }
    if (top.empty()) {
      result.gap = std::isfinite(lower) ? kInf : 0.0;
      result.optimal = !std::isfinite(lower);
    } else {
      const double best = detail::objective_value(top.front(), request.objective);
      result.gap = best > 0 ? std::max(0.0, (best - std::min(lower, best)) / best) : 0.0;
    }
  }
  return result;
}

}  // namespace

SearchResult search(const SearchRequest& request, const CancelToken* cancel) {
  request.validate();
  const auto started = Clock::now();
  Clock::time_point stop_at = Clock::time_point::max();
  if (std::isfinite(request.time_limit_s) && request.time_limit_s < 1e9) {
    stop_at = started + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(request.time_limit_s));
  }
  SearchResult result = run(request, cancel, stop_at);

  if (result.plans.empty()) {
    // Nothing meets the constraints: the closest plan is the best one under the other
    // objective with the constraints lifted (what search_exhaustive reports as closest).
    SearchRequest relaxed = request;
    relaxed.objective = detail::flipped(request.objective);
    relaxed.deadline_s = relaxed.budget_usd = relaxed.max_usd_per_hour = kInf;
    relaxed.deadline_confidence = 0;
    relaxed.top_k = 1;
    relaxed.collect_pareto = false;
    SearchResult near = run(relaxed, cancel, stop_at);
    const bool any_feasible = !near.plans.empty();
    if (any_feasible) {
      result.closest = near.plans.front();
      plan_totals(request, result.closest);  // its spot estimate and chances against the real deadline
    }
    // Every plan simulated counts once in evaluated and once in feasible or infeasible_*
    // (feasible was left out: 19 M evaluated, 0 feasible, in a review's slow search).
    result.stats.evaluated += near.stats.evaluated;
    result.stats.feasible += near.stats.feasible;
    // pruned is what of the space was never simulated, counting both passes (it was the main
    // pass's alone, so evaluated + pruned could exceed the space)
    result.stats.pruned = result.stats.space > static_cast<double>(result.stats.evaluated)
                              ? static_cast<std::uint64_t>(result.stats.space - static_cast<double>(result.stats.evaluated))
                              : 0;
    result.stats.nodes += near.stats.nodes;
    result.stats.infeasible_memory += near.stats.infeasible_memory;
    result.stats.infeasible_batch += near.stats.infeasible_batch;
    result.why_none = detail::why_none(request, any_feasible, result.stats.infeasible_memory,
                                       result.stats.infeasible_batch, &result.closest);
    if (near.stats.cancelled) {  // stopped before any plan: the header's gap for that is +inf
      result.stats.cancelled = true;
      result.optimal = false;
      result.gap = kInf;
    }
    if (result.stats.cancelled) {  // what was not searched may hold a plan: say so first
      result.why_none = "the search stopped (time limit or cancel) before it found a plan that fits"
                        + std::string(any_feasible ? "; so far: " + result.why_none : "; allow it more time");
    }
  }
  result.stats.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

}  // namespace srift
