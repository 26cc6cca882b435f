// Invariants of the iteration simulator (DESIGN.md, "The iteration model").
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "srift/srift.hpp"

namespace {

using srift::ComputeModel;
using srift::GroupSpec;
using srift::InstanceSpec;
using srift::IterationResult;
using srift::LinkSpec;
using srift::SimOptions;
using srift::Workload;

InstanceSpec instance(int gpus, double nic_gbps, double memory_gib = 16) {
  InstanceSpec s;
  s.name = "test." + std::to_string(gpus) + "g";
  s.gpus = gpus;
  s.gpu_memory_bytes = memory_gib * (1ull << 30);
  s.intra = LinkSpec{100e9, 5e-6};
  s.network = LinkSpec{nic_gbps * 1e9 / 8, 30e-6};
  return s;
}

ComputeModel compute(double per_sample_s, double fixed_s = 2e-3, double optimizer_s = 4e-3) {
  ComputeModel c;
  c.forward_fixed_s = fixed_s / 3;
  c.backward_fixed_s = 2 * fixed_s / 3;
  c.forward_per_sample_s = per_sample_s / 3;
  c.backward_per_sample_s = 2 * per_sample_s / 3;
  c.optimizer_s = optimizer_s;
  return c;
}

Workload resnet_like() {
  Workload w;
  w.bucket_bytes = {1.0e6, 25.0e6, 25.0e6, 25.0e6, 26.2e6};
  w.bucket_ready_fraction = {0.05, 0.25, 0.5, 0.8, 0.97};
  w.fixed_memory_bytes = 2.5e9;
  w.activation_bytes_per_sample = 1.0e8;
  return w;
}

IterationResult run(const Workload& w, const std::vector<GroupSpec>& groups, int batch) {
  SimOptions o;
  o.global_batch = batch;
  return srift::simulate(w, groups, o);
}

TEST(Simulator, OneWorkerHasNoCommunication) {
  const InstanceSpec one = instance(1, 25);
  const IterationResult r = run(resnet_like(), {{&one, 1, compute(1e-3), 3.06}}, 32);
  ASSERT_TRUE(r.feasible());
  EXPECT_EQ(r.workers, 1);
  EXPECT_DOUBLE_EQ(r.comm_s, 0.0);
  EXPECT_DOUBLE_EQ(r.exposed_comm_s, 0.0);
  // fixed 2 ms + 32 x 1 ms + optimizer 4 ms
  EXPECT_NEAR(r.iteration_s, 0.002 + 0.032 + 0.004, 1e-12);
  EXPECT_NEAR(r.samples_per_s, 32 / r.iteration_s, 1e-9);
  EXPECT_NEAR(r.usd_per_iteration, 3.06 * r.iteration_s / 3600, 1e-15);
}

TEST(Simulator, RingAllreduceFormula) {
  const LinkSpec link{10e9, 20e-6};
  // 2 (n-1)/n * S / B + 2 (n-1) * alpha with n = 4, S = 100 MB
  EXPECT_NEAR(srift::ring_allreduce_s(100e6, 4, link), 1.5 * 100e6 / 10e9 + 6 * 20e-6, 1e-15);
  EXPECT_DOUBLE_EQ(srift::ring_allreduce_s(100e6, 1, link), 0.0);
  EXPECT_DOUBLE_EQ(srift::ring_allreduce_s(0, 4, link), 0.0);  // no bytes: no collective
  // Out of range: an error naming the field, not 0 or NaN.
  const auto names = [&](double bytes, int ranks, LinkSpec l, const char* field) {
    try {
      srift::ring_allreduce_s(bytes, ranks, l);
      ADD_FAILURE() << "expected std::invalid_argument for " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  names(100e6, 0, link, "ranks");
  names(100e6, -3, link, "ranks");
  names(std::nan(""), 4, link, "bytes");
  names(-1, 4, link, "bytes");
  names(100e6, 4, LinkSpec{0, 20e-6}, "link.bandwidth");
  names(100e6, 4, LinkSpec{10e9, std::nan("")}, "link.latency");
  // finite inputs whose time overflows: an error, not +inf
  names(1e308, 2, LinkSpec{1e-300, 0}, "ring_allreduce_s: the time of 1e+308 bytes");
  EXPECT_THROW(srift::ring_broadcast_s(1e308, 2, LinkSpec{1e-10, 0}), std::invalid_argument);
  srift::GpuSpec slow;
  slow.name = "slow";
  slow.memory_bytes = 1e9;
  slow.fp32_flops = 1e12;
  slow.memory_bandwidth = 1;
  EXPECT_THROW(srift::gradient_accumulate_s(1e308, slow), std::invalid_argument);
}

TEST(Simulator, IterationBoundsHoldOnRandomClusters) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> per_sample(2e-4, 5e-3), gbps(1, 400);
  std::uniform_int_distribution<int> gpus_pick(0, 2), count(1, 6);
  const int gpu_choices[] = {1, 4, 8};
  const Workload w = resnet_like();
  for (int trial = 0; trial < 300; ++trial) {
    const InstanceSpec a = instance(gpu_choices[gpus_pick(rng)], gbps(rng));
    const InstanceSpec b = instance(gpu_choices[gpus_pick(rng)], gbps(rng));
    std::vector<GroupSpec> groups = {{&a, count(rng), compute(per_sample(rng)), 1.0},
                                     {&b, count(rng), compute(per_sample(rng)), 2.0}};
    const IterationResult r = run(w, groups, 512);
    if (!r.feasible()) continue;
    const double eps = 1e-12;
    EXPECT_LE(std::max(r.compute_s, r.exposed_comm_s), r.iteration_s + eps);
    EXPECT_LE(r.iteration_s, r.compute_s + r.comm_s + r.optimizer_s + eps);
    int total = 0;
    for (int g = 0; g < r.num_groups; ++g) {
      const auto& gr = r.groups[g];
      total += gr.batch_low * (gr.workers - gr.workers_high) + gr.batch_high * gr.workers_high;
      EXPECT_GE(gr.batch_low, 1);
    }
    EXPECT_EQ(total, 512);
  }
}

TEST(Simulator, FasterNetworkIsNeverSlower) {
  const Workload w = resnet_like();
  double previous = std::numeric_limits<double>::infinity();
  for (double gbps : {1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 400.0, 3200.0}) {
    const InstanceSpec s = instance(8, gbps);
    const IterationResult r = run(w, {{&s, 4, compute(1e-3), 24.0}}, 1024);
    ASSERT_TRUE(r.feasible());
    EXPECT_LE(r.iteration_s, previous);
    previous = r.iteration_s;
  }
}

TEST(Simulator, FasterGpuGetsTheLargerBatch) {
  const InstanceSpec slow = instance(1, 25), fast = instance(1, 25);
  const IterationResult r =
      run(resnet_like(), {{&slow, 2, compute(4e-3), 1.0}, {&fast, 2, compute(1e-3), 3.0}}, 100);
  ASSERT_TRUE(r.feasible());
  EXPECT_GT(r.groups[1].batch_low, r.groups[0].batch_high);
  // Continuous optimum: 4 ms * b1 = 1 ms * b2 with 2 b1 + 2 b2 = 100 -> b1 = 10, b2 = 40.
  EXPECT_EQ(r.groups[0].batch_low, 10);
  EXPECT_EQ(r.groups[1].batch_low, 40);
}

TEST(Simulator, SplitIsOptimalAmongIntegerSplits) {
  // Two single-GPU groups: brute force every split and compare the slowest rank.
  const InstanceSpec a = instance(1, 25), b = instance(1, 25);
  const ComputeModel ca = compute(3e-3, 5e-3), cb = compute(1.3e-3, 1e-3);
  for (int batch = 2; batch < 60; ++batch) {
    const IterationResult r = run(resnet_like(), {{&a, 1, ca, 1.0}, {&b, 1, cb, 1.0}}, batch);
    ASSERT_TRUE(r.feasible());
    double best = std::numeric_limits<double>::infinity();
    for (int x = 1; x < batch; ++x) best = std::min(best, std::max(ca.compute_s(x), cb.compute_s(batch - x)));
    EXPECT_NEAR(r.compute_s, best, 1e-12) << "batch " << batch;
  }
}

TEST(Simulator, MemoryBoundsTheLocalBatch) {
  const InstanceSpec small = instance(1, 25, 4.0);  // 4 GiB: floor((0.95*4 GiB - 2.5 GB) / 100 MB) = 15
  const IterationResult ok = run(resnet_like(), {{&small, 2, compute(1e-3), 1.0}}, 30);
  ASSERT_TRUE(ok.feasible());
  EXPECT_EQ(ok.groups[0].max_batch, 15);
  const IterationResult too_big = run(resnet_like(), {{&small, 2, compute(1e-3), 1.0}}, 31);
  EXPECT_EQ(too_big.infeasible, srift::Infeasible::memory);
  SimOptions o;
  o.global_batch = 31;
  EXPECT_NE(srift::describe_infeasible(too_big, o).find("global batch is 31"), std::string::npos);
}

TEST(Simulator, BatchSmallerThanWorkersIsInfeasible) {
  const InstanceSpec eight = instance(8, 100);
  const IterationResult r = run(resnet_like(), {{&eight, 2, compute(1e-3), 1.0}}, 8);
  EXPECT_EQ(r.infeasible, srift::Infeasible::batch_smaller_than_workers);
}

TEST(Simulator, NetworkIsTheBottleneckAcrossInstances) {
  const InstanceSpec s = instance(8, 25);
  const IterationResult r = run(resnet_like(), {{&s, 2, compute(1e-3), 1.0}}, 256);
  EXPECT_EQ(r.bottleneck, srift::Bottleneck::network);
  EXPECT_DOUBLE_EQ(r.ring_bandwidth, 25e9 / 8);
  const IterationResult single = run(resnet_like(), {{&s, 1, compute(1e-3), 1.0}}, 256);
  EXPECT_EQ(single.bottleneck, srift::Bottleneck::intra);
}

TEST(Simulator, InterferenceStretchesComputeByTheOverlappedTraffic) {
  // One bucket ready halfway through the backward; 2 instances of 1 GPU on a fast link, so
  // the whole bucket's allreduce runs while the backward still computes.
  Workload w;
  w.bucket_bytes = {8.0e6};
  w.bucket_ready_fraction = {0.5};
  w.fixed_memory_bytes = 1e9;
  w.activation_bytes_per_sample = 1e6;
  InstanceSpec plain = instance(1, 400);
  InstanceSpec shared = plain;
  shared.comm_compute_s_per_byte = 2e-9;  // 2 ns of compute lost per byte of traffic
  const ComputeModel c = compute(1e-2, 0, 0);  // 0.32 s of compute at 32 samples
  const IterationResult base = run(w, {{&plain, 2, c, 1.0}}, 64);
  const IterationResult hit = run(w, {{&shared, 2, c, 1.0}}, 64);
  ASSERT_TRUE(base.feasible() && hit.feasible());
  EXPECT_EQ(base.interference_s, 0.0);
  ASSERT_LT(base.comm_s, 0.5 * base.compute_s * 2 / 3);  // the bucket ends inside the backward
  // 2 ranks: each moves 2(n-1)/n = 1 x the bucket; all of it while computing
  EXPECT_NEAR(hit.interference_s, 2e-9 * 8.0e6, 1e-12);
  EXPECT_NEAR(hit.iteration_s, base.iteration_s + 2e-9 * 8.0e6, 1e-12);
  EXPECT_DOUBLE_EQ(hit.compute_s, base.compute_s);
  // Traffic after the compute has ended costs it nothing: a bucket ready at the very end.
  w.bucket_ready_fraction = {1.0};
  EXPECT_EQ(run(w, {{&shared, 2, c, 1.0}}, 64).interference_s, 0.0);
  // One worker has no traffic, hence no interference.
  EXPECT_EQ(run(w, {{&shared, 1, c, 1.0}}, 32).interference_s, 0.0);
  shared.comm_compute_s_per_byte = -1;
  EXPECT_THROW(run(w, {{&shared, 2, c, 1.0}}, 64), std::invalid_argument);
}

IterationResult run_accumulating(const Workload& w, const std::vector<GroupSpec>& groups, int batch, int steps) {
  SimOptions o;
  o.global_batch = batch;
  o.max_accumulation_steps = steps;
  return srift::simulate(w, groups, o);
}

TEST(Simulator, AccumulationTakesTheFewestMicroStepsThatFit) {
  // One GPU holding 15 samples (MemoryBoundsTheLocalBatch), fixed 2 ms, 1 ms per sample,
  // optimizer 4 ms: a batch of 40 runs as micro-steps of 14, 13 and 13 samples.
  const InstanceSpec small = instance(1, 25, 4.0);
  const std::vector<GroupSpec> one = {{&small, 1, compute(1e-3), 1.0}};
  EXPECT_EQ(run(resnet_like(), one, 40).infeasible, srift::Infeasible::memory);
  const IterationResult r = run_accumulating(resnet_like(), one, 40, 8);
  ASSERT_TRUE(r.feasible());
  EXPECT_EQ(r.accumulation_steps, 3);
  EXPECT_EQ(r.micro_batch, 14);
  EXPECT_EQ(r.groups[0].batch_low, 14);
  EXPECT_NEAR(r.compute_s, 2 * (2e-3 + 13e-3) + (2e-3 + 14e-3), 1e-15);
  EXPECT_NEAR(r.iteration_s, 0.046 + 4e-3, 1e-15);
  EXPECT_NEAR(r.samples_per_s, 40 / 0.050, 1e-9);
  EXPECT_NEAR(r.groups[0].memory_bytes, 2.5e9 + 14 * 1e8, 1);
  // A batch that fits is untouched by the option.
  const IterationResult fits = run_accumulating(resnet_like(), one, 15, 8);
  EXPECT_EQ(fits.accumulation_steps, 1);
  EXPECT_EQ(fits.micro_batch, 15);
  EXPECT_DOUBLE_EQ(fits.iteration_s, run(resnet_like(), one, 15).iteration_s);
}

TEST(Simulator, AccumulationDelaysTheAllreduceByTheEarlierMicroSteps) {
  // Two one-GPU instances (15 samples each): 61 samples run as 20 + 20 + 21. The micro-steps
  // before the last only compute (no_sync), 10 samples per rank each; the last is an ordinary
  // iteration of 21 samples shifted by them.
  const InstanceSpec small = instance(1, 25, 4.0);
  const std::vector<GroupSpec> two = {{&small, 2, compute(1e-3), 1.0}};
  const IterationResult r = run_accumulating(resnet_like(), two, 61, 4);
  ASSERT_TRUE(r.feasible());
  EXPECT_EQ(r.accumulation_steps, 3);
  EXPECT_EQ(r.micro_batch, 21);
  const IterationResult last = run(resnet_like(), two, 21);
  const double before = 2 * (2e-3 + 10e-3);
  EXPECT_NEAR(r.iteration_s, before + last.iteration_s, 1e-12);
  EXPECT_NEAR(r.compute_s, before + last.compute_s, 1e-12);
  EXPECT_NEAR(r.exposed_comm_s, last.exposed_comm_s, 1e-12);
  EXPECT_NEAR(r.comm_s, last.comm_s, 1e-12);
  EXPECT_EQ(r.groups[0].batch_high, 11);
  EXPECT_EQ(r.groups[0].workers_high, 1);
  // Never faster than the same samples in one step on GPUs with the memory.
  const InstanceSpec big = instance(1, 25, 16.0);
  EXPECT_GT(r.iteration_s, run(resnet_like(), {{&big, 2, compute(1e-3), 1.0}}, 61).iteration_s);
}

TEST(Simulator, AccumulationAddsEachLaterMicroStepsGradients) {
  // 40 samples in 3 micro-steps on one GPU (AccumulationTakesTheFewestMicroStepsThatFit): the
  // second and third add their gradients into the held ones, 5 ms each.
  const InstanceSpec small = instance(1, 25, 4.0);
  ComputeModel c = compute(1e-3);
  c.accumulate_s = 5e-3;
  const IterationResult r = run_accumulating(resnet_like(), {{&small, 1, c, 1.0}}, 40, 8);
  ASSERT_EQ(r.accumulation_steps, 3);
  EXPECT_NEAR(r.iteration_s, 0.050 + 2 * 5e-3, 1e-15);
  // no accumulation, no add
  EXPECT_DOUBLE_EQ(run(resnet_like(), {{&small, 1, c, 1.0}}, 15).iteration_s,
                   run(resnet_like(), {{&small, 1, compute(1e-3), 1.0}}, 15).iteration_s);
  EXPECT_NEAR(srift::gradient_accumulate_s(1e8, [] {
                srift::GpuSpec g;
                g.name = "t";
                g.memory_bytes = 16e9;
                g.fp32_flops = 1e13;
                g.memory_bandwidth = 3e11;
                return g;
              }()),
              3e8 / (3e11 * 0.70), 1e-15);
}

TEST(Simulator, AccumulationNeedsASamplePerRankInEveryMicroStep) {
  // 2.6 GiB GPUs hold one sample each: 8 ranks need 2 micro-steps for 9 samples, and the
  // smaller would leave a rank without one.
  const InstanceSpec tiny = instance(8, 100, 2.6);
  const std::vector<GroupSpec> eight = {{&tiny, 1, compute(1e-3), 1.0}};
  const IterationResult r = run_accumulating(resnet_like(), eight, 9, 4);
  ASSERT_EQ(r.groups[0].max_batch, 1);
  EXPECT_EQ(r.infeasible, srift::Infeasible::memory);
  SimOptions o;
  o.global_batch = 9;
  o.max_accumulation_steps = 4;
  EXPECT_NE(srift::describe_infeasible(r, o).find("without a sample"), std::string::npos);
  const IterationResult ok = run_accumulating(resnet_like(), eight, 16, 4);
  ASSERT_TRUE(ok.feasible());
  EXPECT_EQ(ok.accumulation_steps, 2);
  EXPECT_EQ(ok.micro_batch, 8);
}

TEST(Simulator, AccumulationSaysHowManyMicroStepsItWouldNeed) {
  const InstanceSpec small = instance(1, 25, 4.0);
  const std::vector<GroupSpec> one = {{&small, 1, compute(1e-3), 1.0}};
  SimOptions o;
  o.global_batch = 100;
  o.max_accumulation_steps = 4;
  const IterationResult r = srift::simulate(resnet_like(), one, o);
  EXPECT_EQ(r.infeasible, srift::Infeasible::memory);
  EXPECT_NE(srift::describe_infeasible(r, o).find("needs 7 accumulation micro-steps, more than the 4 allowed"),
            std::string::npos)
      << srift::describe_infeasible(r, o);
  o.max_accumulation_steps = 1;
  EXPECT_NE(srift::describe_infeasible(r, o).find("allow gradient accumulation"), std::string::npos);
  o.max_accumulation_steps = 0;
  try {
    srift::simulate(resnet_like(), one, o);
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_accumulation_steps"), std::string::npos) << e.what();
  }
}

TEST(Simulator, MaxLocalBatchCapsWhatOneGpuRuns) {
  // A GPU whose memory holds 15 samples, capped at 8 (a script's per-GPU batch): 40 samples
  // run as 5 micro-steps of 8, each an iteration of 8 samples, the last with the allreduce.
  const InstanceSpec small = instance(1, 25, 4.0);
  const std::vector<GroupSpec> one = {{&small, 1, compute(1e-3), 1.0}};
  SimOptions o;
  o.global_batch = 40;
  o.max_accumulation_steps = 8;
  o.max_local_batch = 8;
  const IterationResult r = srift::simulate(resnet_like(), one, o);
  ASSERT_TRUE(r.feasible());
  EXPECT_EQ(r.groups[0].max_batch, 8);
  EXPECT_EQ(r.accumulation_steps, 5);
  EXPECT_EQ(r.micro_batch, 8);
  EXPECT_NEAR(r.compute_s, 5 * (2e-3 + 8e-3), 1e-15);
  EXPECT_EQ(srift::max_local_batch(resnet_like(), small, o), 8);
  // A cap above what memory holds changes nothing; 0 is no cap.
  o.max_local_batch = 1000;
  EXPECT_EQ(srift::max_local_batch(resnet_like(), small, o), 15);
  EXPECT_DOUBLE_EQ(srift::simulate(resnet_like(), one, o).iteration_s, run_accumulating(resnet_like(), one, 40, 8).iteration_s);
  o.max_local_batch = 0;
  EXPECT_EQ(srift::simulate(resnet_like(), one, o).accumulation_steps, 3);
  // Without accumulation a batch above the cap does not run, and the message names the cap.
  o.max_local_batch = 8;
  o.max_accumulation_steps = 1;
  o.global_batch = 12;
  const IterationResult capped = srift::simulate(resnet_like(), one, o);
  EXPECT_EQ(capped.infeasible, srift::Infeasible::memory);
  const std::string why = srift::describe_infeasible(capped, o);
  EXPECT_NE(why.find("max_local_batch = 8 allow at most 8 samples"), std::string::npos) << why;
  EXPECT_NE(why.find("raise max_local_batch"), std::string::npos) << why;
  o.max_local_batch = -1;
  try {
    srift::simulate(resnet_like(), one, o);
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_local_batch"), std::string::npos) << e.what();
  }
}

TEST(Simulator, WorkersPastAnIntAreRefusedNotDividedByZero) {
  // 2^30 instances of 4 GPUs: the worker count overflows an int (it crashed with SIGFPE).
  const InstanceSpec four = instance(4, 25, 16.0);
  for (int count : {1 << 29, 1 << 30, (1 << 30) + 1}) {
    try {
      run(resnet_like(), {{&four, count, compute(1e-3), 1.0}}, 64);
      FAIL() << "expected invalid_argument for count " << count;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("groups[0].count (workers"), std::string::npos) << e.what();
    }
  }
}

TEST(Simulator, RingBroadcastFormula) {
  const LinkSpec link{10e9, 20e-6};
  // S / B + (n-1) * alpha with n = 4, S = 100 MB
  EXPECT_NEAR(srift::ring_broadcast_s(100e6, 4, link), 100e6 / 10e9 + 3 * 20e-6, 1e-15);
  EXPECT_DOUBLE_EQ(srift::ring_broadcast_s(100e6, 1, link), 0.0);
  EXPECT_DOUBLE_EQ(srift::ring_broadcast_s(0, 4, link), 0.0);
  EXPECT_THROW(srift::ring_broadcast_s(-1, 4, link), std::invalid_argument);
  EXPECT_THROW(srift::ring_broadcast_s(1e6, 0, link), std::invalid_argument);
  EXPECT_THROW(srift::ring_broadcast_s(1e6, 4, LinkSpec{0, 20e-6}), std::invalid_argument);
}

TEST(Simulator, BufferBroadcastDelaysTheWholeIteration) {
  // Note "buffer broadcast": the forward waits for rank 0's buffers, so every event of the
  // iteration moves by the broadcast, which nothing overlaps.
  const InstanceSpec s = instance(8, 25);
  const std::vector<GroupSpec> groups = {{&s, 2, compute(1e-3), 24.0}};
  Workload plain = resnet_like(), with = resnet_like();
  with.broadcast_bytes = {48e6, 8e3};  // e.g. float32 masks and int64 counters: two messages
  std::vector<srift::BucketEvent> t_plain, t_with;
  SimOptions o;
  o.global_batch = 512;
  const IterationResult a = srift::simulate(plain, groups, o, &t_plain);
  const IterationResult b = srift::simulate(with, groups, o, &t_with);
  ASSERT_TRUE(a.feasible() && b.feasible());
  EXPECT_DOUBLE_EQ(a.broadcast_s, 0.0);
  const LinkSpec ring{b.ring_bandwidth, b.ring_latency};
  ASSERT_EQ(b.bottleneck, srift::Bottleneck::network);
  // each message crosses a chain through the 16 ranks: 7 NVLink hops in each instance, 1 NIC hop
  const double chain = 2 * 7 * s.intra.latency + 1 * s.network.latency;
  const double expected = (48e6 + 8e3) / ring.bandwidth + 2 * chain;
  EXPECT_NEAR(b.broadcast_s, expected, 1e-15);
  EXPECT_NEAR(b.iteration_s, a.iteration_s + expected, 1e-12);
  EXPECT_DOUBLE_EQ(b.compute_s, a.compute_s);
  EXPECT_DOUBLE_EQ(b.comm_s, a.comm_s);
  EXPECT_NEAR(b.exposed_comm_s, a.exposed_comm_s, 1e-12);
  ASSERT_EQ(t_plain.size(), t_with.size());
  for (std::size_t k = 0; k < t_plain.size(); ++k) {
    EXPECT_NEAR(t_with[k].ready_s, t_plain[k].ready_s + expected, 1e-12);
    EXPECT_NEAR(t_with[k].end_s, t_plain[k].end_s + expected, 1e-12);
  }
  // One rank broadcasts to nobody.
  const InstanceSpec one = instance(1, 25);
  SimOptions small = o;
  small.global_batch = 32;
  const IterationResult solo = srift::simulate(with, {{&one, 1, compute(1e-3), 1.0}}, small);
  ASSERT_TRUE(solo.feasible());
  EXPECT_DOUBLE_EQ(solo.broadcast_s, 0.0);
  // Once per iteration, however many micro-steps (no_sync() forwards skip it).
  SimOptions acc = o;
  acc.global_batch = 4096;
  acc.max_accumulation_steps = 8;
  const IterationResult k_plain = srift::simulate(plain, groups, acc);
  const IterationResult k_with = srift::simulate(with, groups, acc);
  ASSERT_TRUE(k_with.feasible());
  ASSERT_GT(k_with.accumulation_steps, 1);
  EXPECT_NEAR(k_with.iteration_s, k_plain.iteration_s + expected, 1e-12);
  // A bad message names itself.
  Workload bad = resnet_like();
  bad.broadcast_bytes = {1e6, -5};
  try {
    srift::simulate(bad, groups, o);
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("workload.broadcast_bytes[1]"), std::string::npos) << e.what();
  }
}

TEST(Simulator, BadInputNamesTheField) {
  const InstanceSpec s = instance(1, 25);
  try {
    run(resnet_like(), {{&s, 0, compute(1e-3), 1.0}}, 8);
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("groups[0].count"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run(resnet_like(), {{&s, 1, compute(1e-3), 1.0}}, 0), std::invalid_argument);
  Workload bad = resnet_like();
  bad.bucket_ready_fraction[2] = 0.01;  // decreasing
  EXPECT_THROW(run(bad, {{&s, 1, compute(1e-3), 1.0}}, 8), std::invalid_argument);
}

}  // namespace

TEST(Simulator, MaxLocalBatchChecksWhatItReads) {
  // Public since the searches share it: a NaN memory fraction was cast to int (UB) and a
  // negative global batch came back as the answer.
  Workload w;
  w.fixed_memory_bytes = 1e9;
  w.activation_bytes_per_sample = 1e8;
  InstanceSpec inst;
  inst.gpus = 1;
  inst.gpu_memory_bytes = 16e9;
  EXPECT_EQ(srift::max_local_batch(w, inst, 0.95, 1000), 142);
  EXPECT_THROW(srift::max_local_batch(w, inst, std::nan(""), 1000), std::invalid_argument);
  EXPECT_THROW(srift::max_local_batch(w, inst, 2.0, -5), std::invalid_argument);
  inst.gpu_memory_bytes = std::nan("");
  EXPECT_THROW(srift::max_local_batch(w, inst, 0.95, 1000), std::invalid_argument);
}

TEST(Simulator, UncheckedCountsRanksPastAnIntAsMoreThanTheBatch) {
  // The searches' hot path: 4 instances of 2^30 GPUs wrapped to 0 ranks in an int, and the
  // batch split divided by them (SIGFPE through search_exhaustive).
  const InstanceSpec huge = instance(1 << 30, 25, 16.0);
  const GroupSpec groups[] = {{&huge, 4, compute(1e-3), 1.0}, {&huge, 3, compute(1e-3), 1.0}};
  SimOptions o;
  o.global_batch = 2147483647;
  IterationResult r;
  for (int n : {1, 2}) {
    srift::simulate_unchecked(resnet_like(), groups, n, o, r);
    EXPECT_EQ(r.infeasible, srift::Infeasible::batch_smaller_than_workers) << n;
    EXPECT_EQ(r.workers, 2147483647) << "saturated, not wrapped";
    EXPECT_EQ(r.groups[0].workers, 2147483647);
  }
  // one group of 2^30 ranks fits the batch: simulated, not refused
  const GroupSpec one[] = {{&huge, 1, compute(1e-3), 1.0}};
  Workload w = resnet_like();
  w.activation_bytes_per_sample = 0;
  srift::simulate_unchecked(w, one, 1, o, r);
  ASSERT_TRUE(r.feasible());
  EXPECT_EQ(r.workers, 1 << 30);
  EXPECT_TRUE(std::isfinite(r.iteration_s) && r.iteration_s > 0);
}

TEST(Simulator, DescribeInfeasibleNamesOneSamplesActivationsWhereNoSampleFits) {
  // A review: a sample whose activations alone exceed the GPU was blamed on the weights,
  // gradients and optimizer state.
  SimOptions o;
  o.global_batch = 8;
  IterationResult r;
  r.infeasible = srift::Infeasible::memory;
  r.num_groups = 1;
  r.workers = 1;
  r.groups[0].workers = 1;
  r.groups[0].max_batch = 0;
  EXPECT_EQ(srift::describe_infeasible(r, o),
            "the model's weights, gradients and optimizer state with one sample's activations do not fit one GPU of "
            "group 0; use GPUs with more memory");
}

TEST(Simulator, DescribeInfeasibleRefusesAMemoryResultWithoutRanks) {
  // A hand-made result, infeasible for memory, with no group (or a group of no rank): the
  // micro-step count divided by a capacity of 0 (SIGFPE).
  SimOptions o;
  o.global_batch = 8;
  o.max_accumulation_steps = 4;
  IterationResult r;
  r.infeasible = srift::Infeasible::memory;
  r.num_groups = 0;
  try {
    srift::describe_infeasible(r, o);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("result.num_groups must be >= 1"), std::string::npos) << e.what();
  }
  r.num_groups = 1;
  r.groups[0].workers = 0;
  r.groups[0].max_batch = 3;
  try {
    srift::describe_infeasible(r, o);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("result.groups[0].workers must be >= 1, got 0"), std::string::npos)
        << e.what();
  }
  // the largest hand-made groups: their capacity summed past a long long
  r.num_groups = srift::kMaxGroups;
  for (int g = 0; g < r.num_groups; ++g) r.groups[g].workers = r.groups[g].max_batch = 2147483647;
  r.workers = 2147483647;
  o.global_batch = 2147483647;
  EXPECT_NE(srift::describe_infeasible(r, o).find("GPU memory holds at most"), std::string::npos);
}

namespace {
// Inputs near the largest double overflow the iteration to +inf: an error naming it, never a
// feasible cluster of infinite time.
TEST(Simulator, AnIterationThatOverflowsIsAnError) {
  const InstanceSpec a = instance(1, 25);
  ComputeModel huge = compute(1e-3);
  huge.forward_per_sample_s = huge.backward_per_sample_s = 0.5e308;  // finite; x 8 samples is not
  try {
    run(resnet_like(), {{&a, 1, huge, 1.0}}, 8);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("iteration time overflows"), std::string::npos) << e.what();
  }
  InstanceSpec slow = instance(1, 25);
  slow.network = LinkSpec{1e-305, 30e-6};  // 1e-305 bytes/s: the allreduce overflows
  EXPECT_THROW(run(resnet_like(), {{&slow, 2, compute(1e-3), 1.0}}, 8), std::invalid_argument);
  EXPECT_TRUE(run(resnet_like(), {{&a, 1, compute(1e-3, 1e300), 1.0}}, 8).feasible());  // large, finite
  ComputeModel sum = compute(1e-3);
  sum.forward_fixed_s = sum.backward_fixed_s = 1e308;  // each finite, their sum not: refused up front
  try {
    run(resnet_like(), {{&a, 1, sum, 1.0}}, 8);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("forward_fixed_s + backward_fixed_s"), std::string::npos) << e.what();
  }
}
}  // namespace

namespace {
// Groups of several ranks, random speeds and memory caps: the split's slowest rank equals the
// least possible, found directly as the smallest level c_g + s_g b at which the groups' ranks,
// each at most min(cap, floor((level - c_g) / s_g)) samples, hold the batch. One pass of the
// remainder over the groups missed it (p4d.24xlarge + g4dn.12xlarge at 257: 59.6 vs 54.7 ms).
TEST(Simulator, SplitIsOptimalWithManyRanksPerGroup) {
  std::mt19937_64 rng(2026);
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto integer = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = integer(2, 4);
    std::vector<InstanceSpec> specs(n);
    std::vector<GroupSpec> groups;
    for (int g = 0; g < n; ++g) specs[g] = instance(integer(1, 8), 25, uniform(3.0, 12.0));
    for (int g = 0; g < n; ++g) {
      groups.push_back({&specs[g], integer(1, 3), compute(uniform(1e-4, 5e-3), uniform(0, 2e-2)), 1.0});
    }
    int workers = 0;
    for (const GroupSpec& gs : groups) workers += gs.count * gs.instance->gpus;
    const int batch = integer(workers, workers * 40);
    const IterationResult r = run(resnet_like(), groups, batch);
    if (!r.feasible()) continue;
    // the least level: try every c + s b in increasing order
    std::vector<double> levels;
    for (int g = 0; g < n; ++g) {
      for (int b = 1; b <= r.groups[g].max_batch; ++b) levels.push_back(groups[g].compute.compute_s(b));
    }
    std::sort(levels.begin(), levels.end());
    double best = std::numeric_limits<double>::infinity();
    for (double level : levels) {
      long long held = 0;
      bool every_rank = true;
      for (int g = 0; g < n; ++g) {
        int b = 0;
        while (b < r.groups[g].max_batch && groups[g].compute.compute_s(b + 1) <= level) ++b;
        every_rank = every_rank && b >= 1;
        held += static_cast<long long>(b) * groups[g].count * groups[g].instance->gpus;
      }
      if (every_rank && held >= batch) {
        best = level;
        break;
      }
    }
    ASSERT_TRUE(std::isfinite(best));
    EXPECT_NEAR(r.compute_s, best, 1e-12 * best) << "trial " << trial << " batch " << batch;
    int total = 0;
    for (int g = 0; g < n; ++g) {
      const srift::GroupResult& gr = r.groups[g];
      total += gr.batch_low * (gr.workers - gr.workers_high) + gr.batch_high * gr.workers_high;
      EXPECT_LE(gr.batch_high, gr.max_batch);
    }
    EXPECT_EQ(total, batch) << "trial " << trial;
    ++checked;
  }
  EXPECT_GT(checked, 1000);
}

// A per-sample time below ~1e-12 of the fixed time leaves (t - c) / s no digits: the floors
// it gave overshot the batch (52,454 samples handed out of 52,451), overflowed an int, or
// left 2^31 samples to the one-at-a-time hand-out (18.7 s for one call). The split then is
// even, every rank's time the same to double precision, and always exactly the batch.
TEST(Simulator, AFlatComputeCurveSplitsTheBatchExactlyAndFast) {
  constexpr double kHuge = 1e300;
  Workload w = resnet_like();
  w.activation_bytes_per_sample = 0;  // no memory cap: the whole batch may go anywhere
  const InstanceSpec one = instance(1, 25), four = instance(4, 25);
  auto total = [](const IterationResult& r) {
    long long t = 0;
    for (int g = 0; g < 2; ++g) {
      const srift::GroupResult& x = r.groups[g];
      t += static_cast<long long>(x.workers - x.workers_high) * x.batch_low +
           static_cast<long long>(x.workers_high) * x.batch_high;
    }
    return t;
  };
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const double share = std::pow(10.0, std::uniform_real_distribution<double>(-30, -12)(rng));
    const int batch = std::uniform_int_distribution<int>(5, 100000000)(rng);
    const ComputeModel a = compute(share, 1.0, 0.0), b = compute(share * 0.7, 1.0 + share, 0.0);
    const IterationResult r = run(w, {{&one, 1, a, 1.0}, {&four, 1, b, 1.0}}, batch);
    ASSERT_TRUE(r.feasible());
    EXPECT_EQ(total(r), batch) << "share " << share << " batch " << batch;
  }
  // INT_MAX samples over two one-GPU groups of equal fixed time: the even split, at once
  const ComputeModel flat = compute(1e-26, 1.0, 0.0);
  const IterationResult big = run(w, {{&one, 1, flat, 1.0}, {&one, 1, flat, 1.0}}, INT_MAX);
  EXPECT_EQ(total(big), INT_MAX);
  EXPECT_LE(std::abs(big.groups[0].batch_high - big.groups[1].batch_high), 1);  // even where all is equal
  // one flat group beside a sloped one: the sloped one takes only what keeps it at the flat
  // one's time (an even split of the whole batch, the first fallback, took 6.7 s against 1.0 s)
  for (double flat_share : {1e-17, 1e-16, 1e-15, 1e-14}) {
    const ComputeModel flat_a = compute(flat_share, 1.0, 0.0), sloped = compute(0.01, 0.5, 0.0);
    for (int batch : {100, 300, 1234}) {
      const IterationResult r = run(w, {{&one, 1, flat_a, 1.0}, {&one, 1, sloped, 1.0}}, batch);
      double best = kHuge;
      for (int nb = 1; nb < batch; ++nb) {
        best = std::min(best, std::max(flat_a.compute_s(batch - nb), sloped.compute_s(nb)));
      }
      EXPECT_EQ(total(r), batch);
      EXPECT_LE(r.compute_s, best * (1 + 1e-12)) << flat_share << " " << batch;
    }
  }
}

TEST(Simulator, APriceSumPastADoubleIsAnError) {
  const InstanceSpec a = instance(1, 25);
  try {
    run(resnet_like(), {{&a, 2, compute(1e-3), 1e308}}, 8);  // 2 x $1e308/h: each finite, the sum not
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("usd_per_hour"), std::string::npos) << e.what();
  }
}
}  // namespace
