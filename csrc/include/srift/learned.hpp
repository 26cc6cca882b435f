#pragma once
// Evaluators for the learned cost models of srift.learn (schema "srift.learned-model/1").
//
// Note "portable models": models are trained in Python with scikit-learn and travel as JSON
// parameters, never pickles. The core parses the JSON itself (std only), validates every
// array against the others, and evaluates
//   - linear models (ridge etc.): y = intercept + sum_j coef[j] * x'[j],
//   - tree ensembles as flat arrays (sklearn GradientBoostingRegressor, RandomForest,
//     HistGradientBoostingRegressor): y = base, then y += scale * tree_t(x) for each tree in
//     order (gradient boosting), or, marked "average", y = base + scale * (sum_t tree_t(x)) / T
//     (forests), each in scikit-learn's order of operations,
//   - small MLPs (sklearn MLPRegressor): dense layers with relu/tanh/logistic/identity,
// where x' = (x - mean) / scale when the file has an input scaler. The output is the raw
// regression value (srift's targets are logs of time ratios; the caller exponentiates).
// sklearn's DecisionTree/GBR predict casts X to float32 before comparing with the (float64)
// thresholds; a tree ensemble marked "float32_inputs" does the same so that the two agree
// exactly (tests/cpp/test_learned.cpp, tests/python/test_learn_export.py), and, as sklearn,
// refuses an input float32 cannot hold (infinite, or past its largest value), and a NaN where
// the document says "allow_nan": false (csrc/learned.cpp note "tree inputs").
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace srift {

/// One regression tree as flat arrays indexed by node; node 0 is the root.
struct FlatTree {
  std::vector<int> feature;          ///< split feature; < 0 marks a leaf
  std::vector<double> threshold;     ///< go left when x[feature] <= threshold
  std::vector<int> left;             ///< child node indices (unused at leaves)
  std::vector<int> right;
  std::vector<double> value;         ///< leaf output (internal nodes: ignored)
  std::vector<std::uint8_t> missing_left;  ///< NaN goes left (1) or right (0); may be empty
};

/// Activation of one dense layer.
enum class Activation : int { identity = 0, relu = 1, tanh = 2, logistic = 3 };

/// Dense layer: out = act(in @ weights + bias); `weights` is row-major (inputs x outputs).
struct DenseLayer {
  int inputs = 0;
  int outputs = 0;
  std::vector<double> weights;
  std::vector<double> bias;
  Activation activation = Activation::identity;
};

/// A learned regression model loaded from JSON. Immutable after loading; evaluation is
/// thread-safe and allocation-free for linear and tree models.
class LearnedModel {
 public:
  /// mean: the average of member models over the same features, each with its own input
  /// scaling (scikit-learn's VotingRegressor).
  enum class Type : int { linear = 0, tree_ensemble = 1, mlp = 2, mean = 3 };

  /// Parses and validates a "srift.learned-model/1" document. Throws std::invalid_argument
  /// naming the JSON path of the first bad field (unknown schema, ragged arrays, child
  /// indices out of range, cycles, non-finite numbers, a key the object does not know, with
  /// the nearest known one: json_reader.hpp known_keys, ...). Keys are checked in the whole
  /// document, read here or not: the top level by the document's kind, its name (srift's
  /// compute_ratio, compute_absolute, iteration_overhead, link_* models carry fields of their
  /// own; any other name, a model's fields alone), and every object whose keys the schema
  /// closes (csrc/learned_document.hpp). So are the values, read here or not, as the schema
  /// has them (srift/schemas/learned_model.schema.json: types, ranges, required fields, a
  /// dominance_guard's references each listed once): a JSON null is refused wherever the schema
  /// has no null (all but input_scaler), never taken for an absent field.
  static LearnedModel from_json(const std::string& text);

  Type type() const { return type_; }
  const std::string& name() const { return name_; }
  /// Members of a mean model (empty otherwise).
  const std::vector<LearnedModel>& members() const { return members_; }
  /// Input features in order; predict() takes exactly this many values per row.
  const std::vector<std::string>& feature_names() const { return features_; }
  int num_features() const { return static_cast<int>(features_.size()); }
  /// Residual quantiles of the target on held-out data (0 when the file has none).
  double residual_p10() const { return p10_; }
  double residual_p90() const { return p90_; }

  /// One prediction from `n` features. Throws std::invalid_argument when n is wrong, when a
  /// tree ensemble is given an input its estimator refuses (note "tree inputs"), when a model
  /// with an input_scaler (scikit-learn's StandardScaler) is given an infinite input, which
  /// scikit-learn's transform refuses (learned.cpp note "scaler inputs"), and when the
  /// prediction is not finite (a NaN input to a linear or MLP model, or parameters that
  /// overflow), naming the model, so that no caller turns it into a time or a band.
  double predict(const double* x, std::size_t n) const;
  double predict(const std::vector<double>& x) const { return predict(x.data(), x.size()); }
  /// Row-major `rows x cols` inputs into `out` (rows values, caller-owned).
  void predict_batch(const double* x, std::size_t rows, std::size_t cols, double* out) const;

 private:
  double eval(const double* x, std::size_t n) const;  // predict() without the finiteness check
  double eval_linear(const double* x) const;
  double eval_trees(const double* x) const;
  void check_tree_inputs(const double* x) const;  // throws std::invalid_argument
  [[noreturn]] void refuse_scaler_input(std::size_t j, double v) const;  // learned.cpp note "scaler inputs"
  double eval_mlp(const double* x) const;

  Type type_ = Type::linear;
  std::string name_;
  std::vector<std::string> features_;
  std::vector<double> scaler_mean_;   ///< empty: no input scaling
  std::vector<double> scaler_scale_;
  double p10_ = 0, p90_ = 0;
  // linear
  std::vector<double> coef_;
  double intercept_ = 0;
  // trees
  std::vector<FlatTree> trees_;
  // The same trees' nodes in one array, child indices into it (learned.cpp note "flat nodes").
  struct Node {
    double threshold = 0;
    double value = 0;
    int feature = -1;
    int left = 0, right = 0;
    bool missing_left = false;
  };
  std::vector<Node> nodes_;
  std::vector<int> roots_;  ///< each tree's first node in nodes_
  double base_ = 0;
  double scale_ = 1;
  bool float32_inputs_ = false;
  bool average_ = false;    ///< forests: the mean of the trees, not stage-by-stage sums
  bool allow_nan_ = true;   ///< false: a NaN input is refused (absent from the document: routed)
  // mlp
  std::vector<DenseLayer> layers_;
  int widest_ = 0;
  // mean
  std::vector<LearnedModel> members_;

  friend struct LearnedModelReader;
};

}  // namespace srift
