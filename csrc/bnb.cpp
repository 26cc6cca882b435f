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
//   L at which P's workers plus the best possible additions absorb the global batch;
// - micro-steps (gradient accumulation, up to A of them, simulator.cpp note "accumulation"):
//   a plan X runs k = ceil(B / C1_X) micro-steps, C1_X = Σ ranks x m1 the samples one
//   micro-step holds (m1: a rank's batch in memory, capped at max_local_batch). Every rank
//   runs all k with at most m1 samples in each, so a rank taking b samples has b <= k m1 and
//   computes k c + s b + (k - 1) acc >= c + s b: accumulation never makes the GPUs of a plan
//   faster than the no-accumulation bound, it only adds k - 1 fixed parts. C1 only grows as
//   ranks join, so below a node k <= k_max = ceil(B / C1_P) (and <= A) and k >= k_min =
//   ceil(B / (C1_P + the most the additions can hold in a micro-step)). The level then reads a
//   rank of P at most min(A, k_max) m1 samples and at least c' = c + (k_min - 1)(c + acc) of
//   fixed compute (an added rank: c' of the least c and acc), and every rank at least
//   k_min (c + s) + (k_min - 1) acc; the efficiency bound below adds (k_min - 1) Σ_P
//   price (c + acc). Spans: the counts a..a' of the last group at which P + that group runs
//   the same k (exactly: C1 is linear in the count, so k is constant on an interval) are
//   bounded together with k_min = k_max = k, P + a of it and up to a' - a more of the same
//   offer as an addition; a span the bound cuts is skipped, not walked (the bounds were
//   loosest where k_min and k_max lay apart: 64 micro-steps at BERT-large's 65,536 left
//   counts 1..64 of nearly every pair to walk);
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
//   the buffer broadcast (simulator.hpp note "buffer broadcast") runs on P's ring and bucket k
//   is ready no earlier than P's forward plus f_0 backward at batch 1 nor than
//   L - (1 - f_k) min(bwd, beta L): a group's bucket k is ready at its compute end less
//   (1 - f_k) of its last micro-step's backward, some group's compute end is at least L, and
//   that backward is at most bwd (the backward at m1 samples, the largest micro-step batch;
//   the affine model only grows with the batch) and at most beta x its micro-step's compute
//   (beta = max(backward fixed / fixed, backward per sample / per sample) <= 1: an affine
//   ratio lies between its parts' ratios), itself at most the group's compute. beta = 1 gives
//   the former f_k L; with many micro-steps the allreduce overlaps only the last one, so bwd
//   exposes nearly all of it;
// - cost: USD = price x T = Σ_w price_w T >= Σ_w price_w (c_w + s_w b_w + opt) >=
//   Σ_{w in P} price_w (c_w + opt + s_w) + (B - W_P) min e (the "efficiency" bound, monotone
//   in every count); >= price_P x T_lb; and with a deadline D (iteration time T <= D), the
//   samples P cannot absorb by D cost at least e_r D / (D - opt - c_r) each. P's ranks are
//   paid for the whole iteration, an added rank taking b samples by T at least e b (b <= (T -
//   opt - c) / s), and the additions take what P's ranks cannot, so per iteration USD/h x s >=
//   g(T) = price_P T + e_r (B - absorbed_P(T - opt))^+ at the plan's own T; g is convex and
//   piecewise linear for T >= T_lb (absorbed_P is concave there), so its least over [T_lb,
//   T_max] bounds every plan below, T_max the deadline or, for the objective of the fastest
//   plans, the k-th best time found (paid_usd). The monotone part (count loops stop at the
//   first count it cuts: it holds for every larger count and extension) also takes price_P x
//   T_lb at L = P's least compute, both factors nondecreasing as instances join;
// - counts skipped: without a Pareto front the counts of a group below what, with the groups
//   after it at their best, absorbs the batch by the deadline (or by the k-th best time, for
//   the fastest plans) are skipped like those below what holds it in memory: a rank takes at
//   most (L - c) / s samples by a compute level L (and a group of o at most cap x GPUs x that,
//   dcap, which also cuts a node whose remaining groups cannot make up what P misses);
// - one group left: each later offer is bounded on its own before its counts are walked, and
//   the additions' absorption per level is the best single offer's min(ranks / s, p / e)
//   rather than the component-wise best of all of them;
// - order: for the cheapest plans the offers of a region are visited by increasing e, so the
//   best efficiency after a position is that position's own and the cost bounds tighten as
//   the position moves on; for the fastest plans, by increasing s where accumulation is
//   allowed (large batches, long count loops: 2.5 M nodes fell to 0.36 M on BERT-large at
//   65,536 in 28 regions), else in offer order (s there cost bench_recommend's budget
//   questions 3-10x). Any order visits each plan once (a plan's groups are sorted by offer
//   when it is evaluated, and better() breaks ties by offer), so the order changes nothing
//   but the time. A whole plan's bound is tried first without the
//   allreduce (compute and optimizer alone, smaller): what that cuts the full bound cuts too.
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
#include <limits>
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

// Plans of the space never simulated, space - evaluated, saturated at the counter's largest
// value: a space of several offers with large caps counts past 2^64 (a double's count there
// does not convert).
std::uint64_t never_simulated(const SearchStats& stats) {
  const double rest = stats.space - static_cast<double>(stats.evaluated);
  if (!(rest > 0)) return 0;
  constexpr double kTwoTo64 = 18446744073709551616.0;
  return rest >= kTwoTo64 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(rest);
}
// A last group with at least this many counts to walk is bounded on its own first.
constexpr long long kLongCounts = 8;

// What the bounds need of one offer.
struct OfferInfo {
  int offer = 0;      // index into request.offers
  int gpus = 1;
  int cap = 0;        // most instances in a plan: quota, max_instances, global batch
  int m = 0;          // most samples one rank takes in an iteration (m1 x micro-steps, <= batch)
  int m1 = 0;         // most samples one rank takes in a micro-step (memory, max_local_batch)
  double bwd = 0;     // backward at m1 samples, s
  double beta = 1;    // most backward / (forward + backward) at any batch: max of the fixed and per-sample ratios
  double acc = 0;     // adding one micro-step's gradients (ComputeModel::accumulate_s), s
  double dcap = kInf; // most samples a group of it takes in an iteration that meets the deadline
  double rate_cap = 0;  // cap x GPUs / s: the most a group of it absorbs per second of compute level
  double inv_e = 0;     // 1 / e: what it absorbs per second of level per USD/hour
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
  double bwd = 0;  // largest backward of one micro-step
  double beta = 0;  // largest backward share
  double acc = kInf;  // least accumulation step
  double scap = 0;  // most samples one group holds in an iteration
  double scap1 = 0; // most samples one group holds in a micro-step
  double m1 = 0;    // most samples one worker holds in a micro-step
  double dcap = 0;  // most samples one group takes by the deadline
  double price = kInf;  // least price of one instance
  double mpu = 0;       // most samples one instance holds in an iteration per USD/hour of its price
  double rate_cap = 0;  // most of OfferInfo::rate_cap
  // The offers themselves where known (a region's suffixes and single offers): with one group
  // left the additions are one of them, bounded each on its own (note "bounds").
  const OfferInfo* offers = nullptr;
  int n_offers = 0;
  void add(const OfferInfo& o) {
    any = true;
    dcap = std::max(dcap, o.dcap);
    rate_cap = std::max(rate_cap, o.rate_cap);
    price = std::min(price, o.price);
    mpu = std::max(mpu, static_cast<double>(o.gpus) * o.m / o.price);
    c = std::min(c, o.c);
    acc = std::min(acc, o.acc);
    m1 = std::max(m1, static_cast<double>(o.m1));
    scap1 = std::max(scap1, static_cast<double>(o.cap) * o.gpus * o.m1);
    s = std::min(s, o.s);
    e = std::min(e, o.e);
    g = std::max(g, o.gpus);
    wcap = std::max(wcap, o.cap * o.gpus);
    m = std::max(m, static_cast<double>(o.m));
    bwd = std::max(bwd, o.bwd);
    beta = std::max(beta, o.beta);
    scap = std::max(scap, static_cast<double>(o.cap) * o.gpus * o.m);
  }
};

struct Region {
  int id = 0;
  std::vector<OfferInfo> held;
  std::vector<int> held_min;
  std::vector<OfferInfo> opt;      // optional offers, in the order of note "bounds" ("order")
  std::vector<RestStats> suffix;   // suffix[i]: opt[i..]; suffix[n] empty
  std::vector<RestStats> single;   // single[i]: opt[i] alone
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
  double price = 0, sum_pic = 0, sum_e = 0, opt = 0, e_min = kInf, L0 = 0, ready0 = 0, rate = 0, bwd = 0, beta = 0;
  double sum_pacc = 0;  // Σ instances x price x accumulation step
  double C1 = 0;        // Σ ranks x m1: samples one micro-step holds
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
    sum_pacc += a * o.price * o.acc;
    C1 += static_cast<double>(a) * o.gpus * o.m1;
    sum_e += static_cast<double>(a) * o.gpus * o.e;
    opt = std::max(opt, o.opt);
    e_min = std::min(e_min, o.e);
    L0 = std::max(L0, o.c + o.s);
    ready0 = std::max(ready0, o.ready0);
    bwd = std::max(bwd, o.bwd);
    beta = std::max(beta, o.beta);
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

  // Micro-steps (note "bounds"): every plan below a node runs k in [k_min, k_max] of them, so a
  // rank of P's group g takes at most m[g] samples in an iteration and at least c[g] of fixed
  // compute; an added rank at least c_add.
  struct Micro {
    double k_min = 1;
    double c[kMaxGroups];
    double m[kMaxGroups];
    double c_add = 0;
  };

  // Most micro-steps of a plan below P: ceil(B / C1) falls as ranks join.
  double k_max(const State& P) const {
    const double A = r_.max_accumulation_steps, B = x_.B;
    if (!(P.C1 > 0)) return A;
    return P.C1 >= B ? 1.0 : std::min(A, std::ceil(B / P.C1));
  }

  // `C1_add`: the most samples the additions can hold in one micro-step (0: none); every
  // plan bounded runs at least k_lo and at most k_hi micro-steps.
  Micro micro(const State& P, const RestStats& rest, double C1_add, double k_lo, double k_hi) const {
    Micro u;
    const double A = r_.max_accumulation_steps, B = x_.B;
    const double k_max = std::min(this->k_max(P), k_hi);
    const double C1 = P.C1 + C1_add;
    u.k_min = std::max(k_lo, C1 >= B || !(C1 > 0) ? 1.0 : std::min(A, std::ceil(B / C1)));
    for (int g = 0; g < P.n; ++g) {
      const OfferInfo& o = *P.info[g];
      u.c[g] = o.c + (u.k_min - 1.0) * (o.c + o.acc);
      u.m[g] = std::min(static_cast<double>(o.m), k_max * o.m1);
    }
    u.c_add = rest.any ? rest.c + (u.k_min - 1.0) * (rest.c + rest.acc) : 0.0;
    return u;
  }

  // Samples P's ranks take by a compute level L: each min(m, (L - c) / s), read at the cap
  // on the breakpoint itself so that a cluster whose memory holds exactly the batch is not
  // lost to rounding.
  double absorbed(const State& P, const Micro& u, double L) const {
    double sum = 0;
    for (int g = 0; g < P.n; ++g) {
      const OfferInfo& o = *P.info[g];
      const double full = u.c[g] + o.s * u.m[g];
      sum += static_cast<double>(P.count[g]) * o.gpus * (L >= full ? u.m[g] : (L - u.c[g]) / o.s);
    }
    return sum;
  }

  // Smallest level L >= L0 at which P's workers plus k_add (L - c_r)^+ absorb the batch.
  double level(const State& P, const Micro& u, double k_add, double c_r, double L0) const {
    auto total = [&](double L) { return absorbed(P, u, L) + (k_add > 0 && L > c_r ? k_add * (L - c_r) : 0.0); };
    const double B = x_.B;
    double lo = L0, f_lo = total(L0);
    if (f_lo >= B) return L0;
    double bp[kMaxGroups + 1];
    int nb = 0;
    for (int g = 0; g < P.n; ++g) {
      const double v = u.c[g] + P.info[g]->s * u.m[g];
      if (v > L0) bp[nb++] = v;
    }
    if (k_add > 0 && c_r > L0) bp[nb++] = c_r;
    std::sort(bp, bp + nb);
    for (int i = 0; i < nb; ++i) {
      const double f_hi = total(bp[i]);
      if (f_hi >= B) return lo + (B - f_lo) * (bp[i] - lo) / (f_hi - f_lo);
      lo = bp[i];
      f_lo = f_hi;
    }
    if (k_add > 0) return lo + (B - f_lo) / k_add;
    return kInf;
  }

  // Lower bound of one iteration given a compute level bound L, seconds; `bwd` bounds the
  // backward of the all-reducing micro-step of every group of the plans bounded (kInf: none)
  // and `beta` the backward's share of a micro-step's compute (1: none).
  double iteration_bound(const State& P, double L, double bwd = kInf, double beta = 1) const {
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
      const double alpha = 2.0 * (w - 1.0) / w / bw, lat_term = 2.0 * (w - 1.0) * lat;
      // bucket k is ready no earlier than L - (1 - f_k) min(bwd, beta L) (note "bounds")
      const double last_bwd = std::min(bwd, beta * L);
      t = std::max(t, std::max(P.ready0, L - (1.0 - x_.f[0]) * last_bwd) + alpha * x_.tail_bytes[0] +
                          lat_term * x_.tail_count[0]);
      for (std::size_t k = 1; k < x_.f.size(); ++k) {
        t = std::max(t, L - (1.0 - x_.f[k]) * last_bwd + alpha * x_.tail_bytes[k] + lat_term * x_.tail_count[k]);
      }
    }
    return t + broadcast + P.opt;
  }

  // Least of g(T) = P.price T + e_add (B - absorbed_P(T - P.opt))^+ over T in [lo, hi]: what
  // one iteration of a plan below P costs at least (USD/hour x seconds) when it takes T, P's
  // workers paid for all of it and the samples they cannot take by then taken at no less
  // than e_add each (note "bounds"). For T >= lo g is convex and piecewise linear: the least
  // is at lo, at hi, where a group of P reaches its cap or where P takes the whole batch.
  double paid_usd(const State& P, const Micro& u, double e_add, double lo, double hi) const {
    const double B = x_.B;
    auto cost = [&](double T, double a) { return P.price * T + (a < B ? e_add * (B - a) : 0.0); };
    double T = lo, a = absorbed(P, u, lo - P.opt);
    if (!(e_add < kInf) || !(hi > lo)) return cost(T, a);
    while (a < B) {
      double slope = P.price, next = hi;
      for (int g = 0; g < P.n; ++g) {
        const OfferInfo& o = *P.info[g];
        const double full = u.c[g] + o.s * u.m[g] + P.opt;  // this group at its cap from here
        if (T < full) {
          slope -= e_add * static_cast<double>(P.count[g]) * o.gpus / o.s;
          next = std::min(next, full);
        }
      }
      if (slope >= 0) break;  // convex: the least is here
      const double a_next = absorbed(P, u, next - P.opt);
      if (a_next >= B) {  // P alone takes the whole batch within the segment: the least is there
        T = a_next > a ? T + (B - a) * (next - T) / (a_next - a) : next;
        return cost(T, B);
      }
      T = next;
      a = a_next;
      if (T >= hi) break;
    }
    return cost(T, a);
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
  // `quick`: for a whole plan, when the bound without the allreduce and the broadcast already
  // cuts, return it (most leaves of a large batch are cut so; with additions it seldom is).
  Bound bound(const State& P, const RestStats& rest, int groups_left, double k_lo = 1, double k_hi = kInf,
              bool quick = false) const {
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
    if (P.n == 0 && !adds) {
      b.infeasible = true;
      return b;
    }
    const Micro u = micro(P, rest, adds ? std::min(Wadd * rest.m1, groups_left * rest.scap1) : 0.0, k_lo, k_hi);
    // each rank takes a sample in each micro-step
    double L0 = P.n == 0 ? u.c_add + u.k_min * rest.s : P.L0;
    for (int g = 0; g < P.n; ++g) L0 = std::max(L0, u.c[g] + u.k_min * P.info[g]->s);
    // The additions absorb at most k (L - c_add) samples by a level L: k = Wadd / s, and, when
    // their price may be at most p, p / e; with one group left, the best of one offer's
    // min(cap x GPUs / s, p / e) (each of its ranks absorbs at most (L - c) / s and costs e / s).
    const bool one_of = groups_left == 1 && rest.offers != nullptr;
    const double k_workers = Wadd / rest.s;
    auto absorb_rate = [&](double p) {
      if (!one_of) return std::min(k_workers, p / rest.e);
      if (!(p < kInf)) return std::min(k_workers, rest.rate_cap);
      double k = 0;
      for (int i = 0; i < rest.n_offers; ++i) {
        const OfferInfo& o = rest.offers[i];
        k = std::max(k, std::min(o.rate_cap, p * o.inv_e));
      }
      return std::min(k_workers, k);
    };
    const double k_plain = adds ? absorb_rate(kInf) : 0.0;
    const double L = level(P, u, k_plain, u.c_add, L0);
    if (!std::isfinite(L)) {
      b.infeasible = true;
      return b;
    }
    const double bwd = adds ? std::max(P.bwd, rest.bwd) : P.bwd;
    const double beta = adds ? std::max(P.beta, rest.beta) : P.beta;
    if (quick && !adds) {  // a whole plan: compute and the optimizer alone, no allreduce, may cut it
      const Bound q = finish(P, rest, groups_left, adds, u, L0, L, k_plain, absorb_rate,
                             [&](double level) { return level + P.opt; });
      if (cut(q, P.price)) return q;
    }
    return finish(P, rest, groups_left, adds, u, L0, L, k_plain, absorb_rate,
                  [&](double level) { return iteration_bound(P, level, bwd, beta); });
  }

  // The rest of bound(): the time and USD bounds once the level L is known, with `it(L)` the
  // iteration bound of a compute level.
  template <class AbsorbRate, class Iteration>
  Bound finish(const State& P, const RestStats& rest, int groups_left, bool adds, const Micro& u, double L0,
               double L, double k_plain, const AbsorbRate& absorb_rate, const Iteration& it) const {
    Bound b;
    const double B = x_.B;
    const double T = it(L);
    b.time_plain = total_time(P, T);
    b.nominal_obj = x_.iters * T;
    const double e_all = adds ? std::min(P.e_min, rest.e) : P.e_min;
    const double fixed = P.sum_pic + (u.k_min - 1.0) * (P.sum_pic + P.sum_pacc);
    const double efficiency = x_.per_it_usd * (fixed + P.opt * P.price + P.sum_e + (B - P.W) * e_all);
    b.usd_plain = std::max(P.price * b.time_plain / 3600.0, efficiency);
    // (with no Pareto front usd_plain only seeds usd_obj, which the same bound over the
    // narrower [Tit, hi] below lifts at least as high)
    if (adds && pareto_) b.usd_plain = std::max(b.usd_plain, x_.per_it_usd * paid_usd(P, u, rest.e, T, kInf));
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
        const double k = std::min(k_plain, absorb_rate(p_add));
        const double L2 = level(P, u, k, u.c_add, L0);
        if (!std::isfinite(L2)) {
          b.time_obj = b.nominal_obj = b.usd_obj = kInf;
          return b;
        }
        Tit = std::max(Tit, it(L2));
      }
      b.time_obj = total_time(P, Tit);
      b.nominal_obj = x_.iters * Tit;
      b.usd_obj = std::max({b.usd_obj, P.price * b.time_obj / 3600.0});
      // a plan that can matter takes no longer than the deadline (or, for the fastest plans,
      // the k-th best time) allows
      double hi = kInf;
      if (std::isfinite(r_.deadline_s)) hi = r_.deadline_s / x_.iters / deadline_factor(P);
      if (!min_cost_) hi = std::min(hi, threshold() / x_.iters);
      if (min_cost_ || std::isfinite(r_.budget_usd)) {  // else no cut reads usd_obj
        b.usd_obj = std::max(b.usd_obj, x_.per_it_usd * paid_usd(P, u, rest.e, Tit, hi * (1.0 + 4 * kSlack)));
      }
    }
    // Deadline: what P cannot absorb by the deadline is done by additions at >= e_r per
    // sample, inflated by their fixed cost and the optimizer.
    if (std::isfinite(r_.deadline_s)) {
      b.deadline_factor = deadline_factor(P);
      const double D = r_.deadline_s / x_.iters / b.deadline_factor;  // iteration time bound, seconds
      const double Lmax = D - P.opt;
      const double need = B - absorbed(P, u, Lmax);
      if (need > kSlack * B) {  // rounding must not turn "exactly meets" into "misses"
        if (!adds || Lmax <= u.c_add || need > groups_left * rest.dcap * (1.0 + 4 * kSlack)) {
          b.time_obj = b.nominal_obj = kInf;  // cannot meet the deadline
        } else {
          const double usd = x_.per_it_usd * (P.price * Tit + need * rest.e * D / (Lmax - u.c_add));
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
    const double usd = std::max(P.price * time_s / 3600.0,
                                x_.per_it_usd * (P.sum_pic + P.opt * P.price + P.sum_e +
                                                 (x_.B - P.W) * std::min(P.e_min, rest_e)));
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
    double rate = 0;
    if (!simulate_state(P, c, rate)) return;
    if (pareto_) add_to_front(c);
    if (!detail::satisfies(r_, c, result_, rate, stats)) return;
    detail::offer_top_k(top, c, r_.top_k, r_.objective);
    if (static_cast<int>(top.size()) == r_.top_k) {
      atomic_min(sh_.threshold, detail::objective_value(top.back(), r_.objective));
    }
  }

  // Simulates P into result_ and counts it; when it fits, fills c (groups by offer, totals)
  // and its spot rate, and returns true.
  bool simulate_state(const State& P, Candidate& c, double& rate) {
    c.n = P.n;
    int order[kMaxGroups];
    for (int g = 0; g < P.n; ++g) order[g] = g;
    std::sort(order, order + P.n, [&](int a, int b) { return P.info[a]->offer < P.info[b]->offer; });
    GroupSpec groups[kMaxGroups];
    rate = 0;
    for (int k = 0; k < P.n; ++k) {
      const OfferInfo& o = *P.info[order[k]];
      c.offer[k] = o.offer;
      c.count[k] = P.count[order[k]];
      const Offer& offer = r_.offers[o.offer];
      groups[k] = {&r_.instances[offer.instance], c.count[k], offer.compute, offer.usd_per_hour};
      rate += c.count[k] * offer.interruptions_per_hour;
    }
    simulate_unchecked(r_.workload, groups, c.n, options_, result_);
    if (result_.feasible()) detail::require_finite_iteration(r_, c, result_);
    ++stats.evaluated;
    if (!result_.feasible()) {
      if (result_.infeasible == Infeasible::memory) ++stats.infeasible_memory;
      else ++stats.infeasible_batch;
      return false;
    }
    ++stats.feasible;
    detail::set_totals(r_, result_, rate, c);
    return true;
  }

  void add_to_front(const Candidate& c) {
    auto it = std::upper_bound(front.begin(), front.end(), c.total_s,
                               [](double t, const Candidate& x) { return t < x.total_s; });
    if (it != front.begin() && std::prev(it)->total_usd <= c.total_usd) {  // weakly dominated
      // An exact tie keeps the plan pareto_front() keeps, whichever was met first (thread
      // timing, order): dominated() never cuts a tie, so every tied plan gets here.
      Candidate& tied = *std::prev(it);
      if (tied.total_s == c.total_s && tied.total_usd == c.total_usd && detail::better(c, tied, Objective::max_throughput)) {
        tied = c;
      }
      return;
    }
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
    const Bound b = bound(P, RestStats{}, 0, 1, kInf, true);
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
  // workers, `a` instances of o and `groups_left` more groups of `rest` at their largest;
  // with `by_time`, also below which none that can matter absorbs it in time (note "bounds").
  // Those counts are skipped, not iterated (a large batch left thousands of them per node).
  long long first_count(const State& P, const OfferInfo& o, const RestStats& rest, int groups_left,
                        bool by_time = true) const {
    double hold = groups_left > 0 && rest.any ? groups_left * rest.scap : 0.0;
    for (int g = 0; g < P.n; ++g) hold += static_cast<double>(P.count[g]) * P.info[g]->gpus * P.info[g]->m;
    const double need = x_.B - hold;
    double a = need > 0 ? std::ceil(need / (static_cast<double>(o.gpus) * o.m)) : 1.0;
    // Without a Pareto front only plans that meet the deadline (and, for the fastest plans,
    // beat the k-th best time) matter: a rank takes at most (L - c) / s samples by a compute
    // level L, so the counts below what absorbs the batch by then are skipped too.
    if (!pareto_ && by_time) {
      double t_max = std::isfinite(r_.deadline_s) ? r_.deadline_s / x_.iters / deadline_factor(P) : kInf;
      if (!min_cost_) t_max = std::min(t_max, threshold() / x_.iters);
      if (std::isfinite(t_max)) {
        const double L = t_max * (1.0 + 4 * kSlack) - std::max(P.opt, o.opt);
        const double k = k_max(P);
        auto takes = [L, k](double c, double s, double m, double m1) {
          return std::clamp((L - c) / s, 0.0, std::min(m, k * m1));
        };
        double absorbed = groups_left > 0 && rest.any
                              ? groups_left * std::min(rest.wcap * takes(rest.c, rest.s, rest.m, rest.m1), rest.dcap)
                              : 0.0;
        for (int g = 0; g < P.n; ++g) {
          const OfferInfo& q = *P.info[g];
          absorbed += static_cast<double>(P.count[g]) * q.gpus * takes(q.c, q.s, q.m, q.m1);
        }
        const double short_by = x_.B * (1.0 - 4 * kSlack) - absorbed;
        if (short_by > 0) {
          const double per = o.gpus * takes(o.c, o.s, o.m, o.m1);
          a = std::max(a, per > 0 ? std::ceil(short_by / per) : kInf);
        }
      }
    }
    return a > static_cast<double>(o.cap) ? o.cap + 1LL : std::max(1LL, static_cast<long long>(a));
  }

  // Note "bounds", spans: the last count, up to `hi`, at which P plus that many instances of o
  // runs as many micro-steps as with `a` (ceil(B / C1), C1 the samples a micro-step holds).
  long long same_steps_until(const State& P, const OfferInfo& o, long long a, long long hi) const {
    if (r_.max_accumulation_steps <= 1) return hi;
    const double B = x_.B, per = static_cast<double>(o.gpus) * o.m1;
    const double C1 = P.C1 + a * per;
    if (C1 >= B) return hi;  // one micro-step from here on
    const double k = std::ceil(B / C1);
    // k steps while (k - 1) C1 < B: C1 <= floor((B - 1) / (k - 1))
    const double last = std::floor((std::floor((B - 1) / (k - 1)) - P.C1) / per);
    return std::max(a, std::min(hi, static_cast<long long>(std::min(last, static_cast<double>(hi)))));
  }

  // Bound of the plans P + b instances of o, b in [a, last], which all run the same number of
  // micro-steps: P + a of o, and up to last - a more of o as an addition.
  Bound span_bound(const State& P, const OfferInfo& o, long long a, long long last) const {
    State Q = P;
    Q.push(o, static_cast<int>(a));
    OfferInfo more = o;
    more.cap = static_cast<int>(last - a);
    more.dcap = o.cap > 0 ? o.dcap * (static_cast<double>(last - a) / o.cap) : 0.0;
    more.rate_cap = static_cast<double>(more.cap) * o.gpus / o.s;
    RestStats rest;
    rest.add(more);
    rest.offers = &more;
    rest.n_offers = 1;
    const double k = Q.C1 >= x_.B ? 1.0 : std::min<double>(r_.max_accumulation_steps, std::ceil(x_.B / Q.C1));
    return bound(Q, rest, 1, k, k);
  }

  // The most instances of `o` a plan P + o may hold: its cap, the instances and the workers left.
  long long most_count(const State& P, const OfferInfo& o) const {
    return std::min({static_cast<long long>(o.cap), r_.max_instances - P.N, (r_.global_batch - P.W) / o.gpus});
  }

  // M = Q with the held groups from `first` on at their minimum counts (in every plan below Q);
  // false when those alone exceed the global batch's workers or max_instances.
  bool with_held_minimums(const Region& reg, const State& Q, int first, State& M) const {
    M = Q;
    bool fits = true;
    for (int j = first; j < static_cast<int>(reg.held.size()); ++j) {
      M.push(reg.held[j], reg.held_min[j]);
      fits = fits && M.W <= r_.global_batch && M.N <= r_.max_instances;
    }
    return fits;
  }

  // Adds opt[pos] with every count; evaluates the plans when `evaluate_here`, recurses.
  void count_loop(const Region& reg, const State& P, int pos, bool evaluate_here) {
    const OfferInfo& o = reg.opt[pos];
    const RestStats& after = reg.suffix[pos + 1];
    const long long hi = most_count(P, o);
    const bool deeper = P.n + 1 < K_ && after.any;
    const long long first = first_count(P, o, after, deeper ? K_ - P.n - 1 : 0);
    // The last group, when its counts are many: bounded alone first (the bound of the offers
    // from here on took the best of each of them, note "bounds", one group left).
    if (!deeper && after.any && hi - first >= kLongCounts && cut(bound(P, reg.single[pos], 1), P.price)) {
      return;
    }
    const bool spans = !deeper && r_.max_accumulation_steps > 1;
    long long span_end = 0;  // the last count of the span of equal micro-steps last bounded
    for (long long a = first; a <= hi; ++a) {
      if (stopped()) return;
      if (spans && a > span_end) {
        span_end = same_steps_until(P, o, a, hi);
        if (span_end > a && cut(span_bound(P, o, a, span_end), P.price + a * o.price)) {
          a = span_end;
          continue;
        }
      }
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
    const long long hi = most_count(P, o);
    for (long long a = reg.held_min[h]; a <= hi; ++a) {
      if (stopped()) return;
      State Q = P;
      Q.push(o, static_cast<int>(a));  // a <= cap, an int
      State M;  // with the held groups still to come at their minimum: in every plan below
      if (!with_held_minimums(reg, Q, h + 1, M) || monotone_cut(M, reg.all.e)) break;
      held_loop(reg, Q, h + 1);
    }
  }

  // ---- the least hourly rate (note "closest" in search_internal.hpp) --------------------
  // Plans of one region by a depth-first walk cut by price (it only grows as instances join)
  // and by memory (what the additions can hold for the price left, note "bounds").

  detail::Candidate least_rate;  // the plan of the least USD/hour, then the fastest
  double least_usd_per_hour = kInf;

  void rate_region(const Region& reg) {
    if (!reg.held.empty()) {
      rate_held(reg, State{}, 0);
      return;
    }
    for (int pos = 0; pos < static_cast<int>(reg.opt.size()); ++pos) {
      rate_counts(reg, State{}, pos);
      if (sh_.stop.load(std::memory_order_relaxed)) return;
    }
  }

 private:
  bool rate_above(double price) const { return above(price, least_usd_per_hour); }

  // No plan P ∪ A, A from `rest` in at most `groups_left` groups, runs at a lower rate.
  bool rate_cut(const State& P, const RestStats& rest, int groups_left) const {
    if (!rest.any || groups_left <= 0 || rate_above(P.price + rest.price)) return true;
    double add = std::min((x_.B - static_cast<double>(P.W)) * rest.m, groups_left * rest.scap);
    if (std::isfinite(least_usd_per_hour)) add = std::min(add, (least_usd_per_hour - P.price) * (1.0 + 4 * kSlack) * rest.mpu);
    double hold = add;
    for (int g = 0; g < P.n; ++g) hold += static_cast<double>(P.count[g]) * P.info[g]->gpus * P.info[g]->m;
    return hold < x_.B;
  }

  void rate_evaluate(const State& P) {
    detail::Candidate c;
    double spot_rate = 0;
    if (!simulate_state(P, c, spot_rate)) return;
    const double rate = result_.usd_per_hour;
    if (least_rate.empty() || rate < least_usd_per_hour ||
        (rate == least_usd_per_hour && detail::better(c, least_rate, Objective::max_throughput))) {
      least_rate = c;
      least_usd_per_hour = rate;
    }
  }

  void rate_extend(const Region& reg, const State& P, int pos0) {
    const int groups_left = K_ - P.n;
    for (int pos = pos0; pos < static_cast<int>(reg.opt.size()); ++pos) {
      if (rate_cut(P, reg.suffix[pos], groups_left)) return;  // covers later positions
      rate_counts(reg, P, pos);
      if (sh_.stop.load(std::memory_order_relaxed)) return;
    }
  }

  void rate_counts(const Region& reg, const State& P, int pos) {
    const OfferInfo& o = reg.opt[pos];
    const RestStats& after = reg.suffix[pos + 1];
    const long long hi = most_count(P, o);
    const bool deeper = P.n + 1 < K_ && after.any;
    for (long long a = first_count(P, o, after, deeper ? K_ - P.n - 1 : 0, false); a <= hi; ++a) {
      if (stopped()) return;
      State Q = P;
      Q.push(o, static_cast<int>(a));
      if (rate_above(Q.price)) break;
      rate_evaluate(Q);
      if (deeper) rate_extend(reg, Q, pos + 1);
    }
  }

  void rate_held(const Region& reg, const State& P, int h) {
    const int H = static_cast<int>(reg.held.size());
    if (h == H) {
      rate_evaluate(P);
      rate_extend(reg, P, 0);
      return;
    }
    const OfferInfo& o = reg.held[h];
    const long long hi = most_count(P, o);
    for (long long a = reg.held_min[h]; a <= hi; ++a) {
      if (stopped()) return;
      State Q = P;
      Q.push(o, static_cast<int>(a));
      State M;  // with the held groups still to come at their minimum
      if (!with_held_minimums(reg, Q, h + 1, M) || rate_above(M.price)) break;
      rate_held(reg, Q, h + 1);
    }
  }

 public:
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
  o.m1 = o.m;
  o.bwd = of.compute.backward_s(std::max(o.m, 1));
  {  // (b_f + b_s x) / (c + s x) lies between b_f / c and b_s / s
    const ComputeModel& m = of.compute;
    double beta = m.per_sample_s() > 0 ? m.backward_per_sample_s / m.per_sample_s() : 1.0;
    if (m.fixed_s() > 0) beta = std::max(beta, m.backward_fixed_s / m.fixed_s());
    o.beta = std::min(1.0, beta);
  }
  o.acc = of.compute.accumulate_s;
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
  // a rank of a plan meeting the deadline computes for at most deadline / iterations - its optimizer step
  const double l_max = r.deadline_s / r.iterations - o.opt;
  o.rate_cap = static_cast<double>(o.cap) * o.gpus / o.s;
  o.inv_e = 1.0 / o.e;
  o.dcap = static_cast<double>(o.cap) * o.gpus * o.m;
  if (std::isfinite(l_max)) o.dcap = static_cast<double>(o.cap) * o.gpus * std::clamp((l_max - o.c) / o.s, 0.0, static_cast<double>(o.m));
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
  if (r.deadline_confidence > 0) {  // every offer's compute bands are known (SearchRequest::validate)
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
    // Note "bounds", order: for the cheapest plans the most efficient offers first, for the
    // fastest with accumulation the fastest first (ties in offer order), so the best after a
    // position is that position's own and the bounds tighten as the position moves on. Any
    // order visits each plan once: a plan's groups are sorted by offer when evaluated.
    if (r.objective == Objective::min_cost) {
      std::stable_sort(reg.opt.begin(), reg.opt.end(), [](const OfferInfo& a, const OfferInfo& b) { return a.e < b.e; });
    } else if (r.max_accumulation_steps > 1) {
      std::stable_sort(reg.opt.begin(), reg.opt.end(), [](const OfferInfo& a, const OfferInfo& b) { return a.s < b.s; });
    }
    reg.suffix.assign(reg.opt.size() + 1, RestStats{});
    reg.single.assign(reg.opt.size(), RestStats{});
    for (std::size_t i = 0; i < reg.opt.size(); ++i) reg.single[i].add(reg.opt[i]);
    for (std::size_t i = reg.opt.size(); i-- > 0;) {
      reg.suffix[i] = reg.suffix[i + 1];
      reg.suffix[i].add(reg.opt[i]);
    }
    reg.all = reg.suffix[0];
    for (const OfferInfo& o : reg.held) reg.all.add(o);
    if (reg.opt.empty() && reg.held.empty()) continue;
    x.regions.push_back(std::move(reg));
  }
  for (Region& reg : x.regions) {  // where they stay now
    const int n = static_cast<int>(reg.opt.size());
    for (int i = 0; i < n; ++i) {
      reg.suffix[i].offers = reg.single[i].offers = &reg.opt[i];
      reg.suffix[i].n_offers = n - i;
      reg.single[i].n_offers = 1;
    }
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
  result.stats.pruned = never_simulated(result.stats);

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
    // Nothing meets the constraints: what binds and the closest plan (note "closest" in
    // search_internal.hpp), each from a search with some constraints lifted, as
    // search_exhaustive finds them in its one walk.
    detail::NoPlan info;
    bool cancelled = false;
    // Every plan simulated counts once in evaluated and once in feasible or infeasible_*
    // (feasible was left out: 19 M evaluated, 0 feasible, in a review's slow search).
    auto absorb = [&](const SearchStats& s) {
      result.stats.evaluated += s.evaluated;
      result.stats.feasible += s.feasible;
      result.stats.nodes += s.nodes;
      result.stats.infeasible_memory += s.infeasible_memory;
      result.stats.infeasible_batch += s.infeasible_batch;
      cancelled = cancelled || s.cancelled;
    };
    // The best plan under `objective` with the deadline lifted, and the budget and cap unless kept.
    auto lifted = [&](Objective objective, bool keep_budget, bool keep_cap) {
      SearchRequest q = request;
      q.objective = objective;
      q.deadline_s = kInf;
      q.deadline_confidence = 0;
      if (!keep_budget) q.budget_usd = kInf;
      if (!keep_cap) q.max_usd_per_hour = kInf;
      q.top_k = 1;
      q.collect_pareto = false;
      SearchResult near = run(q, cancel, stop_at);
      absorb(near.stats);
      return near;
    };
    bool found = false;
    if (std::isfinite(request.deadline_s)) {  // the fastest plan within the budget and the cap
      SearchResult near = lifted(Objective::max_throughput, true, true);
      if (!near.plans.empty()) {
        found = true;
        info.binds = detail::Binds::deadline;
        result.closest = near.plans.front();
        if (std::isfinite(request.budget_usd) || std::isfinite(request.max_usd_per_hour)) {
          SearchResult any = lifted(Objective::max_throughput, false, false);
          if (!any.plans.empty()) info.fastest_s = any.plans.front().total_s;
        }
      }
    }
    if (!found && std::isfinite(request.budget_usd) && !cancelled) {  // the cheapest plan within the cap
      SearchResult near = lifted(Objective::min_cost, false, true);
      if (!near.plans.empty()) {
        found = true;
        info.binds = detail::Binds::budget;
        result.closest = near.plans.front();
      }
    }
    if (!found && std::isfinite(request.max_usd_per_hour) && !cancelled) {  // the least hourly rate
      Context x(request);
      build(x);
      Shared shared;
      Searcher s(x, shared, cancel, stop_at);
      for (const Region& reg : x.regions) {
        s.rate_region(reg);
        if (shared.stop.load()) break;
      }
      s.stats.cancelled = shared.stop.load();
      absorb(s.stats);
      if (!s.least_rate.empty()) {
        found = true;
        info.binds = detail::Binds::hourly_cap;
        result.closest = detail::materialise(request, s.least_rate);
      }
    }
    if (found) plan_totals(request, result.closest);  // its spot estimate and chances against the real deadline
    // pruned is what of the space was never simulated, counting every pass (it was the main
    // pass's alone, so evaluated + pruned could exceed the space)
    result.stats.pruned = never_simulated(result.stats);
    info.infeasible_memory = result.stats.infeasible_memory;
    info.infeasible_batch = result.stats.infeasible_batch;
    result.why_none = detail::why_none(request, info, &result.closest);
    if (cancelled) {  // stopped before any plan: the header's gap for that is +inf
      result.stats.cancelled = true;
      result.optimal = false;
      result.gap = kInf;
    }
    if (result.stats.cancelled) {  // what was not searched may hold a plan: say so first
      result.why_none = "the search stopped (time limit or cancel) before it found a plan that fits"
                        + std::string(found ? "; so far: " + result.why_none : "; allow it more time");
    }
  }
  result.stats.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

}  // namespace srift
