// search() (branch-and-bound) against search_exhaustive() on random spaces small enough to
// enumerate: the same top-k plans, the same Pareto front, the same closest plan, for both
// objectives, with spot offers, held groups, memory filters and threads.
#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "srift/srift.hpp"

// The thread-failure test limits the address space, which the sanitizers' shadow memory
// does not survive.
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define SRIFT_TEST_THREAD_LIMITS 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#undef SRIFT_TEST_THREAD_LIMITS
#endif
#endif
#ifdef SRIFT_TEST_THREAD_LIMITS
#include <pthread.h>
#include <sys/resource.h>
#endif

namespace {

using srift::CancelToken;
using srift::Objective;
using srift::Offer;
using srift::Plan;
using srift::PlanGroup;
using srift::SearchRequest;
using srift::SearchResult;

// One workload (a 50 MB gradient, 2 GB of state, 100 MB a sample) and one instance type of
// `gpus` GPUs with `gpu_gib` GiB each, offered at $1/h for up to 4 instances.
SearchRequest one_type_request(const char* name, int gpus, double gpu_gib) {
  SearchRequest r;
  r.workload.bucket_bytes = {5e7};
  r.workload.bucket_ready_fraction = {1.0};
  r.workload.fixed_memory_bytes = 2e9;
  r.workload.activation_bytes_per_sample = 1e8;
  srift::InstanceSpec s;
  s.name = name;
  s.gpus = gpus;
  s.gpu_memory_bytes = gpu_gib * (1u << 30);
  s.intra = {1e11, 5e-6};
  s.network = {1.2e10, 3e-5};
  r.instances.push_back(s);
  Offer o;
  o.instance = 0;
  o.usd_per_hour = 1.0;
  o.max_count = 4;
  o.compute.forward_per_sample_s = 1e-2;
  o.compute.backward_per_sample_s = 2e-2;
  r.offers.push_back(o);
  return r;
}

double uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}
int integer(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
int integer_of(std::uint64_t seed, int lo, int hi) {
  std::mt19937_64 rng(seed * 7 + 3);
  return integer(rng, lo, hi);
}

// A random space: 1-4 instance types, 1-3 regions, on-demand and spot offers, caps 0-6.
SearchRequest random_request(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  SearchRequest r;
  const int buckets = integer(rng, 0, 6);
  double fraction = 0;
  for (int k = 0; k < buckets; ++k) {
    r.workload.bucket_bytes.push_back(uniform(rng, 1e6, 1e8));
    fraction = std::min(1.0, fraction + uniform(rng, 0, 0.4));
    r.workload.bucket_ready_fraction.push_back(fraction);
  }
  r.workload.fixed_memory_bytes = uniform(rng, 1e9, 12e9);
  r.workload.activation_bytes_per_sample = uniform(rng, 5e7, 2e9);
  const int types = integer(rng, 1, 4);
  for (int i = 0; i < types; ++i) {
    srift::InstanceSpec s;
    s.name = "t" + std::to_string(i);
    const int gpus[] = {1, 1, 2, 4, 8};
    s.gpus = gpus[integer(rng, 0, 4)];
    const double memory[] = {16e9, 24e9, 40e9, 80e9};
    s.gpu_memory_bytes = memory[integer(rng, 0, 3)];
    s.intra = {uniform(rng, 1e10, 3e11), uniform(rng, 0, 2e-5)};
    s.network = {uniform(rng, 1e9, 1.2e10), uniform(rng, 1e-5, 5e-5)};
    r.instances.push_back(s);
  }
  const int regions = integer(rng, 1, 3);
  for (int region = 0; region < regions; ++region) {
    for (int i = 0; i < types; ++i) {
      for (int market = 0; market < 2; ++market) {
        if (uniform(rng, 0, 1) < 0.25) continue;
        Offer o;
        o.instance = i;
        o.region = region;
        o.market = market == 0 ? srift::Market::on_demand : srift::Market::spot;
        o.usd_per_hour = std::round(uniform(rng, 0.5, 30) * std::pow(r.instances[i].gpus, 0.9) * 1000) / 1000;
        o.max_count = integer(rng, 0, 6);
        o.compute.forward_fixed_s = uniform(rng, 0, 0.02);
        o.compute.forward_per_sample_s = uniform(rng, 2e-4, 5e-3);
        o.compute.backward_fixed_s = uniform(rng, 0, 0.03);
        o.compute.backward_per_sample_s = uniform(rng, 4e-4, 1e-2);
        o.compute.optimizer_s = uniform(rng, 0, 0.02);
        if (market == 1) {
          const double rates[] = {0.0, 0.001, 0.01, 0.05, 0.3};
          o.interruptions_per_hour = rates[integer(rng, 0, 4)];
        }
        r.offers.push_back(o);
      }
    }
  }
  r.global_batch = integer(rng, 4, 256);
  r.iterations = uniform(rng, 1e3, 1e5);
  r.spot.checkpoint_bytes = uniform(rng, 0, 2e10);
  r.spot.provisioning_s = uniform(rng, 0, 600);
  r.max_types = integer(rng, 1, 3);
  r.top_k = integer(rng, 1, 5);
  r.collect_pareto = uniform(rng, 0, 1) < 0.5;
  if (uniform(rng, 0, 1) < 0.3) r.max_instances = integer(rng, 1, 8);
  if (uniform(rng, 0, 1) < 0.2) r.min_gpu_memory_bytes = 30e9;
  if (uniform(rng, 0, 1) < 0.2) r.deadline_confidence = 0.9;
  // Iteration bands on half the spaces (a separate stream keeps the spaces above unchanged).
  std::mt19937_64 band_rng(seed * 31 + 17);
  if (uniform(band_rng, 0, 1) < 0.5) {
    const bool some_unknown = uniform(band_rng, 0, 1) < 0.1;
    for (Offer& o : r.offers) {
      o.band.compute = {uniform(band_rng, 0.7, 1.0), uniform(band_rng, 1.0, 1.6)};
      o.band.compute_several = {o.band.compute.p10 * 0.95, o.band.compute.p90 * 1.05};
      if (some_unknown && uniform(band_rng, 0, 1) < 0.5) o.band.compute = o.band.compute_several = {NAN, NAN};
      if (uniform(band_rng, 0, 1) < 0.2) o.band.link = {0.88, 1.24};
      o.band.measured_whole = uniform(band_rng, 0, 1) < 0.2;
      o.band.intra_probed = uniform(band_rng, 0, 1) < 0.3;
      o.band.network_probed = uniform(band_rng, 0, 1) < 0.3;
    }
    for (int s = 0; s < srift::kScalingScopes; ++s) {
      for (int b = 0; b < srift::kScalingBuckets; ++b) {
        r.scaling_band.cell(static_cast<srift::ScalingScope>(s), b) = {uniform(band_rng, 0.7, 1.0),
                                                                     uniform(band_rng, 1.0, 2.4)};
      }
    }
    const double confidences[] = {0.0, 0.5, 0.75, 0.9};
    r.deadline_confidence = confidences[integer(band_rng, 0, 3)];
    if (some_unknown) r.deadline_confidence = 0;  // a confidence needs every band (SearchRequest::validate)
  }
  return r;
}

// Deadline probabilities equal to the bit, or both NaN (a plan with no band: unknown).
void expect_same_probability(double a, double b, const std::string& ctx) {
  EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << ctx << ": " << a << " vs " << b;
}

// Whether random_request gave the space bands and a deadline confidence.
bool asks_confidence_over_bands(const SearchRequest& r) {
  return r.deadline_confidence > 0 && !r.scaling_band.cell(srift::ScalingScope::single_instance, 0).trivial();
}

// Sets a deadline or budget near a point of the true Pareto front so constraints bind.
void bind_constraints(SearchRequest& r, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + 1);
  r.objective = uniform(rng, 0, 1) < 0.5 ? Objective::min_cost : Objective::max_throughput;
  SearchRequest probe = r;
  probe.collect_pareto = true;
  probe.top_k = 1;
  probe.deadline_confidence = 0;
  const SearchResult all = srift::search_exhaustive(probe);
  if (all.pareto.empty()) return;
  const Plan& p = all.pareto[integer(rng, 0, static_cast<int>(all.pareto.size()) - 1)];
  if (r.objective == Objective::min_cost) {
    r.deadline_s = p.total_s * uniform(rng, 0.8, 1.5);
    if (uniform(rng, 0, 1) < 0.3) r.budget_usd = p.total_usd * uniform(rng, 0.8, 3);
    if (uniform(rng, 0, 1) < 0.2) r.max_usd_per_hour = uniform(rng, 1, 100);  // note "closest"
  } else {
    r.budget_usd = p.total_usd * uniform(rng, 0.8, 1.5);
    if (uniform(rng, 0, 1) < 0.3) r.max_usd_per_hour = uniform(rng, 1, 100);
    if (uniform(rng, 0, 1) < 0.2) r.deadline_s = p.total_s * uniform(rng, 0.8, 3);
  }
}

std::string describe(const Plan& p) {
  std::string s = "[";
  for (const PlanGroup& g : p.groups) s += std::to_string(g.offer) + "x" + std::to_string(g.count) + " ";
  return s + "] " + std::to_string(p.total_s) + " s, USD " + std::to_string(p.total_usd);
}

void expect_same_plan(const Plan& a, const Plan& b, const std::string& what) {
  ASSERT_EQ(a.groups.size(), b.groups.size()) << what << ": " << describe(a) << " vs " << describe(b);
  for (std::size_t k = 0; k < a.groups.size(); ++k) {
    EXPECT_EQ(a.groups[k].offer, b.groups[k].offer) << what;
    EXPECT_EQ(a.groups[k].count, b.groups[k].count) << what;
  }
  EXPECT_EQ(a.total_s, b.total_s) << what;  // bit-identical: both use the same totals
  EXPECT_EQ(a.total_usd, b.total_usd) << what;
}

void expect_same(const SearchRequest& r, const SearchResult& ex, const SearchResult& bb, std::uint64_t seed) {
  const std::string ctx = "seed " + std::to_string(seed);
  ASSERT_EQ(ex.plans.size(), bb.plans.size()) << ctx;
  for (std::size_t i = 0; i < ex.plans.size(); ++i) expect_same_plan(ex.plans[i], bb.plans[i], ctx + " plan " + std::to_string(i));
  if (r.collect_pareto) {
    // The same plans: an exact tie of (time, USD) is stood for by the plan better() picks,
    // whichever search, order or thread met it first.
    ASSERT_EQ(ex.pareto.size(), bb.pareto.size()) << ctx;
    for (std::size_t i = 0; i < ex.pareto.size(); ++i) expect_same_plan(ex.pareto[i], bb.pareto[i], ctx + " pareto");
  }
  for (std::size_t i = 0; i < ex.plans.size() && i < bb.plans.size(); ++i) {
    expect_same_probability(ex.plans[i].deadline_probability, bb.plans[i].deadline_probability, ctx);
  }
  if (ex.plans.empty()) {
    expect_same_plan(ex.closest, bb.closest, ctx + " closest");
    expect_same_probability(ex.closest.deadline_probability, bb.closest.deadline_probability, ctx);
    if (!ex.closest.groups.empty()) {
      EXPECT_EQ(ex.why_none, bb.why_none) << ctx;  // (counts of infeasible differ)
    }
    EXPECT_FALSE(bb.why_none.empty()) << ctx;
    // Note "closest": the closest plan keeps within the hard caps that do not bind.
    const Plan& c = bb.closest;
    if (!c.groups.empty()) {
      const bool deadline = bb.why_none.find("meets the deadline") != std::string::npos;
      const bool budget = bb.why_none.find("no plan fits the budget") != std::string::npos;
      const bool cap = bb.why_none.find("no plan runs within the hourly cap") != std::string::npos;
      EXPECT_EQ(deadline + budget + cap, 1) << ctx << ": " << bb.why_none;
      if (deadline || budget) {
        EXPECT_LE(c.iteration.usd_per_hour, r.max_usd_per_hour) << ctx;
      }
      if (deadline) {
        EXPECT_LE(c.total_usd, r.budget_usd) << ctx;
      }
      if (cap) {
        EXPECT_GT(c.iteration.usd_per_hour, r.max_usd_per_hour) << ctx;
      }
      EXPECT_EQ(bb.why_none.find("within the budget limits"), std::string::npos) << ctx;
    }
  }
  EXPECT_TRUE(bb.optimal) << ctx;
  EXPECT_EQ(bb.gap, 0.0) << ctx;
  EXPECT_LE(bb.stats.evaluated, static_cast<std::uint64_t>(bb.stats.space) * 2 + 2) << ctx;
}

TEST(Search, EqualsExhaustiveOnRandomSpaces) {
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    SearchRequest r = random_request(seed);
    bind_constraints(r, seed);
    const SearchResult ex = srift::search_exhaustive(r);
    const SearchResult bb = srift::search(r);
    expect_same(r, ex, bb, seed);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(Search, EqualsExhaustiveWithBandsAndConfidence) {
  // The band's floor in the deadline bounds (csrc/bnb.cpp note "bounds") never cuts a plan
  // that meets the deadline with the asked confidence.
  int tested = 0;
  for (std::uint64_t seed = 5000; seed < 6200; ++seed) {
    SearchRequest r = random_request(seed);
    if (!asks_confidence_over_bands(r)) continue;
    if (seed % 4 == 0 && !r.offers.empty() && r.offers[0].max_count > 0) {
      r.max_types = std::max(r.max_types, 2);
      r.held.push_back({0, 1});
    }
    bind_constraints(r, seed);
    // move the deadline to where the bands, not the predictions, decide
    if (std::isfinite(r.deadline_s)) r.deadline_s *= 1.0 + (seed % 7) * 0.25;
    const SearchResult ex = srift::search_exhaustive(r);
    const SearchResult bb = srift::search(r);
    expect_same(r, ex, bb, seed);
    if (::testing::Test::HasFailure()) return;
    ++tested;
  }
  EXPECT_GT(tested, 300);
}

TEST(Search, EqualsExhaustiveWithGradientAccumulation) {
  // Plans whose batch fits memory only in micro-steps (simulator.cpp note "accumulation"):
  // the bounds read a worker's memory cap as the micro-steps' (bnb.cpp note "bounds").
  int accumulating = 0;
  for (std::uint64_t seed = 9000; seed < 9400; ++seed) {
    SearchRequest r = random_request(seed);
    r.workload.activation_bytes_per_sample *= 4;  // memory binds more often
    r.max_accumulation_steps = integer_of(seed, 2, 8);
    bind_constraints(r, seed);
    const SearchResult ex = srift::search_exhaustive(r);
    const SearchResult bb = srift::search(r);
    expect_same(r, ex, bb, seed);
    if (::testing::Test::HasFailure()) return;
    for (const Plan& p : bb.plans) accumulating += p.iteration.accumulation_steps > 1;
  }
  EXPECT_GT(accumulating, 50);
}

TEST(Search, EqualsExhaustiveWithABufferBroadcast) {
  // DDP's buffer broadcast (simulator.hpp note "buffer broadcast") adds to every multi-rank
  // plan's bound on P's ring (bnb.cpp note "bounds"); the bound must never cut an optimum,
  // with buckets and without any.
  for (std::uint64_t seed = 12000; seed < 12300; ++seed) {
    SearchRequest r = random_request(seed);
    const double total = r.workload.total_gradient_bytes();
    r.workload.broadcast_bytes = {total * integer_of(seed, 1, 200) / 100.0, 4096.0};
    if (seed % 5 == 0) {
      r.workload.bucket_bytes.clear();
      r.workload.bucket_ready_fraction.clear();
    }
    bind_constraints(r, seed);
    const SearchResult ex = srift::search_exhaustive(r);
    const SearchResult bb = srift::search(r);
    expect_same(r, ex, bb, seed);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(Search, EqualsExhaustiveWithALocalBatchCap) {
  // A per-GPU cap (SearchRequest::max_local_batch) binds like memory: with and without
  // accumulation, branch-and-bound finds the exhaustive optimum.
  int capped = 0;
  for (std::uint64_t seed = 9400; seed < 9700; ++seed) {
    SearchRequest r = random_request(seed);
    r.max_local_batch = integer_of(seed, 1, 64);
    r.max_accumulation_steps = seed % 2 == 0 ? 1 : integer_of(seed + 1, 2, 8);
    bind_constraints(r, seed);
    const SearchResult ex = srift::search_exhaustive(r);
    const SearchResult bb = srift::search(r);
    expect_same(r, ex, bb, seed);
    if (::testing::Test::HasFailure()) return;
    for (const Plan& p : bb.plans) {
      for (int g = 0; g < p.iteration.num_groups; ++g) {
        EXPECT_LE(p.iteration.groups[g].batch_high, r.max_local_batch) << "seed " << seed;
        capped += p.iteration.groups[g].max_batch == r.max_local_batch;
      }
    }
  }
  EXPECT_GT(capped, 50);
}

TEST(Search, EqualsExhaustiveWhenMemoryBindsTheBatch) {
  // A global batch near what the space's GPUs can hold: the counts skipped below what holds
  // the batch (bnb.cpp note "bounds") never cut an optimum.
  int tested = 0;
  for (std::uint64_t seed = 12000; seed < 12300; ++seed) {
    SearchRequest r = random_request(seed);
    r.max_local_batch = integer_of(seed, 1, 16);
    r.max_accumulation_steps = seed % 3 == 0 ? integer_of(seed + 1, 2, 4) : 1;
    double most = 0;  // the most samples one region's offers hold at once
    for (int region = 0; region < 3; ++region) {
      std::vector<double> held;
      for (const Offer& o : r.offers) {
        if (o.region != region) continue;
        const int m = srift::max_local_batch(r.workload, r.instances[o.instance], r.sim_options());
        held.push_back(static_cast<double>(o.max_count) * r.instances[o.instance].gpus * m * r.max_accumulation_steps);
      }
      std::sort(held.rbegin(), held.rend());
      double sum = 0;
      for (int g = 0; g < r.max_types && g < static_cast<int>(held.size()); ++g) sum += held[g];
      most = std::max(most, sum);
    }
    if (most < 8) continue;
    r.global_batch = std::max(1, static_cast<int>(most * (0.3 + 0.7 * (seed % 10) / 10.0)));
    bind_constraints(r, seed);
    const SearchResult ex = srift::search_exhaustive(r);
    const SearchResult bb = srift::search(r);
    expect_same(r, ex, bb, seed);
    if (::testing::Test::HasFailure()) return;
    ++tested;
  }
  EXPECT_GT(tested, 150);
}

TEST(Search, EqualsExhaustiveWithManyAccumulationSteps) {
  // Review finding 7: up to 64 micro-steps, where the bounds read a rank's samples as k x its
  // micro-step batch and its fixed compute k times for the k the node allows, bound spans of
  // counts that run the same k together, and let the all-reduce overlap only the last
  // micro-step's backward (bnb.cpp note "bounds"). None of that may cut an optimum.
  int deep = 0;
  for (std::uint64_t seed = 15000; seed < 15300; ++seed) {
    SearchRequest r = random_request(seed);
    r.workload.activation_bytes_per_sample *= integer_of(seed, 4, 32);  // memory binds
    const int steps[] = {8, 16, 32, 64};
    r.max_accumulation_steps = steps[seed % 4];
    r.global_batch = integer_of(seed + 1, 64, 2048);
    if (seed % 5 == 0) r.max_local_batch = integer_of(seed + 2, 1, 8);
    if (seed % 7 == 0) {
      for (Offer& o : r.offers) o.compute.accumulate_s = 0.01;
    }
    bind_constraints(r, seed);
    const SearchResult ex = srift::search_exhaustive(r);
    const SearchResult bb = srift::search(r);
    expect_same(r, ex, bb, seed);
    if (::testing::Test::HasFailure()) return;
    for (const Plan& p : ex.plans) deep += p.iteration.accumulation_steps > 8;
    for (const Plan& p : ex.pareto) deep += p.iteration.accumulation_steps > 8;
  }
  EXPECT_GT(deep, 50);
}

// A large global batch in up to 64 micro-steps on a catalog-like space (review finding 7:
// BERT-large at 65,536 with --accumulate 64 took 73-112 s): 16 offers of one region, GPUs of
// 16-96 GiB, 1-8 per instance, slow and fast NICs, caps of 64.
SearchRequest large_batch_request() {
  std::mt19937_64 rng(20240611);
  SearchRequest r;
  for (int k = 0; k < 53; ++k) {
    r.workload.bucket_bytes.push_back(25e6);
    r.workload.bucket_ready_fraction.push_back((k + 1) / 53.0);
  }
  r.workload.fixed_memory_bytes = 6e9;
  r.workload.activation_bytes_per_sample = 6e8;
  const int gpus[] = {1, 1, 1, 2, 4, 8};
  const double memory[] = {16, 24, 48, 80, 96};
  for (int i = 0; i < 16; ++i) {
    srift::InstanceSpec s;
    s.name = "t" + std::to_string(i);
    s.gpus = gpus[integer(rng, 0, 5)];
    s.gpu_memory_bytes = memory[integer(rng, 0, 4)] * (1u << 30);
    s.intra = {uniform(rng, 5e10, 3e11), 5e-6};
    s.network = {s.gpus == 1 ? uniform(rng, 2.5e8, 5e9) : uniform(rng, 1e10, 4e10), 3e-5};
    r.instances.push_back(s);
    Offer o;
    o.instance = i;
    o.max_count = 64;
    const double speed = uniform(rng, 1, 4);  // per GPU
    o.usd_per_hour = std::round(s.gpus * speed * uniform(rng, 0.6, 1.4) * 1000) / 1000;
    o.compute.forward_fixed_s = 0.02 / speed;
    o.compute.backward_fixed_s = 0.03 / speed;
    o.compute.forward_per_sample_s = 0.015 / speed;
    o.compute.backward_per_sample_s = 0.03 / speed;
    o.compute.optimizer_s = 0.02 / speed;
    o.compute.accumulate_s = 0.004 / speed;
    r.offers.push_back(o);
  }
  r.global_batch = 65536;
  r.iterations = 1e4;
  r.max_types = 3;
  r.max_accumulation_steps = 64;
  r.top_k = 5;
  return r;
}

TEST(Search, ALargeBatchInManyMicroStepsIsSearchedFast) {
  // Before the micro-step bounds (bnb.cpp note "bounds") the deadline question walked 45 M
  // nodes here (15 s) and the budget question 14 M; they now take about 1.2 M and 0.4 M. A
  // limit between keeps them from coming back.
  SearchRequest r = large_batch_request();
  r.deadline_s = 24 * 3600.0;
  const SearchResult cheap = srift::search(r);
  ASSERT_FALSE(cheap.plans.empty()) << cheap.why_none;
  EXPECT_TRUE(cheap.optimal);
  EXPECT_LT(cheap.stats.nodes, 5000000u) << cheap.stats.nodes;
  EXPECT_GT(cheap.plans[0].iteration.accumulation_steps, 1);
  r.objective = Objective::max_throughput;
  r.deadline_s = std::numeric_limits<double>::infinity();
  r.budget_usd = cheap.plans[0].total_usd * 1.5;
  const SearchResult fast = srift::search(r);
  ASSERT_FALSE(fast.plans.empty()) << fast.why_none;
  EXPECT_LT(fast.stats.nodes, 5000000u) << fast.stats.nodes;
  EXPECT_LE(fast.plans[0].total_s, cheap.plans[0].total_s);
  // The same answer on two threads.
  r.threads = 2;
  const SearchResult two = srift::search(r);
  ASSERT_FALSE(two.plans.empty());
  expect_same_plan(fast.plans[0], two.plans[0], "two threads");
}

TEST(Search, ABatchNoPlanHoldsIsCutAtTheRoot) {
  // No plan's GPUs hold the batch: the memory bound cuts every subtree, so the search
  // simulates nothing (it walked the whole space before), and the answer says why.
  int tested = 0;
  for (std::uint64_t seed = 9700; seed < 9800; ++seed) {
    SearchRequest r = random_request(seed);
    if (r.offers.empty()) continue;
    r.global_batch = 1 << 30;
    const SearchResult res = srift::search(r);
    EXPECT_TRUE(res.plans.empty()) << "seed " << seed;
    EXPECT_EQ(res.stats.evaluated, 0u) << "seed " << seed;
    bool any_large = false;  // min_gpu_memory may leave no offer: then that is the reason given
    for (const Offer& o : r.offers) any_large = any_large || r.instances[o.instance].gpu_memory_bytes >= r.min_gpu_memory_bytes;
    EXPECT_NE(res.why_none.find(any_large ? "holds the global batch of 1073741824 samples" : "(min_gpu_memory)"),
              std::string::npos)
        << res.why_none;
    if (seed % 10 == 0) {
      EXPECT_TRUE(srift::search_exhaustive(r).plans.empty()) << "seed " << seed;
    }
    ++tested;
  }
  EXPECT_GT(tested, 50);
}

TEST(Search, AConfidenceNeedsEveryBandAndAPlanWithNoBandHasNoProbability) {
  // A compute model with no held-out spread (srift's roofline model): the chance of meeting a
  // deadline is unknown, not 1, and a deadline asked at a confidence is refused by name.
  int tested = 0;
  for (std::uint64_t seed = 0; seed < 200 && tested < 20; ++seed) {
    SearchRequest r = random_request(seed);
    r.deadline_confidence = 0;
    for (Offer& o : r.offers) o.band.compute = o.band.compute_several = {NAN, NAN};
    bind_constraints(r, seed);
    if (r.objective != Objective::min_cost || !std::isfinite(r.deadline_s)) continue;
    const SearchResult res = srift::search(r);
    for (const Plan& p : res.plans) EXPECT_TRUE(std::isnan(p.deadline_probability)) << "seed " << seed;
    tested += !res.plans.empty();
    r.deadline_confidence = 0.9;
    try {
      srift::search(r);
      ADD_FAILURE() << "seed " << seed << ": no throw";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("offers[0].band.compute must be known when deadline_confidence > 0"),
                std::string::npos) << e.what();
    }
  }
  EXPECT_GE(tested, 20);
}

TEST(Search, PlansMeetTheDeadlineWithTheirConfidence) {
  // Under bands and preemption together every returned plan meets the deadline with the
  // asked probability; asking more never makes the best plan cheaper.
  int tested = 0;
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    SearchRequest r = random_request(seed);
    if (!asks_confidence_over_bands(r)) continue;
    bind_constraints(r, seed);
    if (r.objective != Objective::min_cost || !std::isfinite(r.deadline_s)) continue;
    const SearchResult res = srift::search(r);
    for (const Plan& p : res.plans) {
      EXPECT_GE(p.deadline_probability, r.deadline_confidence - 1e-12) << "seed " << seed << " " << describe(p);
      if (!p.band.known()) continue;  // the slowest group's compute band is unknown
      EXPECT_LE(p.band.p10_s, p.iteration.iteration_s);
      EXPECT_GE(p.band.p90_s, p.iteration.iteration_s);
    }
    SearchRequest looser = r;
    looser.deadline_confidence = 0;
    const SearchResult loose = srift::search(looser);
    if (!res.plans.empty()) {
      ASSERT_FALSE(loose.plans.empty()) << "seed " << seed;
      EXPECT_LE(loose.plans[0].total_usd, res.plans[0].total_usd) << "seed " << seed;
    }
    if (res.plans.empty() && !res.closest.groups.empty() && res.why_none.find("meets the deadline") != std::string::npos) {
      EXPECT_NE(res.why_none.find("with probability"), std::string::npos) << res.why_none;  // not when a budget binds
    }
    ++tested;
  }
  EXPECT_GT(tested, 20);
}

TEST(Search, WhyNoneNamesTheHeldGroupThatBoundsEveryPlan) {
  // `srift replan` holds a 1-GPU instance with a slow NIC: every plan keeps it, so its link
  // bounds every plan's allreduce, and the answer says so.
  SearchRequest r;
  r.workload.bucket_bytes = {5e7, 5e7};
  r.workload.bucket_ready_fraction = {0.5, 1.0};
  r.workload.fixed_memory_bytes = 2e9;
  r.workload.activation_bytes_per_sample = 1e8;
  for (const char* name : {"small", "big"}) {
    srift::InstanceSpec s;
    s.name = name;
    s.gpus = 1;
    s.gpu_memory_bytes = 24e9;
    s.intra = {1e11, 5e-6};
    s.network = {std::string(name) == "small" ? 3e8 : 1.2e10, 3e-5};
    r.instances.push_back(s);
    Offer o;
    o.instance = static_cast<int>(r.instances.size()) - 1;
    o.usd_per_hour = 1.0;
    o.max_count = 4;
    o.compute.forward_per_sample_s = 1e-2;  // 1.9 s an iteration alone: more GPUs pay off
    o.compute.backward_per_sample_s = 2e-2;
    r.offers.push_back(o);
  }
  r.global_batch = 64;
  r.iterations = 1e4;
  r.max_types = 2;
  r.held = {{0, 1}};
  r.deadline_s = 60;  // nothing trains 10k iterations in a minute
  const SearchResult res = srift::search(r);
  ASSERT_TRUE(res.plans.empty());
  EXPECT_NE(res.why_none.find("every plan keeps the held 1x small"), std::string::npos) << res.why_none;
  EXPECT_NE(res.why_none.find("network link of small (0.3 GB/s) bounds the allreduce"), std::string::npos)
      << res.why_none;
  r.objective = Objective::max_throughput;
  r.budget_usd = 1e-3;
  const SearchResult broke = srift::search(r);
  ASSERT_TRUE(broke.plans.empty());
  EXPECT_NE(broke.why_none.find("no plan fits the budget"), std::string::npos) << broke.why_none;
  EXPECT_NE(broke.why_none.find("every plan keeps the held 1x small"), std::string::npos) << broke.why_none;
  r.held.clear();
  r.objective = Objective::min_cost;
  r.budget_usd = std::numeric_limits<double>::infinity();
  EXPECT_EQ(srift::search(r).why_none.find("held"), std::string::npos);
}

TEST(Search, WhyNoneNamesAHeldGroupTheLimitsExclude) {
  // Every plan keeps the held group, so a held group past the request's own limits leaves
  // nothing to search: the answer names the group and the limit, not the batch.
  SearchRequest r = one_type_request("quad", 4, 24.0);
  r.global_batch = 64;
  r.iterations = 1e4;
  r.max_types = 2;
  r.deadline_s = 1e12;
  auto why = [&]() {
    const SearchResult bb = srift::search(r);
    const SearchResult ex = srift::search_exhaustive(r);
    EXPECT_TRUE(bb.plans.empty());
    EXPECT_EQ(bb.why_none, ex.why_none);
    return bb.why_none;
  };
  r.held = {{0, 2}};
  ASSERT_FALSE(srift::search(r).plans.empty());  // the limits hold it: plans exist

  r.held = {{0, 5}};
  EXPECT_NE(why().find("held 5x quad, more than that offer's cap of 4 instances"), std::string::npos);
  r.held = {{0, 2}};
  r.min_gpu_memory_bytes = 40.0 * (1u << 30);
  EXPECT_NE(why().find("held 2x quad, whose GPUs have 24 GiB, below min_gpu_memory (40 GiB)"), std::string::npos);
  r.min_gpu_memory_bytes = 0;
  r.workload.fixed_memory_bytes = 30e9;
  EXPECT_NE(why().find("held 2x quad, whose GPUs cannot hold the model and one sample"), std::string::npos);
  r.workload.fixed_memory_bytes = 2e9;
  r.max_instances = 1;
  EXPECT_NE(why().find("held groups' 2 instances, more than max_instances (1)"), std::string::npos);
  r.max_instances = 1 << 30;
  r.global_batch = 6;
  EXPECT_NE(why().find("held groups' 8 GPUs, more than the global batch of 6 samples"), std::string::npos);
}

TEST(Search, EqualsExhaustiveWithHeldGroups) {
  int tested = 0;
  for (std::uint64_t seed = 1000; seed < 1200; ++seed) {
    SearchRequest r = random_request(seed);
    r.max_types = std::max(r.max_types, 2);
    // Hold one or two offers of the first region that has any.
    std::vector<int> candidates;
    for (int i = 0; i < static_cast<int>(r.offers.size()); ++i) {
      if (r.offers[i].max_count > 0 && r.offers[i].region == r.offers[0].region) candidates.push_back(i);
    }
    if (candidates.empty()) continue;
    r.held.push_back({candidates[0], 1 + static_cast<int>(seed % r.offers[candidates[0]].max_count)});
    if (candidates.size() > 1 && seed % 3 == 0) r.held.push_back({candidates.back(), 1});
    bind_constraints(r, seed);
    const SearchResult ex = srift::search_exhaustive(r);
    const SearchResult bb = srift::search(r);
    expect_same(r, ex, bb, seed);
    for (const Plan& p : bb.plans) {
      for (const PlanGroup& h : r.held) {
        bool found = false;
        for (const PlanGroup& g : p.groups) found = found || (g.offer == h.offer && g.count >= h.count);
        EXPECT_TRUE(found) << "held offer " << h.offer << " missing from " << describe(p);
      }
    }
    ++tested;
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(tested, 100);
}

TEST(Search, ThreadsGiveTheSameAnswer) {
  for (std::uint64_t seed = 2000; seed < 2030; ++seed) {
    SearchRequest r = random_request(seed);
    bind_constraints(r, seed);
    const SearchResult one = srift::search(r);
    r.threads = 3;
    const SearchResult three = srift::search(r);
    expect_same(r, one, three, seed);
  }
}

TEST(Search, ThreeTypeMixesAreFoundWhenTheyWin) {
  // Three offers whose memory forces a mix: each holds a third of the batch.
  SearchRequest r = random_request(7);
  r.offers.clear();
  r.instances.resize(1);
  r.instances[0].gpus = 1;
  r.instances[0].gpu_memory_bytes = 40e9;
  r.workload.fixed_memory_bytes = 2e9;
  r.workload.activation_bytes_per_sample = (0.95 * 40e9 - 2e9) / 10.0;  // 10 samples per GPU
  r.global_batch = 30;
  for (int i = 0; i < 3; ++i) {
    Offer o;
    o.instance = 0;
    o.usd_per_hour = 1 + i;
    o.max_count = 1;
    o.compute.forward_per_sample_s = 1e-3;
    o.compute.backward_per_sample_s = 2e-3;
    r.offers.push_back(o);
  }
  r.max_types = 3;
  r.objective = Objective::min_cost;
  r.deadline_s = 1e12;
  r.max_instances = 1 << 30;
  r.min_gpu_memory_bytes = 0;
  r.held.clear();
  const SearchResult bb = srift::search(r);
  ASSERT_EQ(bb.plans.size(), 1u);
  EXPECT_EQ(bb.plans[0].groups.size(), 3u);
  expect_same(r, srift::search_exhaustive(r), bb, 7);
}

TEST(Search, CancelledBeforeStartReportsAGap) {
  SearchRequest r = random_request(11);
  r.objective = Objective::max_throughput;
  CancelToken token;
  token.cancel();
  const SearchResult res = srift::search(r, &token);
  EXPECT_TRUE(res.stats.cancelled);
  if (!res.optimal) {
    EXPECT_GT(res.gap, 0.0);
  }
}

TEST(Search, TimeLimitStopsWithTheBestFound) {
  // A large space and a tiny limit: the search stops, says so and bounds its gap.
  SearchRequest r = random_request(12);
  r.offers.clear();
  for (int region = 0; region < 20; ++region) {
    for (int i = 0; i < static_cast<int>(r.instances.size()); ++i) {
      Offer o;
      o.instance = i;
      o.region = region;
      o.usd_per_hour = 1 + 0.1 * region + i;
      o.max_count = 64;
      o.compute.forward_per_sample_s = 1e-3 * (1 + i);
      o.compute.backward_per_sample_s = 2e-3;
      r.offers.push_back(o);
    }
  }
  r.global_batch = 4096;
  r.workload.activation_bytes_per_sample = 1e6;
  r.max_types = 3;
  r.time_limit_s = 1e-6;
  r.objective = Objective::max_throughput;
  const SearchResult res = srift::search(r);
  EXPECT_TRUE(res.stats.cancelled);
  EXPECT_FALSE(res.optimal);
  EXPECT_TRUE(res.gap >= 0.0);
}

TEST(Search, RejectsBadInputNamingTheField) {
  SearchRequest r = random_request(3);
  r.max_types = srift::kMaxGroups + 1;
  EXPECT_THROW(
      {
        try {
          srift::search(r);
        } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find("max_types"), std::string::npos);
          throw;
        }
      },
      std::invalid_argument);
  r = random_request(3);
  r.held.push_back({static_cast<int>(r.offers.size()) + 5, 1});
  EXPECT_THROW(srift::search(r), std::out_of_range);
  r = random_request(3);
  if (!r.offers.empty()) {
    r.held = {{0, 0}};
    EXPECT_THROW(srift::search(r), std::invalid_argument);
  }
  r = random_request(3);
  r.time_limit_s = 0;
  EXPECT_THROW(srift::search(r), std::invalid_argument);
  r = random_request(3);
  r.deadline_confidence = 1.0;
  EXPECT_THROW(srift::search(r), std::invalid_argument);
  r.deadline_confidence = 0.3;  // a deadline met less often than not: refused
  EXPECT_THROW(srift::search(r), std::invalid_argument);
  r = random_request(3);
  if (!r.offers.empty()) {
    r.offers[0].band.compute = {0.9, 0.95};
    try {
      srift::search(r);
      ADD_FAILURE() << "expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("offers[0].band.compute.p90"), std::string::npos) << e.what();
    }
  }
  r = random_request(3);
  if (!r.offers.empty()) {
    r.offers[0].interruptions_per_hour = -1;
    EXPECT_THROW(srift::search(r), std::invalid_argument);
  }
  // fewer than one iteration: 1e-322 underflowed every plan's totals to 0 and the search,
  // its bounds all 0, pruned nothing
  for (double iterations : {1e-322, 0.5, 0.0}) {
    r = random_request(3);
    r.iterations = iterations;
    try {
      srift::search(r);
      ADD_FAILURE() << "expected std::invalid_argument for iterations " << iterations;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("iterations must be finite and >= 1"), std::string::npos) << e.what();
    }
  }
}

// Two 1-GPU types in one region: "slow" at $1/h and "fast" (four times the speed) at $8/h,
// up to 4 instances each.
SearchRequest slow_and_fast_request() {
  SearchRequest r = one_type_request("slow", 1, 24.0);
  r.instances.push_back(r.instances[0]);
  r.instances[1].name = "fast";
  Offer fast = r.offers[0];
  fast.instance = 1;
  fast.usd_per_hour = 8.0;
  fast.compute.forward_per_sample_s /= 4;
  fast.compute.backward_per_sample_s /= 4;
  r.offers.push_back(fast);
  r.global_batch = 64;
  r.iterations = 1e4;
  r.max_types = 2;
  return r;
}

// Both searches give the same closest plan and sentence; returns the B&B's result.
SearchResult no_plan(const SearchRequest& r) {
  const SearchResult bb = srift::search(r);
  const SearchResult ex = srift::search_exhaustive(r);
  EXPECT_TRUE(bb.plans.empty());
  EXPECT_TRUE(ex.plans.empty());
  expect_same_plan(ex.closest, bb.closest, "closest");
  EXPECT_EQ(ex.why_none, bb.why_none);
  return bb;
}

TEST(Search, WhyNoneNamesTheLimitThatBinds) {
  // Review finding 3: the closest plan was searched with the budget and the hourly cap lifted,
  // and the sentence said "the fastest takes 0.475 h (within the budget limits)" when 0.475 h
  // met the deadline and the plan cost $569/h against a $1.5/h cap.
  SearchRequest r = slow_and_fast_request();
  const double fastest = srift::search_exhaustive([&] {
                           SearchRequest q = r;
                           q.objective = Objective::max_throughput;
                           return q;
                         }()).plans.at(0).total_s;
  // The deadline only plans over the cap meet: the closest is the fastest within the cap.
  r.deadline_s = fastest * 1.01;
  r.max_usd_per_hour = 5;
  SearchResult res = no_plan(r);
  EXPECT_LE(res.closest.iteration.usd_per_hour, 5.0);
  EXPECT_GT(res.closest.total_s, r.deadline_s);
  EXPECT_NE(res.why_none.find("no plan within the hourly cap of USD 5/h meets the deadline of"), std::string::npos)
      << res.why_none;
  EXPECT_NE(res.why_none.find("; the fastest within it takes"), std::string::npos) << res.why_none;
  EXPECT_NE(res.why_none.find("; with no hourly cap the fastest takes"), std::string::npos) << res.why_none;
  EXPECT_EQ(res.why_none.find("budget limits"), std::string::npos) << res.why_none;
  // A cap below every offer's price admits no plan: say so, give the least rate any plan runs
  // at, and show that plan, over the cap. A budget that is not the reason is not named.
  r.max_usd_per_hour = 0.5;
  r.budget_usd = 1e9;
  for (Objective objective : {Objective::min_cost, Objective::max_throughput}) {
    r.objective = objective;
    res = no_plan(r);
    EXPECT_EQ(res.why_none,
              "no plan runs within the hourly cap of USD 0.5/h: the least any plan runs at is USD 1/h (the "
              "closest, over the cap)");
    ASSERT_EQ(res.closest.groups.size(), 1u);
    EXPECT_EQ(res.closest.groups[0].offer, 0);
    EXPECT_EQ(res.closest.groups[0].count, 1);
  }
  // A budget no plan within the cap fits: the budget binds; the closest is the cheapest plan
  // within the cap, whether or not a deadline is set too.
  r.max_usd_per_hour = 5;
  r.budget_usd = 1e-3;
  for (Objective objective : {Objective::min_cost, Objective::max_throughput}) {
    r.objective = objective;
    r.deadline_s = objective == Objective::min_cost ? fastest * 1.01 : std::numeric_limits<double>::infinity();
    res = no_plan(r);
    EXPECT_NE(res.why_none.find("no plan fits the budget of USD 0.001; the cheapest within the hourly cap of USD "
                                "5/h costs USD"),
              std::string::npos)
        << res.why_none;
    EXPECT_LE(res.closest.iteration.usd_per_hour, 5.0);
  }
  // No limit besides the deadline: the fastest plan, and no limits named.
  r.objective = Objective::min_cost;
  r.budget_usd = r.max_usd_per_hour = std::numeric_limits<double>::infinity();
  r.deadline_s = fastest * 0.5;
  res = no_plan(r);
  EXPECT_EQ(res.closest.total_s, fastest);
  EXPECT_EQ(res.why_none.rfind("no plan meets the deadline of ", 0), 0u) << res.why_none;
  EXPECT_EQ(res.why_none.find("within"), std::string::npos) << res.why_none;
  // durations as a person reads them: seconds, minutes, hours ("0.000278 h" for 1 s before)
  r.deadline_s = 1.0;
  EXPECT_EQ(no_plan(r).why_none.rfind("no plan meets the deadline of 1 s", 0), 0u) << no_plan(r).why_none;
  r.deadline_s = 90.0;
  EXPECT_EQ(no_plan(r).why_none.rfind("no plan meets the deadline of 1.5 min", 0), 0u) << no_plan(r).why_none;
}

TEST(Search, WhyNoneNamesTheMinimumGpuMemory) {
  // Review finding 6: with min_gpu_memory above every offered GPU the answer blamed the batch
  // and suggested gradient accumulation.
  SearchRequest r = slow_and_fast_request();
  r.deadline_s = 1e12;
  r.min_gpu_memory_bytes = 100.0 * (1u << 30);
  for (int steps : {1, 8}) {
    r.max_accumulation_steps = steps;
    const SearchResult bb = srift::search(r);
    ASSERT_TRUE(bb.plans.empty());
    EXPECT_EQ(bb.why_none, srift::search_exhaustive(r).why_none);
    EXPECT_EQ(bb.why_none,
              "no offer has GPUs of at least 100 GiB (min_gpu_memory): the largest GPU offered has 24 GiB; lower "
              "the minimum or offer larger GPUs (other regions or types)");
  }
  // A minimum some offer meets leaves the batch as the reason, and names the minimum.
  r.instances[1].gpu_memory_bytes = 40.0 * (1u << 30);
  r.min_gpu_memory_bytes = 32.0 * (1u << 30);
  r.global_batch = 1 << 20;
  r.max_accumulation_steps = 1;
  const SearchResult big = srift::search(r);
  ASSERT_TRUE(big.plans.empty());
  EXPECT_NE(big.why_none.find("GPUs of at least 32 GiB) holds the global batch"), std::string::npos) << big.why_none;
}

TEST(Search, ParetoTiesAreStoodForByTheExhaustiveSearchsPlan) {
  // Review finding 8: two offers alike in all but region tie on every plan. The B&B meets
  // region 0's first (offer 1), and kept it, where search_exhaustive and pareto_front()'s
  // tie-break keep the lower offer index (offer 0), on any number of threads.
  SearchRequest r = one_type_request("same", 2, 24.0);
  r.offers.push_back(r.offers[0]);
  r.offers[0].region = 1;
  r.offers[1].region = 0;
  r.global_batch = 64;
  r.iterations = 1e4;
  r.max_types = 1;
  r.collect_pareto = true;
  r.top_k = 1;
  const SearchResult ex = srift::search_exhaustive(r);
  ASSERT_GT(ex.pareto.size(), 1u);
  for (const Plan& p : ex.pareto) EXPECT_EQ(p.groups.at(0).offer, 0);
  for (int threads : {1, 2, 4}) {
    r.threads = threads;
    for (int run = 0; run < 5; ++run) {
      const SearchResult bb = srift::search(r);
      ASSERT_EQ(bb.pareto.size(), ex.pareto.size());
      for (std::size_t i = 0; i < ex.pareto.size(); ++i) {
        expect_same_plan(ex.pareto[i], bb.pareto[i], "threads " + std::to_string(threads));
      }
    }
  }
}

TEST(Search, NoOffersSaysWhy) {
  SearchRequest r = random_request(5);
  r.offers.clear();
  const SearchResult res = srift::search(r);
  EXPECT_TRUE(res.plans.empty());
  EXPECT_NE(res.why_none.find("no offers"), std::string::npos);
}

}  // namespace

TEST(Search, WhyNoneSaysWhenTheModelFitsNoGpuOffered) {
  // Note "model too large": DDP keeps a whole copy of the model's state on every GPU, so when
  // no offered GPU holds it and one sample, the reason is the model, not the limits or batch.
  SearchRequest r;
  r.workload.bucket_bytes = {5e7};
  r.workload.bucket_ready_fraction = {1.0};
  r.workload.fixed_memory_bytes = 100.0 * (1u << 30);
  r.workload.activation_bytes_per_sample = 2.0 * (1u << 20);
  for (double gib : {24.0, 80.0}) {
    srift::InstanceSpec s;
    s.name = gib < 50 ? "small" : "big";
    s.gpus = 8;
    s.gpu_memory_bytes = gib * (1u << 30);
    s.intra = {1e11, 5e-6};
    s.network = {1.2e10, 3e-5};
    r.instances.push_back(s);
    Offer o;
    o.instance = static_cast<int>(r.instances.size()) - 1;
    o.usd_per_hour = 1.0;
    o.max_count = 4;
    o.compute.forward_per_sample_s = 1e-2;
    o.compute.backward_per_sample_s = 2e-2;
    r.offers.push_back(o);
  }
  r.global_batch = 64;
  r.iterations = 1e4;
  r.max_types = 2;
  r.deadline_s = 1e12;
  r.max_accumulation_steps = 64;
  const SearchResult bb = srift::search(r);
  ASSERT_TRUE(bb.plans.empty());
  EXPECT_EQ(bb.why_none, srift::search_exhaustive(r).why_none);
  EXPECT_NE(bb.why_none.find("workspace take 100 GiB on every GPU (DDP keeps a whole copy per rank) plus 2 MiB per "
                             "sample, and the largest GPU offered has 80 GiB, 76 of them usable"),
            std::string::npos)
      << bb.why_none;
  r.workload.fixed_memory_bytes = 70.0 * (1u << 30);  // the big GPU holds it: the batch is the reason again
  const SearchResult fits = srift::search(r);
  EXPECT_FALSE(fits.plans.empty()) << fits.why_none;
}

TEST(Search, EnumValuesOutsideTheirRangeAreRefused) {
  // Objective(5) was searched as max_throughput and Market(7) priced as spot.
  SearchRequest r = one_type_request("one", 1, 24.0);
  r.global_batch = 8;
  r.iterations = 10;
  ASSERT_NO_THROW(srift::search(r));
  r.objective = static_cast<Objective>(5);
  EXPECT_THROW(srift::search(r), std::invalid_argument);
  r.objective = Objective::min_cost;
  r.offers[0].market = static_cast<srift::Market>(7);
  try {
    srift::search(r);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("offers[0].market"), std::string::npos) << e.what();
  }
}

TEST(Search, PlanTotalsNamesAGroupThatIndexesNoOffer) {
  SearchRequest r = one_type_request("one", 1, 24.0);
  r.global_batch = 8;
  r.iterations = 10;
  srift::Plan plan = srift::search(r).plans.at(0);
  plan.groups[0].offer = 3;
  try {
    srift::plan_totals(r, plan);
    FAIL() << "no throw";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("plan.groups[0].offer must index request.offers (size 1), got 3"),
              std::string::npos)
        << e.what();
  }
}

TEST(Search, StatsCountEveryPlanSimulatedOnceWhenNothingMeetsTheDeadline) {
  // The closest-plan pass added its evaluations but not its feasible plans.
  SearchRequest r = one_type_request("one", 1, 24.0);
  r.global_batch = 8;
  r.iterations = 1e6;
  r.deadline_s = 1;  // nothing trains a million iterations in a second
  const SearchResult res = srift::search(r);
  ASSERT_TRUE(res.plans.empty());
  ASSERT_FALSE(res.closest.groups.empty());
  const srift::SearchStats& s = res.stats;
  EXPECT_GT(s.feasible, 0u);
  EXPECT_EQ(s.evaluated, s.feasible + s.infeasible_memory + s.infeasible_batch);
}

TEST(Search, RanksPastAnIntStopTheEnumerationNotCrashIt) {
  // 3 instances of 2^30 GPUs: search_exhaustive's GPUs x count wrapped in an int, the
  // simulator's rank count with it, and the batch split divided by 0 (SIGFPE).
  SearchRequest r = one_type_request("huge", 1 << 30, 24.0);
  r.workload.activation_bytes_per_sample = 0;
  r.offers[0].max_count = 3;
  r.global_batch = INT_MAX;
  r.iterations = 1;
  r.max_types = 1;
  const SearchResult ex = srift::search_exhaustive(r);
  const SearchResult bb = srift::search(r);
  ASSERT_EQ(ex.plans.size(), 1u);
  EXPECT_EQ(ex.plans[0].groups[0].count, 1);  // two would be 2^31 ranks, more than the batch
  EXPECT_EQ(ex.plans[0].iteration.workers, 1 << 30);
  expect_same(r, ex, bb, 0);
  // and a count cap of INT_MAX on one GPU: the count loop stops at the batch, not past INT_MAX
  r.instances[0].gpus = 1;
  r.offers[0].max_count = INT_MAX;
  r.global_batch = 3;
  r.max_instances = INT_MAX;
  EXPECT_EQ(srift::search_exhaustive(r).stats.evaluated, 3u);
}

TEST(Search, HeldGroupsPastAnIntOfRanksAreRefused) {
  // simulate() refuses more than INT_MAX ranks; every plan holds the held groups, so the
  // request does too (bnb's sums of them overflowed an int).
  SearchRequest r = one_type_request("one", 1, 24.0);
  r.workload.activation_bytes_per_sample = 0;
  r.offers[0].max_count = INT_MAX;
  r.offers.push_back(r.offers[0]);
  r.global_batch = INT_MAX;
  r.max_instances = INT_MAX;
  r.iterations = 1;
  r.held = {{0, 1 << 30}, {1, 1 << 30}};
  try {
    srift::search(r);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("held[1].count (workers: instances x GPUs over the held groups) must be "
                                         "<= 2147483647, got 2147483648"),
              std::string::npos)
        << e.what();
  }
  // INT_MAX ranks held in all: searched, each count at its least (one more is past the batch)
  r.held = {{0, 1 << 30}, {1, (1 << 30) - 1}};
  const SearchResult bb = srift::search(r);
  ASSERT_EQ(bb.plans.size(), 1u) << bb.why_none;
  ASSERT_EQ(bb.plans[0].groups.size(), 2u);
  EXPECT_EQ(bb.plans[0].groups[0].count, 1 << 30);
  EXPECT_EQ(bb.plans[0].groups[1].count, (1 << 30) - 1);
  EXPECT_EQ(bb.plans[0].iteration.workers, INT_MAX);
}

TEST(Search, PlanTotalsNamesAnOfferWhoseInstanceIndexesNothing) {
  // An unvalidated request: plan_band read request.instances[5] of an empty vector (SEGV).
  SearchRequest r = one_type_request("one", 1, 24.0);
  r.global_batch = 8;
  r.iterations = 10;
  r.deadline_s = 100;
  r.offers[0].band.compute = {0.9, 1.1};
  srift::Plan plan = srift::search(r).plans.at(0);
  r.offers[0].instance = 5;
  r.instances.clear();
  try {
    srift::plan_totals(r, plan);
    FAIL() << "no throw";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("request.offers[0].instance must index request.instances (size 0), got 5"),
              std::string::npos)
        << e.what();
  }
}

// Many regions of one offer each: a task per region, so every thread gets work.
// The same plans, best first, bit for bit (search_exhaustive keeps no stats.space).
static void expect_same_plans(const SearchResult& a, const SearchResult& b, const std::string& what) {
  ASSERT_EQ(a.plans.size(), b.plans.size()) << what;
  for (std::size_t i = 0; i < a.plans.size(); ++i) expect_same_plan(a.plans[i], b.plans[i], what);
}

static SearchRequest many_region_request(int regions) {
  SearchRequest r = one_type_request("one", 1, 24.0);
  const Offer base = r.offers[0];
  r.offers.clear();
  for (int k = 0; k < regions; ++k) {
    Offer o = base;
    o.region = k;
    o.usd_per_hour = 1 + 1e-3 * k;
    o.max_count = 2;
    r.offers.push_back(o);
  }
  r.global_batch = 16;
  r.iterations = 10;
  r.max_types = 1;
  r.top_k = 3;
  return r;
}

TEST(Search, ThreadsPastTheCoresAreCappedNotStarted) {
  // threads = INT_MAX asked the OS for one thread per task (Python accepts up to 2^31 - 1).
  SearchRequest r = many_region_request(64);
  const SearchResult one = srift::search(r);
  const SearchResult one_ex = srift::search_exhaustive(r);
  r.threads = INT_MAX;
  expect_same(r, one, srift::search(r), 1);
  expect_same_plans(one_ex, srift::search_exhaustive(r), "exhaustive");
}

#ifdef SRIFT_TEST_THREAD_LIMITS
namespace {

double vm_size_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "VmSize:", 7) == 0) kib = std::atof(line + 7);
  }
  std::fclose(f);
  return kib * 1024;
}

// Room in the address space for the stacks of one or two more threads (256 MiB each), no
// more: std::thread then throws std::system_error (EAGAIN) part-way through a search's pool,
// as it does under a container's pids limit. Restores the limits when it goes.
class RoomForTwoThreads {
 public:
  static constexpr std::size_t kStack = std::size_t{256} << 20;
  RoomForTwoThreads() {
    ok_ = pthread_getattr_default_np(&old_attr_) == 0 && getrlimit(RLIMIT_AS, &old_limit_) == 0;
    if (!ok_) return;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kStack);
    attr_set_ = pthread_setattr_default_np(&attr) == 0;
    pthread_attr_destroy(&attr);
    rlimit limit = old_limit_;
    limit.rlim_cur = static_cast<rlim_t>(vm_size_bytes() + 2.5 * kStack);
    ok_ = attr_set_ && vm_size_bytes() > 0 &&
          (old_limit_.rlim_max == RLIM_INFINITY || limit.rlim_cur <= old_limit_.rlim_max) &&
          setrlimit(RLIMIT_AS, &limit) == 0;
    limit_set_ = ok_;
  }
  ~RoomForTwoThreads() {
    if (limit_set_) setrlimit(RLIMIT_AS, &old_limit_);
    if (attr_set_) pthread_setattr_default_np(&old_attr_);
    pthread_attr_destroy(&old_attr_);
  }
  bool ok() const { return ok_; }

 private:
  pthread_attr_t old_attr_;
  rlimit old_limit_{};
  bool ok_ = false, attr_set_ = false, limit_set_ = false;
};

// How many threads the process can start at once now (at most `most`), all joined again.
int startable_threads(int most) {
  std::vector<std::thread> started;
  started.reserve(static_cast<std::size_t>(most));
  std::atomic<bool> go{false};
  try {
    for (int i = 0; i < most; ++i) started.emplace_back([&go] { while (!go.load()) std::this_thread::yield(); });
  } catch (const std::system_error&) {
  }
  go.store(true);
  for (std::thread& t : started) t.join();
  return static_cast<int>(started.size());
}

}  // namespace

TEST(Search, ThreadsTheOsRefusesLeaveTheirWorkToTheCaller) {
  // std::thread threw std::system_error while the pool's vector held running threads, whose
  // destructors then called std::terminate: the embedding program aborted.
  SearchRequest r = many_region_request(64);
  const SearchResult one = srift::search(r);
  const SearchResult one_ex = srift::search_exhaustive(r);
  r.threads = 8;
  SearchResult bb, ex;
  int startable = 0;
  {
    RoomForTwoThreads room;
    if (!room.ok()) GTEST_SKIP() << "cannot limit the address space here";
    startable = startable_threads(8);
    if (startable >= 8) GTEST_SKIP() << "the limit did not bind";
    bb = srift::search(r);
    ex = srift::search_exhaustive(r);
  }
  EXPECT_LT(startable, 8);
  expect_same(r, one, bb, 3);
  expect_same_plans(one_ex, ex, "exhaustive");
}
#endif

namespace {
// A plan whose iteration overflows to +inf is never a "feasible" plan of infinite time: the
// exhaustive search, which simulates it, says so naming the offer; the B&B's bounds, infinite
// too, cut it unsimulated, and it answers that no plan runs.
TEST(Search, AnOfferWhoseIterationOverflowsIsAnError) {
  SearchRequest r = one_type_request("huge.slope", 1, 80);
  r.offers[0].compute.forward_per_sample_s = r.offers[0].compute.backward_per_sample_s = 0.5e308;
  r.global_batch = 8;
  r.iterations = 10;
  try {
    srift::search_exhaustive(r, nullptr);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("offers[0] (huge.slope)"), std::string::npos) << what;
    EXPECT_NE(what.find("iteration time overflows"), std::string::npos) << what;
  }
  try {
    const SearchResult b = srift::search(r, nullptr);
    EXPECT_TRUE(b.plans.empty());
    for (const Plan& p : b.plans) EXPECT_TRUE(std::isfinite(p.iteration.iteration_s));
    EXPECT_FALSE(b.why_none.empty());
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("iteration time overflows"), std::string::npos) << e.what();
  }
}

// A price or a run past a double's range was ranked as a plan of infinite cost or time (an
// unbounded deadline or budget took it); the space's count past 2^64 did not convert.
TEST(Search, TotalsPastADoubleAreAnErrorAndAHugeSpaceSaturatesItsCount) {
  SearchRequest r = one_type_request("i", 1, 16);
  r.global_batch = 64;
  r.iterations = 1000;
  r.offers[0].usd_per_hour = 1e308;  // x the run's hours, or x 4 instances, overflows
  try {
    srift::search(r);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
  }

  r.offers[0].usd_per_hour = 1.0;
  r.offers[0].compute.forward_fixed_s = 100;
  r.iterations = 1e307;  // x an iteration of over 100 s
  try {
    srift::search(r);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("run overflows"), std::string::npos) << e.what();
  }
  EXPECT_THROW(srift::search_exhaustive(r), std::invalid_argument);
  // each finite, the price times the run is not (a budget-free fastest-plan question ranked
  // four plans of $inf)
  r = one_type_request("i", 1, 16);
  r.global_batch = 64;
  r.iterations = 1e12;
  r.offers[0].usd_per_hour = 1e200;
  r.offers[0].compute.forward_fixed_s = 1e100;
  r.objective = srift::Objective::max_throughput;
  try {
    srift::search(r);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cost overflows"), std::string::npos) << e.what();
  }

  SearchRequest wide = one_type_request("i", 1, 16);
  wide.workload.activation_bytes_per_sample = 1;
  wide.offers[0].max_count = INT_MAX;
  wide.offers = {wide.offers[0], wide.offers[0], wide.offers[0]};
  wide.global_batch = INT_MAX;
  wide.max_instances = INT_MAX;
  wide.iterations = 1000;
  wide.max_types = 3;
  wide.time_limit_s = 0.3;  // the count is of the space, whatever part was searched
  const SearchResult res = srift::search(wide);
  ASSERT_GT(res.stats.space, 1.9e19);
  EXPECT_EQ(res.stats.pruned, std::numeric_limits<std::uint64_t>::max());
}

TEST(Search, PlanRateNamesABadGroupOffer) {
  const SearchRequest r = one_type_request("i", 1, 16);
  try {
    srift::plan_interruptions_per_hour(r, {{-1, 1}});
    FAIL() << "expected std::out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("groups[0].offer"), std::string::npos) << e.what();
  }
}
}  // namespace
