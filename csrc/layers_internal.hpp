#pragma once
// Checks of a per-layer cost table the core's translation units share (not installed).
#include <vector>

#include "srift/compute.hpp"

namespace srift::detail {

/// Throws std::invalid_argument naming the first bad field ("layers[3].forward_flops must be
/// finite and >= 0, got -1"); the field's name is built only to report it.
void validate_layers(const std::vector<LayerCost>& layers);

/// roofline_compute and peak_flop_seconds_per_sample of layers a caller has validated already
/// (validate_layers) and holds unchanged, as srift::WorkloadStats does from its constructor on:
/// the same checks of everything else and the same arithmetic, bit for bit, without another
/// pass over the layers to check them (learned_compute.cpp note "memo": one prediction asks
/// these of the same layers thousands of times).
ComputeModel roofline_compute_of_valid_layers(const std::vector<LayerCost>& layers, const GpuSpec& gpu,
                                              Precision precision, double optimizer_bytes,
                                              const RooflineParams& params);
double peak_flop_seconds_per_sample_of_valid_layers(const std::vector<LayerCost>& layers, const GpuSpec& gpu,
                                                    Precision precision);

}  // namespace srift::detail
