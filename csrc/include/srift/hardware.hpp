#pragma once
// Hardware descriptions the simulator needs: a GPU's peaks, an instance's links.
// All bandwidths are bytes per second, latencies seconds, memory bytes, prices USD/hour.
#include <string>

namespace srift {

/// Peak throughput of one GPU. FLOP/s are dense (no sparsity) per GPU.
struct GpuSpec {
  std::string name;                 ///< catalog key, e.g. "V100-16GB"
  double memory_bytes = 0;          ///< device memory, bytes
  double fp32_flops = 0;            ///< FP32 CUDA-core peak, FLOP/s
  double tf32_flops = 0;            ///< TF32 tensor-core peak, FLOP/s (0: no TF32)
  double fp16_flops = 0;            ///< FP16/BF16 tensor-core peak, FLOP/s (0: none)
  double memory_bandwidth = 0;      ///< DRAM/HBM bandwidth, bytes/s
  /// Year the GPU chip was announced (0: unknown). A learned prediction for a GPU newer than
  /// every GPU its models learned from, with specs none of them has, moves by a new
  /// generation's lean (learned_compute.hpp note "data edge").
  int launch_year = 0;

  /// Throws std::invalid_argument naming the field when a value is not finite, memory_bytes
  /// not > 0, fp32_flops or memory_bandwidth below 1 (per second), tf32_flops or fp16_flops
  /// neither 0 nor at least 1, or launch_year neither 0 nor in 1990-2100.
  void validate() const;
};

/// One point-to-point link class of a collective: its achieved per-rank bus bandwidth and
/// the latency one ring step pays on it.
struct LinkSpec {
  double bandwidth = 0;  ///< achieved bus bandwidth, bytes/s (> 0)
  double latency = 0;    ///< per ring step, seconds (>= 0)
};

/// What the simulator needs of one instance type.
struct InstanceSpec {
  std::string name;          ///< e.g. "p3.16xlarge"
  int gpus = 1;              ///< GPUs (ranks) per instance, >= 1
  double gpu_memory_bytes = 0;  ///< memory of each GPU, bytes
  LinkSpec intra;            ///< GPU-to-GPU inside one instance (NVLink/NVSwitch/PCIe)
  LinkSpec network;          ///< the instance's NIC to other instances
  /// Compute time a rank loses per byte of allreduce traffic (2(n-1)/n x bucket bytes) that
  /// flows while it computes, seconds/byte (>= 0). 0 (the default) when collectives are
  /// offloaded and cost compute nothing; measured where they compete with compute for the
  /// same cores (CPU hosts with no spare core: the TCP stack, gloo's copies and sums).
  double comm_compute_s_per_byte = 0;

  void validate() const;
};

}  // namespace srift
