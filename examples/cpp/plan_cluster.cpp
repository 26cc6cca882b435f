// A scheduler's use of srift::core without Python: describe two instance types and a
// workload, predict one cluster, then search for the cheapest plan that meets a deadline.
#include <cstdio>
#include <srift/srift.hpp>

int main() {
  using namespace srift;

  // A ResNet-50-like workload: five DDP buckets, ~2.5 GB fixed memory, 85 MB per sample.
  Workload workload;
  workload.bucket_bytes = {1.0e6, 26.2e6, 26.2e6, 25.2e6, 23.6e6};
  workload.bucket_ready_fraction = {0.04, 0.31, 0.55, 0.78, 0.96};
  workload.fixed_memory_bytes = 2.5e9;
  workload.activation_bytes_per_sample = 85e6;

  // Instances: 8 GPUs on NVLink with a 25 Gbps NIC, and 1 GPU with a 5 Gbps NIC.
  InstanceSpec big{"nvlink8", 8, 16.0 * (1ull << 30), LinkSpec{112e9, 5e-6}, LinkSpec{2.5e9, 30e-6}};
  InstanceSpec small{"pcie1", 1, 16.0 * (1ull << 30), LinkSpec{8e9, 5e-6}, LinkSpec{0.5e9, 30e-6}};

  // Compute from a roofline of a single matmul-heavy layer table on a V100-class GPU.
  GpuSpec v100{"V100", 16.0 * (1ull << 30), 15.7e12, 0, 125e12, 900e9};
  std::vector<LayerCost> layers = {{OpKind::conv, 7.7e9, 15.4e9, 3.0e8, 9.4e7},
                                   {OpKind::norm, 1e8, 2e8, 4.0e8, 1e5},
                                   {OpKind::matmul, 4e6, 8e6, 1e4, 8.2e6}};
  ComputeModel compute = roofline_compute(layers, v100, Precision::fp32, 7 * 102e6);

  std::vector<GroupSpec> cluster = {{&big, 2, compute, 24.48}};
  SimOptions options;
  options.global_batch = 256;
  IterationResult r = simulate(workload, cluster, options);
  std::printf("2x nvlink8: iteration %.1f ms (compute %.1f, exposed comm %.1f), %.0f samples/s, $%.2f/h\n",
              r.iteration_s * 1e3, r.compute_s * 1e3, r.exposed_comm_s * 1e3, r.samples_per_s,
              r.usd_per_hour);

  SearchRequest request;
  request.workload = workload;
  request.instances = {big, small};
  request.offers = {Offer{0, 0, Market::on_demand, 24.48, 8, compute},
                    Offer{1, 0, Market::on_demand, 3.06, 16, compute}};
  request.global_batch = 256;
  request.iterations = 100000;
  request.objective = Objective::min_cost;
  request.deadline_s = 12 * 3600.0;
  SearchResult result = search_exhaustive(request);
  if (result.plans.empty()) {
    std::printf("no plan: %s\n", result.why_none.c_str());
    return 1;
  }
  const Plan& best = result.plans.front();
  std::printf("cheapest within 12 h:");
  for (const PlanGroup& g : best.groups) {
    std::printf(" %dx %s", g.count, request.instances[request.offers[g.offer].instance].name.c_str());
  }
  std::printf(" -> %.2f h, $%.2f (%llu clusters evaluated)\n", best.total_s / 3600, best.total_usd,
              static_cast<unsigned long long>(result.stats.evaluated));
  return 0;
}
