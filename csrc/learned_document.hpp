#pragma once
// The keys of a srift.learned-model/1 document (internal, not installed): the top-level fields
// each kind of document may hold, and every object of the document whose keys are a fixed set
// (srift/schemas/learned_model.schema.json, "additionalProperties": false), whether the core
// reads it or not. LearnedModel::from_json (kind: the document's name) and
// learned_compute_config (kind: the argument's role) check a document with document_structure
// before reading it, so that a key the schema refuses is refused in C++ too, naming its path:
// an embedder reading a document with the core alone gets no silent typo in a part only Python
// reads (compute_absolute.residuals.within_lab, iteration_overhead.scaling_band, ...). The
// model and input_scaler, whose keys depend on the model's type, are checked as they are read
// (learned.cpp). Values are checked only where the core reads them; those of the parts it does
// not read are the schema's to check (docs/schemas.md, "what each layer checks").
#include "json_reader.hpp"

#include <optional>
#include <string>
#include <vector>

namespace srift::detail::json {

// The top-level fields of every document, whatever model it is.
inline const std::vector<std::string>& model_fields() {
  static const std::vector<std::string> fields = {"schema",       "name",  "description", "target",  "features",
                                                  "input_scaler", "model", "residuals",   "training"};
  return fields;
}

// srift's own models, by document name, and the top-level fields each carries besides the
// model's (the schema's allOf, one if/then a name; srift.learn.loader document_fields).
struct DocumentKind {
  const char* name;
  std::vector<std::string> fields;
};

inline const std::vector<DocumentKind>& document_kinds() {
  static const std::vector<DocumentKind> kinds = {
      {"compute_ratio", {"roofline_residuals", "absolute_blend", "data_edge"}},
      {"compute_absolute", {"roofline_residuals", "dominance_guard", "measured_band", "data_edge"}},
      {"iteration_overhead", {"instance_anchor", "scaling_band"}},
      {"link_tcp_efficiency", {}},
      {"link_tcp_latency", {}},
      {"link_pcie_efficiency", {}}};
  return kinds;
}

// The top-level fields a document of `kind` may hold: a kind of srift's, its fields; any other
// name (a model exported by export_estimator for its own use), the model's fields alone; no
// kind (the name is missing or not a string, which the reader then refuses), every kind's, so
// that a misspelled "nmae" is named as such rather than the fields of a kind it cannot tell.
inline std::vector<std::string> document_fields(const std::optional<std::string>& kind) {
  std::vector<std::string> out = model_fields();
  for (const DocumentKind& k : document_kinds()) {
    if (kind && *kind != k.name) continue;
    for (const std::string& f : k.fields) {
      if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
    }
  }
  return out;
}

// Refuses a top-level key the document's kind does not hold, naming the kinds that do hold it
// ("compute_ratio.measured_band is not a known field of a document named 'compute_ratio' (a
// field of compute_absolute documents); known here: ...").
inline void document_keys(const Json& doc, const std::string& path, const std::optional<std::string>& kind) {
  const std::string of = kind ? "of a document named '" + *kind + "'" : "";
  known_keys(doc, path, document_fields(kind), of, [&](const std::string& key) {
    std::string owners;
    for (const DocumentKind& k : document_kinds()) {
      if (std::find(k.fields.begin(), k.fields.end(), key) != k.fields.end()) {
        owners += (owners.empty() ? "" : " and ") + std::string(k.name);
      }
    }
    return owners.empty() ? owners : "a field of " + owners + " documents";
  });
}

inline void must_be_object(const Json& v, const std::string& path) {
  if (v.t != Json::T::object) bad(path, "must be an object");
}

// An object the core does not read: an object, with keys among `known`.
inline void closed_object(const Json& v, const std::string& path, std::initializer_list<const char*> known) {
  must_be_object(v, path);
  known_keys(v, path, known);
}

// Held-out quantiles the core does not read (the schema's $defs/quantiles).
inline void quantile_keys(const Json& q, const std::string& path) {
  closed_object(q, path, {"p10", "p50", "p90", "n", "split"});
}

// A residuals object ($.residuals, $.roofline_residuals, an absolute_blend's residuals): the
// core reads p10 and p90; compute_absolute's also records the quantiles within a lab, convolved
// with the lab shifts, and each lab's shift (srift.learn.lab_band note "lab band": labs are
// open, each lab's record closed).
inline void residual_keys(const Json& r, const std::string& path) {
  known_keys(r, path, {"p10", "p50", "p90", "n", "split", "within_lab", "convolved", "lab_shifts"});
  if (r.t != Json::T::object) return;
  for (const char* part : {"within_lab", "convolved"}) {
    if (const Json* q = r.find(part)) quantile_keys(*q, path + "." + part);
  }
  if (const Json* shifts = r.find("lab_shifts")) {
    must_be_object(*shifts, path + ".lab_shifts");
    for (const auto& lab : shifts->obj) {
      closed_object(lab.second, path + ".lab_shifts." + lab.first, {"log_shift", "factor", "rows", "cells"});
    }
  }
}

// A dominance_guard (compute_absolute's, and compute_ratio's absolute_blend's): reference_specs
// holds one entry per reference, each of the five specs, and none besides. An entry for a GPU
// not among the references was skipped by the core, and refused by CostModels (its specs differ
// from this srift's GPU table): a misspelled reference key names itself here, in the loader and
// in the core alike. (When references is not an array of strings the reader names it.)
inline void guard_keys(const Json& g, const std::string& path) {
  known_keys(g, path, {"references", "reference_specs", "scores", "candidates"});
  if (g.t != Json::T::object) return;
  const Json* specs = g.find("reference_specs");
  if (specs == nullptr || specs->t != Json::T::object) return;
  const std::string sp = path + ".reference_specs";
  for (const auto& entry : specs->obj) {
    known_keys(entry.second, sp + "." + entry.first,
               {"fp32_flops", "tf32_flops", "fp16_flops", "memory_bandwidth", "memory_bytes"});
  }
  const Json* refs = g.find("references");
  if (refs == nullptr || refs->t != Json::T::array) return;
  std::vector<std::string> names;
  for (const Json& r : refs->arr) {
    if (r.t != Json::T::string) return;
    names.push_back(r.str);
  }
  for (const auto& entry : specs->obj) {
    if (std::find(names.begin(), names.end(), entry.first) != names.end()) continue;
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    const std::string nearest = nearest_key(entry.first, names);
    bad(sp + "." + entry.first, "is not one of references" +
                                    (nearest.empty() ? "" : " (did you mean '" + nearest + "'?)") +
                                    ": reference_specs holds the specs of each reference and of no other GPU; "
                                    "references: " + list);
  }
  for (const std::string& n : names) {
    if (specs->find(n) == nullptr) bad(sp + "." + n, "is missing");
  }
}

// A data_edge (srift.learn.data_edge note "data edge"): each counted launch year's quantiles
// under years, keyed by the year (four digits).
inline void data_edge_keys(const Json& e, const std::string& path) {
  known_keys(e, path, {"launch_year", "p10", "p50", "p90", "n", "split", "lean_factor", "min_training_chips", "years"});
  if (e.t != Json::T::object) return;
  const Json* years = e.find("years");
  if (years == nullptr) return;
  must_be_object(*years, path + ".years");
  for (const auto& year : years->obj) {
    const std::string& y = year.first;
    const bool digits = y.size() == 4 && std::all_of(y.begin(), y.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) bad(path + ".years." + y, "is not a launch year (four digits)");
    quantile_keys(year.second, path + ".years." + y);
  }
}

// compute_absolute's measured_band (srift.learn.measured_band note "measured band"); the pairs
// by source (per_e_fold.n) and their coverage are open records.
inline void measured_band_keys(const Json& b, const std::string& path) {
  known_keys(b, path, {"noise", "per_e_fold"});
  if (b.t != Json::T::object) return;
  if (const Json* noise = b.find("noise")) known_keys(*noise, path + ".noise", {"p10", "p90", "n", "data"});
  if (const Json* fold = b.find("per_e_fold")) {
    known_keys(*fold, path + ".per_e_fold", {"p10", "p90", "n", "data", "coverage_from_other_source"});
  }
}

// compute_ratio's absolute_blend (srift.learn.blend); its selection is an open record.
inline void absolute_blend_keys(const Json& b, const std::string& path) {
  known_keys(b, path, {"weight", "shrink", "absolute_model", "residuals", "selection", "dominance_guard"});
  if (b.t != Json::T::object) return;
  if (const Json* r = b.find("residuals")) residual_keys(*r, path + ".residuals");
  if (const Json* g = b.find("dominance_guard")) guard_keys(*g, path + ".dominance_guard");
}

// iteration_overhead's scaling_band (srift.learn.scaling_band note "scaling band"): four scopes
// of four buckets of GPUs per instance; a cell's sources and the coverage are open records.
inline void scaling_band_keys(const Json& s, const std::string& path) {
  closed_object(s, path, {"single_instance", "multi_instance", "probed_single_instance", "probed_multi_instance",
                          "split", "coverage_leave_one_source_out"});
  for (const char* scope : {"single_instance", "multi_instance", "probed_single_instance", "probed_multi_instance"}) {
    const Json* cells = s.find(scope);
    if (cells == nullptr) continue;
    const std::string sp = path + "." + scope;
    closed_object(*cells, sp, {"1", "2", "3-4", "5+"});
    for (const auto& cell : cells->obj) {
      closed_object(cell.second, sp + "." + cell.first, {"p10", "p50", "p90", "n", "sources", "borrowed_from"});
    }
  }
}

// training: a record of any keys, but for the two objects srift reads from it (the TCP link
// models' feature_range, the PCIe link model's domain, whose `beyond` is a record).
inline void training_keys(const Json& t, const std::string& path) {
  must_be_object(t, path);
  if (const Json* range = t.find("feature_range")) closed_object(*range, path + ".feature_range", {"min", "max"});
  if (const Json* domain = t.find("domain")) {
    closed_object(*domain, path + ".domain", {"max_nominal_gbytes_s", "factor", "beyond", "rule"});
  }
}

// Every key of document `doc` (at `path`: "$", or the document's role) but the model's and
// input_scaler's, for a document of `kind` (see document_fields).
inline void document_structure(const Json& doc, const std::string& path, const std::optional<std::string>& kind) {
  document_keys(doc, path, kind);
  if (doc.t != Json::T::object) return;
  for (const char* r : {"residuals", "roofline_residuals"}) {
    if (const Json* v = doc.find(r)) residual_keys(*v, path + "." + r);
  }
  if (const Json* v = doc.find("absolute_blend")) absolute_blend_keys(*v, path + ".absolute_blend");
  if (const Json* v = doc.find("dominance_guard")) guard_keys(*v, path + ".dominance_guard");
  if (const Json* v = doc.find("data_edge")) data_edge_keys(*v, path + ".data_edge");
  if (const Json* v = doc.find("measured_band")) measured_band_keys(*v, path + ".measured_band");
  if (const Json* v = doc.find("instance_anchor")) quantile_keys(*v, path + ".instance_anchor");
  if (const Json* v = doc.find("scaling_band")) scaling_band_keys(*v, path + ".scaling_band");
  if (const Json* v = doc.find("training")) training_keys(*v, path + ".training");
}

// A document's kind: its name, where it is a string.
inline std::optional<std::string> document_kind(const Json& doc) {
  const Json* name = doc.t == Json::T::object ? doc.find("name") : nullptr;
  if (name == nullptr || name->t != Json::T::string) return std::nullopt;
  return name->str;
}

}  // namespace srift::detail::json
