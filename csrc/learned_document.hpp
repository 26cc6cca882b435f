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
// (learned.cpp). So are the values, read or not: the types, ranges and required fields the
// schema gives every part outside the model (a null only where the schema allows one: an
// input_scaler), every number finite, a dominance_guard's references each listed once, and p10
// <= p90, each a log factor (validate.hpp note "log factor"), in the residual pairs the Python
// loader orders and the scaling band's cells, and the data edge's quantiles log factors too
// (docs/schemas.md, "what each layer checks").
#include "json_reader.hpp"
#include "validate.hpp"

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
  if (v.t != Json::T::object) bad(path, "must be an object, got " + shown(v));
}

// ---- the values of the parts the core does not read ------------------------------------------
// The schema's types and ranges there, checked here as well (each a few comparisons), so that
// the core refuses what the schema refuses wherever it is, naming the path and the value: a
// null where the schema has no null, a string for a count, a negative count, a year out of
// range. Every number anywhere must also be finite (finite_numbers), as the Python loader's
// check_numbers has it.

// An integer (a number with no fraction, as JSON Schema's "integer") >= least (and <= most).
inline void integer_at_least(const Json& v, const std::string& path, double least,
                             double most = std::numeric_limits<double>::infinity()) {
  const double x = number(v, path);
  if (x != std::floor(x)) bad(path, "must be an integer, got " + shown(v));
  if (x < least || x > most) {
    bad(path, "must be an integer " +
                  (most == std::numeric_limits<double>::infinity()
                       ? ">= " + shown_number(least)
                       : "in " + shown_number(least) + "-" + shown_number(most)) +
                  ", got " + shown(v));
  }
}

// A number in [least, most] (most_open: < most instead) or, least_open, > least.
inline void number_at_least(const Json& v, const std::string& path, double least, bool least_open) {
  const double x = number(v, path);
  if (least_open ? !(x > least) : !(x >= least)) {
    bad(path, "must be " + std::string(least_open ? "> " : ">= ") + shown_number(least) + ", got " + shown(v));
  }
}

inline void unit_number(const Json& v, const std::string& path) {
  const double x = number(v, path);
  if (!(x >= 0 && x <= 1)) bad(path, "must be in [0, 1], got " + shown(v));
}

inline void array_of_objects(const Json& v, const std::string& path) {
  if (v.t != Json::T::array) bad(path, "must be an array of objects, got " + shown(v));
  for (std::size_t i = 0; i < v.arr.size(); ++i) must_be_object(v.arr[i], path + "[" + std::to_string(i) + "]");
}

inline void array_of_strings(const Json& v, const std::string& path) {
  if (v.t != Json::T::array) bad(path, "must be an array of strings, got " + shown(v));
  for (std::size_t i = 0; i < v.arr.size(); ++i) string(v.arr[i], path + "[" + std::to_string(i) + "]");
}

// `check` on obj[key] at path.key where obj has the key (an optional field; a null is a value).
template <typename Check>
void optional_field(const Json& obj, const std::string& path, const char* key, Check check) {
  if (const Json* v = obj.find(key)) check(*v, path + "." + key);
}

// A residual quantile: a number that a band takes exp() of (validate.hpp note "log factor").
inline double log_factor(const Json& v, const std::string& path) {
  const double x = number(v, path);
  if (!detail::is_log_factor(x)) bad(path, std::string("must be ") + detail::kLogFactorRule + ", got " + shown_number(x));
  return x;
}

// p10 <= p90 in a residual pair, each a log factor (validate.hpp note "log factor";
// srift.learn.loader check_residual_order has the same pairs and the same rules).
inline void residual_order(const Json& q, const std::string& path) {
  const double p10 = log_factor(field(q, path, "p10"), path + ".p10");
  const double p90 = log_factor(field(q, path, "p90"), path + ".p90");
  if (p10 > p90) {
    bad(path, "must have p10 <= p90, got p10 " + shown_number(p10) + " and p90 " + shown_number(p90));
  }
}

// The common fields of the quantile records: p10 and p90 (required), p50, n (>= least_n) and
// split, where the object holds them.
inline void quantile_values(const Json& q, const std::string& path, double least_n = 0) {
  number(field(q, path, "p10"), path + ".p10");
  number(field(q, path, "p90"), path + ".p90");
  optional_field(q, path, "p50", number);
  optional_field(q, path, "n", [&](const Json& v, const std::string& p) { integer_at_least(v, p, least_n); });
  optional_field(q, path, "split", string);
}

// Every number of the document finite, wherever it is (the open records included): the reader
// takes NaN and Infinity so that this can name the field (the Python loader refuses them alike).
inline void finite_numbers(const Json& v, const std::string& path) {
  if (v.t == Json::T::number) {
    number(v, path);
  } else if (v.t == Json::T::array) {
    for (std::size_t i = 0; i < v.arr.size(); ++i) finite_numbers(v.arr[i], path + "[" + std::to_string(i) + "]");
  } else if (v.t == Json::T::object) {
    for (const auto& kv : v.obj) finite_numbers(kv.second, path + "." + kv.first);
  }
}

// ---- each part: its keys, then its values --------------------------------------------------

// An object with keys among `known`.
inline void closed_object(const Json& v, const std::string& path, std::initializer_list<const char*> known) {
  must_be_object(v, path);
  known_keys(v, path, known);
}

// Held-out quantiles (the schema's $defs/quantiles).
inline void quantile_keys(const Json& q, const std::string& path) {
  closed_object(q, path, {"p10", "p50", "p90", "n", "split"});
  quantile_values(q, path);
}

// A residuals object ($.residuals, $.roofline_residuals, an absolute_blend's residuals): the
// core reads p10 and p90; compute_absolute's also records the quantiles within a lab, convolved
// with the lab shifts, and each lab's shift (srift.learn.lab_band note "lab band": labs are
// open, each lab's record closed). p10 <= p90 in the object and in its within_lab and
// convolved.
inline void residual_keys(const Json& r, const std::string& path) {
  must_be_object(r, path);
  known_keys(r, path, {"p10", "p50", "p90", "n", "split", "within_lab", "convolved", "lab_shifts"});
  for (const char* part : {"within_lab", "convolved"}) {
    if (const Json* q = r.find(part)) quantile_keys(*q, path + "." + part);
  }
  if (const Json* shifts = r.find("lab_shifts")) {
    must_be_object(*shifts, path + ".lab_shifts");
    for (const auto& lab : shifts->obj) {
      const std::string lp = path + ".lab_shifts." + lab.first;
      closed_object(lab.second, lp, {"log_shift", "factor", "rows", "cells"});
      number(field(lab.second, lp, "log_shift"), lp + ".log_shift");
      optional_field(lab.second, lp, "factor", number);
      optional_field(lab.second, lp, "rows", [](const Json& v, const std::string& p) { integer_at_least(v, p, 0); });
      optional_field(lab.second, lp, "cells", array_of_strings);
    }
  }
  quantile_values(r, path);
  residual_order(r, path);
  for (const char* part : {"within_lab", "convolved"}) {
    if (const Json* q = r.find(part)) residual_order(*q, path + "." + part);
  }
}

// The specs of a reference GPU and the rule each follows (the schema's reference_specs entry).
struct SpecRule {
  const char* key;
  bool positive;  // > 0; else >= 0 (0: no such units)
};
inline const SpecRule kSpecRules[] = {{"fp32_flops", true},
                                      {"tf32_flops", false},
                                      {"fp16_flops", false},
                                      {"memory_bandwidth", true},
                                      {"memory_bytes", true}};

// A dominance_guard (compute_absolute's, and compute_ratio's absolute_blend's): references, a
// non-empty array of distinct non-empty names; reference_specs, one entry per reference, each of
// the five specs, and none besides. An entry for a GPU not among the references was skipped by
// the core, and refused by CostModels (its specs differ from this srift's GPU table): a
// misspelled reference key names itself here, in the loader and in the core alike. A name listed
// twice was read twice (one GPU, two references): refused, naming it.
inline void guard_keys(const Json& g, const std::string& path) {
  must_be_object(g, path);
  known_keys(g, path, {"references", "reference_specs", "scores", "candidates"});
  const Json& specs = field(g, path, "reference_specs");
  const std::string sp = path + ".reference_specs";
  must_be_object(specs, sp);
  for (const auto& entry : specs.obj) {
    known_keys(entry.second, sp + "." + entry.first,
               {"fp32_flops", "tf32_flops", "fp16_flops", "memory_bandwidth", "memory_bytes"});
  }
  const Json& refs = field(g, path, "references");
  const std::string rp = path + ".references";
  if (refs.t != Json::T::array || refs.arr.empty()) bad(rp, "must be a non-empty array of names, got " + shown(refs));
  std::vector<std::string> names;
  for (std::size_t i = 0; i < refs.arr.size(); ++i) {
    const std::string at = rp + "[" + std::to_string(i) + "]";
    const std::string name = string(refs.arr[i], at);
    if (name.empty()) bad(at, "must not be empty");
    const auto earlier = std::find(names.begin(), names.end(), name);
    if (earlier != names.end()) {
      bad(at, "is '" + name + "', already references[" + std::to_string(earlier - names.begin()) +
                  "]: each reference GPU is listed once");
    }
    names.push_back(name);
  }
  for (const auto& entry : specs.obj) {
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
    if (specs.find(n) == nullptr) bad(sp + "." + n, "is missing");
  }
  for (const auto& entry : specs.obj) {
    const std::string ep = sp + "." + entry.first;
    must_be_object(entry.second, ep);
    for (const SpecRule& rule : kSpecRules) {
      number_at_least(field(entry.second, ep, rule.key), ep + "." + rule.key, 0, rule.positive);
    }
  }
  optional_field(g, path, "scores", must_be_object);
  optional_field(g, path, "candidates", array_of_objects);
}

// A data_edge (srift.learn.data_edge note "data edge"): each counted launch year's quantiles
// under years, keyed by the year (four digits).
inline void data_edge_keys(const Json& e, const std::string& path) {
  must_be_object(e, path);
  known_keys(e, path, {"launch_year", "p10", "p50", "p90", "n", "split", "lean_factor", "min_training_chips", "years"});
  if (const Json* years = e.find("years")) {
    must_be_object(*years, path + ".years");
    for (const auto& year : years->obj) {
      const std::string& y = year.first;
      const bool digits =
          y.size() == 4 && std::all_of(y.begin(), y.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) bad(path + ".years." + y, "is not a launch year (four digits)");
      quantile_keys(year.second, path + ".years." + y);
    }
  }
  integer_at_least(field(e, path, "launch_year"), path + ".launch_year", 1990, 2100);
  number(field(e, path, "p50"), path + ".p50");
  quantile_values(e, path, 1);
  // the band past the edge takes exp() of each (validate.hpp note "log factor"; CostModels.data_edge)
  for (const char* q : {"p10", "p50", "p90"}) log_factor(field(e, path, q), path + "." + q);
  optional_field(e, path, "lean_factor", number);
  optional_field(e, path, "min_training_chips",
                 [](const Json& v, const std::string& p) { integer_at_least(v, p, 1); });
}

// compute_absolute's measured_band (srift.learn.measured_band note "measured band"); the pairs
// by source (per_e_fold.n) and their coverage are open records.
inline void measured_band_keys(const Json& b, const std::string& path) {
  must_be_object(b, path);
  known_keys(b, path, {"noise", "per_e_fold"});
  const std::string np = path + ".noise", fp = path + ".per_e_fold";
  const Json& noise = field(b, path, "noise");
  must_be_object(noise, np);
  known_keys(noise, np, {"p10", "p90", "n", "data"});
  const Json& fold = field(b, path, "per_e_fold");
  must_be_object(fold, fp);
  known_keys(fold, fp, {"p10", "p90", "n", "data", "coverage_from_other_source"});
  quantile_values(noise, np);
  optional_field(noise, np, "data", string);
  number(field(fold, fp, "p10"), fp + ".p10");
  number(field(fold, fp, "p90"), fp + ".p90");
  optional_field(fold, fp, "n", [](const Json& n, const std::string& p) {
    must_be_object(n, p);
    for (const auto& source : n.obj) integer_at_least(source.second, p + "." + source.first, 0);
  });
  optional_field(fold, fp, "data", string);
  optional_field(fold, fp, "coverage_from_other_source", must_be_object);
}

// compute_ratio's absolute_blend (srift.learn.blend); its selection is an open record.
inline void absolute_blend_keys(const Json& b, const std::string& path) {
  must_be_object(b, path);
  known_keys(b, path, {"weight", "shrink", "absolute_model", "residuals", "selection", "dominance_guard"});
  residual_keys(field(b, path, "residuals"), path + ".residuals");
  if (const Json* g = b.find("dominance_guard")) guard_keys(*g, path + ".dominance_guard");
  unit_number(field(b, path, "weight"), path + ".weight");
  optional_field(b, path, "shrink", unit_number);
  const Json& model = field(b, path, "absolute_model");
  if (model.t != Json::T::string || model.str != "compute_absolute") {
    bad(path + ".absolute_model", "must be 'compute_absolute', got " + shown(model));
  }
  optional_field(b, path, "selection", must_be_object);
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
      const std::string cp = sp + "." + cell.first;
      closed_object(cell.second, cp, {"p10", "p50", "p90", "n", "sources", "borrowed_from"});
      quantile_values(cell.second, cp);
      residual_order(cell.second, cp);  // band_factors takes exp() of p10 and p90 (validate_scaling_band)
      optional_field(cell.second, cp, "sources", must_be_object);
      optional_field(cell.second, cp, "borrowed_from", string);
    }
  }
  optional_field(s, path, "split", string);
  optional_field(s, path, "coverage_leave_one_source_out", must_be_object);
}

// training: a record of any keys, but for the two objects srift reads from it (the TCP link
// models' feature_range, the PCIe link model's domain, whose `beyond` is a record).
inline void training_keys(const Json& t, const std::string& path) {
  must_be_object(t, path);
  if (const Json* range = t.find("feature_range")) {
    const std::string rp = path + ".feature_range";
    closed_object(*range, rp, {"min", "max"});
    optional_field(*range, rp, "min", numbers);
    optional_field(*range, rp, "max", numbers);
  }
  if (const Json* domain = t.find("domain")) {
    const std::string dp = path + ".domain";
    closed_object(*domain, dp, {"max_nominal_gbytes_s", "factor", "beyond", "rule"});
    optional_field(*domain, dp, "max_nominal_gbytes_s", number);
    optional_field(*domain, dp, "factor", number);
    optional_field(*domain, dp, "beyond", must_be_object);
    optional_field(*domain, dp, "rule", string);
  }
}

// Every key of document `doc` (at `path`: "$", or the document's role) but the model's and
// input_scaler's, for a document of `kind` (see document_fields), then the values of the parts
// the model's reader does not read, as the schema has them (and every number finite).
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
  if (const Json* v = doc.find("instance_anchor")) {
    quantile_keys(*v, path + ".instance_anchor");
    residual_order(*v, path + ".instance_anchor");
  }
  if (const Json* v = doc.find("scaling_band")) scaling_band_keys(*v, path + ".scaling_band");
  if (const Json* v = doc.find("training")) training_keys(*v, path + ".training");
  optional_field(doc, path, "description", string);
  optional_field(doc, path, "target", string);
  finite_numbers(doc, path);
}

// A document's kind: its name, where it is a string.
inline std::optional<std::string> document_kind(const Json& doc) {
  const Json* name = doc.t == Json::T::object ? doc.find("name") : nullptr;
  if (name == nullptr || name->t != Json::T::string) return std::nullopt;
  return name->str;
}

}  // namespace srift::detail::json
