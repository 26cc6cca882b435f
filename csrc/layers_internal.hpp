#pragma once
// Checks of a per-layer cost table the core's translation units share (not installed).
#include <vector>

#include "srift/compute.hpp"

namespace srift::detail {

/// Throws std::invalid_argument naming the first bad field ("layers[3].forward_flops must be
/// finite and >= 0, got -1"); the field's name is built only to report it.
void validate_layers(const std::vector<LayerCost>& layers);

}  // namespace srift::detail
