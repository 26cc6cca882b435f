// A scheduler's use of srift::core without Python: describe two instance types and a
// workload, predict one cluster, then search for the cheapest plan that meets a deadline, as
// predicted and with 90% confidence under the prediction's band. Given srift's models folder
// (srift/data/models), it also predicts the workload's compute with srift's learned models, as
// `import srift` would: on a GPU never measured, and anchored to one measured iteration.
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>
#include <sstream>
#include <string>
#include <srift/srift.hpp>

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The learned compute of `layers` on an A10G-class GPU: with no measurement, and anchored to
// one measured iteration on `measured`.
void learned_compute(const std::string& models_dir, const std::vector<srift::LayerCost>& layers,
                     const srift::GpuSpec& measured) {
  using namespace srift;
  const LearnedCompute learned = LearnedCompute::from_documents(read_file(models_dir + "/compute_ratio.json"),
                                                                read_file(models_dir + "/compute_absolute.json"));
  const WorkloadStats stats(layers, 7 * 102e6);
  const GpuSpec a10g{"A10G", 24.0 * (1ull << 30), 31.2e12, 62.5e12, 125e12, 600e9};
  const LearnedComputeResult cold = learned.predict_absolute(stats, a10g, Precision::amp, 256);
  const LearnedComputeResult warm =
      learned.predict_anchored(stats, measured, {Measurement{64, 0.150}}, a10g, Precision::amp);
  auto show = [](const char* label, const LearnedComputeResult& r) {
    const double t = r.model.compute_s(64) + r.model.optimizer_s;
    std::printf("learned compute on an A10G, %s: %.1f ms at batch 64 (p10-p90 %.1f-%.1f ms)\n", label, t * 1e3,
                t * r.p10_factor * 1e3, t * r.p90_factor * 1e3);
  };
  show("no measurement", cold);
  show("anchored on a V100 (150 ms at batch 64)", warm);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace srift;

  // A ResNet-50-like workload: five DDP buckets, ~2.5 GB fixed memory, 85 MB per sample.
  Workload workload;
  workload.bucket_bytes = {1.0e6, 26.2e6, 26.2e6, 25.2e6, 23.6e6};
  workload.bucket_ready_fraction = {0.04, 0.31, 0.55, 0.78, 0.96};
  // DDP broadcasts its BatchNorm statistics (float32) and counters (int64) before each forward.
  workload.broadcast_bytes = {212480, 424};
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
  if (argc > 1) learned_compute(argv[1], layers, v100);

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
  // Every field given (-Wextra names one left out): on demand, no reclaims per hour, and no
  // band yet (set below).
  request.offers = {Offer{0, 0, Market::on_demand, 24.48, 8, compute, 0.0, GroupBand{}},
                    Offer{1, 0, Market::on_demand, 3.06, 16, compute, 0.0, GroupBand{}}};
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

  // The same question with 90% confidence. Say what is known of each offer's spread: its
  // compute within x0.8-x1.3 (p10-p90; a model's held-out residuals) and, over links modelled
  // from specs, multi-GPU iterations within x0.9-x1.5. Each plan then reports its p10-p90 band
  // and the chance it meets the deadline; only plans that meet it 9 times in 10 remain.
  for (Offer& o : request.offers) o.band.compute = o.band.compute_several = BandFactors{0.8, 1.3};
  for (int scope = 0; scope < kScalingScopes; ++scope) {
    for (int bucket = 0; bucket < kScalingBuckets; ++bucket) {
      request.scaling_band.cell(static_cast<ScalingScope>(scope), bucket) = BandFactors{0.9, 1.5};
    }
  }
  request.deadline_s = 5 * 3600.0;
  for (double confidence : {0.0, 0.9}) {
    request.deadline_confidence = confidence;
    SearchResult answer = search(request);
    if (answer.plans.empty()) {
      std::printf("no plan within 5 h at confidence %.1f: %s\n", confidence, answer.why_none.c_str());
      return 1;
    }
    const Plan& p = answer.plans.front();
    std::printf("cheapest within 5 h%s:", confidence > 0 ? " with 90% confidence" : " as predicted");
    for (const PlanGroup& g : p.groups) {
      std::printf(" %dx %s", g.count, request.instances[request.offers[g.offer].instance].name.c_str());
    }
    std::printf(" -> %.2f h (p10-p90 %.2f-%.2f h), $%.2f, meets 5 h with probability %.2f\n", p.total_s / 3600,
                request.iterations * p.band.p10_s / 3600, request.iterations * p.band.p90_s / 3600, p.total_usd,
                p.deadline_probability);
  }
  return 0;
}
