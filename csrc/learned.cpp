#include "srift/learned.hpp"

#include "json_reader.hpp"
#include "learned_document.hpp"
#include "validate.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace srift {
namespace {

using namespace srift::detail::json;  // NOLINT: the reader is this file's vocabulary

FlatTree parse_tree(const Json& t, const std::string& path, int num_features) {
  FlatTree tree;
  known_keys(t, path, {"feature", "threshold", "left", "right", "value", "missing_left"});
  tree.feature = integers(field(t, path, "feature"), path + ".feature");
  tree.threshold = numbers(field(t, path, "threshold"), path + ".threshold");
  tree.left = integers(field(t, path, "left"), path + ".left");
  tree.right = integers(field(t, path, "right"), path + ".right");
  tree.value = numbers(field(t, path, "value"), path + ".value");
  const std::size_t n = tree.feature.size();
  if (n == 0) bad(path + ".feature", "must not be empty");
  // JSON holds no infinity: a split at +inf (scikit-learn's "missing or not" split, every
  // number left, NaN by missing_left) is exported as the largest double and read back as +inf,
  // so that an infinite input, which HistGradientBoosting takes, goes left as there.
  for (double& th : tree.threshold) {
    if (th == std::numeric_limits<double>::max()) th = HUGE_VAL;
  }
  require_size(tree.threshold.size(), n, path + ".threshold");
  require_size(tree.left.size(), n, path + ".left");
  require_size(tree.right.size(), n, path + ".right");
  require_size(tree.value.size(), n, path + ".value");
  // absent: NaN goes right; a null is no array (the schema refuses it), not the field's absence
  if (const Json* m = t.find("missing_left"); m != nullptr) {
    std::vector<int> raw = integers(*m, path + ".missing_left");
    require_size(raw.size(), n, path + ".missing_left");
    for (std::size_t i = 0; i < raw.size(); ++i) {  // stored as uint8: 256 read as 0
      if (raw[i] != 0 && raw[i] != 1) bad(path + ".missing_left[" + std::to_string(i) + "]", "must be 0 or 1");
    }
    tree.missing_left.assign(raw.begin(), raw.end());
  }
  // Children must point strictly forward (sklearn numbers nodes depth-first, parents first):
  // this rules out cycles, so evaluation always ends.
  for (std::size_t i = 0; i < n; ++i) {
    const std::string at = "[" + std::to_string(i) + "]";
    if (tree.feature[i] < 0) continue;
    if (tree.feature[i] >= num_features) {
      bad(path + ".feature" + at, "must be < the number of features (" + std::to_string(num_features) + ")");
    }
    const int l = tree.left[i], r = tree.right[i];
    if (l <= static_cast<int>(i) || l >= static_cast<int>(n)) bad(path + ".left" + at, "must index a later node");
    if (r <= static_cast<int>(i) || r >= static_cast<int>(n)) bad(path + ".right" + at, "must index a later node");
  }
  return tree;
}

Activation parse_activation(const std::string& s, const std::string& path) {
  if (s == "identity") return Activation::identity;
  if (s == "relu") return Activation::relu;
  if (s == "tanh") return Activation::tanh;
  if (s == "logistic") return Activation::logistic;
  bad(path, "must be one of identity, relu, tanh, logistic, got '" + s + "'");
}

double activate(Activation a, double v) {
  switch (a) {
    case Activation::relu: return v > 0 ? v : 0.0;
    case Activation::tanh: return std::tanh(v);
    case Activation::logistic: return 1.0 / (1.0 + std::exp(-v));
    case Activation::identity: break;
  }
  return v;
}

}  // namespace

// Fills a model's input scaling and parameters from their JSON objects (a document's, or a
// mean model's member's: depth 1, where members may not nest).
struct LearnedModelReader {
  static void body(LearnedModel& m, const Json* sc, const Json& model, const std::string& sp, const std::string& mp,
                   int depth) {
    const int nf = m.num_features();
    if (sc != nullptr && sc->t != Json::T::null) {
      known_keys(*sc, sp, {"mean", "scale"});
      m.scaler_mean_ = numbers(field(*sc, sp, "mean"), sp + ".mean");
      m.scaler_scale_ = numbers(field(*sc, sp, "scale"), sp + ".scale");
      require_size(m.scaler_mean_.size(), nf, sp + ".mean");
      require_size(m.scaler_scale_.size(), nf, sp + ".scale");
      for (std::size_t i = 0; i < m.scaler_scale_.size(); ++i) {
        if (!(m.scaler_scale_[i] > 0)) bad(sp + ".scale[" + std::to_string(i) + "]", "must be > 0");
      }
    }
    const std::string type = string(field(model, mp, "type"), mp + ".type");
    if (type == "linear") {
      known_keys(model, mp, {"type", "coef", "intercept"});
      m.type_ = LearnedModel::Type::linear;
      m.coef_ = numbers(field(model, mp, "coef"), mp + ".coef");
      require_size(m.coef_.size(), nf, mp + ".coef");
      m.intercept_ = number(field(model, mp, "intercept"), mp + ".intercept");
    } else if (type == "tree_ensemble") {
      known_keys(model, mp, {"type", "base", "scale", "float32_inputs", "average", "allow_nan", "trees"});
      m.type_ = LearnedModel::Type::tree_ensemble;
      m.base_ = number(field(model, mp, "base"), mp + ".base");
      m.scale_ = number(field(model, mp, "scale"), mp + ".scale");
      m.float32_inputs_ = boolean(field(model, mp, "float32_inputs"), mp + ".float32_inputs");
      if (const Json* a = model.find("average"); a != nullptr) m.average_ = boolean(*a, mp + ".average");
      if (const Json* a = model.find("allow_nan"); a != nullptr) m.allow_nan_ = boolean(*a, mp + ".allow_nan");
      const Json& trees = field(model, mp, "trees");
      if (trees.t != Json::T::array || trees.arr.empty()) bad(mp + ".trees", "must be a non-empty array, got " + shown(trees));
      for (std::size_t i = 0; i < trees.arr.size(); ++i) {
        m.trees_.push_back(parse_tree(trees.arr[i], mp + ".trees[" + std::to_string(i) + "]", nf));
      }
      for (const FlatTree& t : m.trees_) {  // note "flat nodes"
        const int offset = static_cast<int>(m.nodes_.size());
        m.roots_.push_back(offset);
        for (std::size_t i = 0; i < t.feature.size(); ++i) {
          LearnedModel::Node node;
          node.threshold = t.threshold[i];
          node.value = t.value[i];
          node.feature = t.feature[i];
          node.left = offset + t.left[i];
          node.right = offset + t.right[i];
          node.missing_left = !t.missing_left.empty() && t.missing_left[i] != 0;
          m.nodes_.push_back(node);
        }
      }
    } else if (type == "mlp") {
      known_keys(model, mp, {"type", "layers"});
      m.type_ = LearnedModel::Type::mlp;
      const Json& layers = field(model, mp, "layers");
      if (layers.t != Json::T::array || layers.arr.empty()) bad(mp + ".layers", "must be a non-empty array, got " + shown(layers));
      int inputs = nf;
      m.widest_ = nf;
      for (std::size_t li = 0; li < layers.arr.size(); ++li) {
        const std::string path = mp + ".layers[" + std::to_string(li) + "]";
        const Json& layer = layers.arr[li];
        known_keys(layer, path, {"weights", "bias", "activation"});
        const Json& w = field(layer, path, "weights");
        if (w.t != Json::T::array) bad(path + ".weights", "must be an array of rows, got " + shown(w));
        require_size(w.arr.size(), static_cast<std::size_t>(inputs), path + ".weights");
        DenseLayer d;
        d.inputs = inputs;
        d.bias = numbers(field(layer, path, "bias"), path + ".bias");
        d.outputs = static_cast<int>(d.bias.size());
        if (d.outputs == 0) bad(path + ".bias", "must not be empty");
        // every row's length checked before the reserve: a short document cannot ask for
        // inputs x outputs numbers it does not hold
        for (std::size_t r = 0; r < w.arr.size(); ++r) {
          const std::string row_path = path + ".weights[" + std::to_string(r) + "]";
          if (w.arr[r].t != Json::T::array) bad(row_path, "must be an array of numbers");
          require_size(w.arr[r].arr.size(), static_cast<std::size_t>(d.outputs), row_path);
        }
        d.weights.reserve(static_cast<std::size_t>(inputs) * d.outputs);
        for (std::size_t r = 0; r < w.arr.size(); ++r) {
          std::vector<double> row = numbers(w.arr[r], path + ".weights[" + std::to_string(r) + "]");
          require_size(row.size(), static_cast<std::size_t>(d.outputs), path + ".weights[" + std::to_string(r) + "]");
          d.weights.insert(d.weights.end(), row.begin(), row.end());
        }
        d.activation = parse_activation(string(field(layer, path, "activation"), path + ".activation"),
                                        path + ".activation");
        inputs = d.outputs;
        m.widest_ = std::max(m.widest_, d.outputs);
        m.layers_.push_back(std::move(d));
      }
      if (inputs != 1) bad(mp + ".layers", "must end in one output, got " + std::to_string(inputs));
    } else if (type == "mean" && depth == 0) {
      // A scaler in front of the mean was read and then never applied: each member scales its
      // own inputs, so the document's own is refused rather than silently ignored.
      if (sc != nullptr && sc->t != Json::T::null) {
        bad(sp, "must be null for a mean model (each member has its own input_scaler)");
      }
      known_keys(model, mp, {"type", "members"});
      m.type_ = LearnedModel::Type::mean;
      const Json& members = field(model, mp, "members");
      if (members.t != Json::T::array || members.arr.empty()) bad(mp + ".members", "must be a non-empty array, got " + shown(members));
      for (std::size_t i = 0; i < members.arr.size(); ++i) {
        const std::string path = mp + ".members[" + std::to_string(i) + "]";
        const Json& member = members.arr[i];
        if (member.t != Json::T::object) bad(path, "must be an object, got " + shown(member));
        known_keys(member, path, {"input_scaler", "model"});
        LearnedModel sub;
        sub.name_ = m.name_;
        sub.features_ = m.features_;
        body(sub, member.find("input_scaler"), field(member, path, "model"), path + ".input_scaler", path + ".model", 1);
        m.members_.push_back(std::move(sub));
      }
    } else {
      bad(mp + ".type", std::string("must be one of linear, tree_ensemble, mlp") + (depth == 0 ? ", mean" : "") +
                            ", got '" + type + "'");
    }
  }
};

LearnedModel LearnedModel::from_json(const std::string& text) {
  const Json doc = Parser(text).parse_document();
  if (doc.t != Json::T::object) bad("$", "must be an object, got " + shown(doc));
  const std::string schema = string(field(doc, "$", "schema"), "$.schema");
  if (schema != "srift.learned-model/1") {
    bad("$.schema", "must be 'srift.learned-model/1', got '" + schema + "'");
  }
  // Every key of the document the schema refuses, for the kind its name says (compute_ratio,
  // iteration_overhead, ...; another name: a model of its own), read or not
  // (learned_document.hpp): the model's and input_scaler's as they are read below.
  document_structure(doc, "$", document_kind(doc));
  LearnedModel m;
  // As the schema (srift/schemas/learned_model.schema.json): a non-empty name and feature
  // names, and residuals, where the document has them, an object with both quantiles (a lone
  // p10 left p90 at 0, and a list was skipped).
  m.name_ = string(field(doc, "$", "name"), "$.name");
  if (m.name_.empty()) bad("$.name", "must not be empty");
  const Json& feats = field(doc, "$", "features");
  if (feats.t != Json::T::array || feats.arr.empty()) bad("$.features", "must be a non-empty array of names, got " + shown(feats));
  for (std::size_t i = 0; i < feats.arr.size(); ++i) {
    const std::string at = "$.features[" + std::to_string(i) + "]";
    m.features_.push_back(string(feats.arr[i], at));
    if (m.features_.back().empty()) bad(at, "must not be empty");
  }
  if (const Json* r = doc.find("residuals"); r != nullptr) {
    if (r->t != Json::T::object) bad("$.residuals", "must be an object with p10 and p90, got " + shown(*r));
    m.p10_ = number(field(*r, "$.residuals", "p10"), "$.residuals.p10");
    m.p90_ = number(field(*r, "$.residuals", "p90"), "$.residuals.p90");
    for (const auto& [key, v] : {std::pair<const char*, double>{"p10", m.p10_}, {"p90", m.p90_}}) {
      // validate.hpp note "log factor"
      if (!detail::is_log_factor(v)) {
        bad(std::string("$.residuals.") + key, std::string("must be ") + detail::kLogFactorRule + ", got " + detail::fmt(v));
      }
    }
    if (m.p10_ > m.p90_) {
      bad("$.residuals", "must have p10 <= p90, got p10 " + detail::fmt(m.p10_) + " and p90 " + detail::fmt(m.p90_));
    }
  }

  LearnedModelReader::body(m, doc.find("input_scaler"), field(doc, "$", "model"), "$.input_scaler", "$.model", 0);
  return m;
}

double LearnedModel::eval_linear(const double* x) const {
  double y = intercept_;
  for (std::size_t j = 0; j < coef_.size(); ++j) y += coef_[j] * x[j];
  return y;
}

// Note "tree inputs": scikit-learn checks all of X before any tree sees it. Its trees, forests
// and gradient boosting (float32_inputs) convert X to float32 and refuse what is not finite
// there: an infinity, or a number that rounds past the largest float (|x| >= 2^128 - 2^103,
// round-to-nearest-even); HistGradientBoosting takes any double. NaN is refused where the
// estimator's predict refuses it (GradientBoostingRegressor: the document's allow_nan false).
void LearnedModel::check_tree_inputs(const double* x) const {
  constexpr double kFloat32Overflow = 0x1.ffffffp+127;  // the least double that rounds to float +inf
  for (std::size_t j = 0; j < features_.size(); ++j) {
    const double v = x[j];
    const char* why = nullptr;
    if (std::isnan(v)) {
      if (!allow_nan_) why = "this tree ensemble takes no NaN (as scikit-learn's predict refuses it)";
    } else if (float32_inputs_ && !(std::fabs(v) < kFloat32Overflow)) {
      why = "its trees compare float32 inputs, which cannot hold it (as scikit-learn's predict refuses it)";
    }
    if (why != nullptr) {
      throw std::invalid_argument("learned model '" + name_ + "': feature " + features_[j] + " (index " +
                                  std::to_string(j) + ") is " + detail::fmt(v) + ": " + why);
    }
  }
}

// Note "scaler inputs": an input_scaler is scikit-learn's StandardScaler, whose transform checks
// X first (NaN allowed, as missing values, an infinity refused: "Input X contains infinity"),
// whatever model comes after it. A HistGradientBoosting model behind one took an infinite input
// here (its own predict takes any double) and predicted where scikit-learn's pipeline raises;
// a linear or MLP model went on to predict a NaN or an infinity. A finite input that scales past
// the largest double is taken, as scikit-learn takes it (its check is on the input).
void LearnedModel::refuse_scaler_input(std::size_t j, double v) const {
  throw std::invalid_argument("learned model '" + name_ + "': feature " + features_[j] + " (index " +
                              std::to_string(j) + ") is " + detail::fmt(v) +
                              ": its input_scaler (scikit-learn's StandardScaler) takes no infinite input (as "
                              "scikit-learn's transform refuses it)");
}

namespace {
// n doubles of scratch, on the stack when n <= 64 (the models here have tens of features): an
// evaluation allocates nothing in the usual case.
class Scratch {
 public:
  explicit Scratch(std::size_t n) : data_(stack_) {
    if (n > kOnStack) {
      heap_.resize(n);
      data_ = heap_.data();
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  double* data() { return data_; }

 private:
  static constexpr std::size_t kOnStack = 64;
  double stack_[kOnStack];
  std::vector<double> heap_;
  double* data_;
};
}  // namespace

// Summed in scikit-learn's order, so that the two agree to the last bit: gradient boosting
// adds each stage to the running prediction (GradientBoostingRegressor's predict_stages:
// out += learning_rate * tree; HistGradientBoosting: out += tree, from its baseline), and a
// forest adds its trees from 0 and then divides by their number (ForestRegressor.predict).
// base + scale * (sum of the trees) differed from both in the last bits: 1e-7 relative where
// the prediction is a small difference of large stages.
// Note "flat nodes": the trees are walked in one array of nodes (threshold, leaf value, feature,
// children), each input converted to float32 once rather than at every split it meets, and with
// no NaN among the inputs (the usual case) without asking at every split whether it is one (the
// same comparisons, so the same leaves and the same sum, bit for bit): the absolute model's 150
// trees were evaluated thousands of times per catalog (learned_compute.cpp note "memo by inputs").
double LearnedModel::eval_trees(const double* x) const {
  check_tree_inputs(x);
  const std::size_t n = features_.size();
  Scratch buffer(n);
  double* in = buffer.data();
  bool any_nan = false;
  for (std::size_t j = 0; j < n; ++j) {
    any_nan = any_nan || std::isnan(x[j]);
    in[j] = (float32_inputs_ && !std::isnan(x[j])) ? static_cast<double>(static_cast<float>(x[j])) : x[j];
  }
  double sum = average_ ? 0.0 : base_;
  const Node* nodes = nodes_.data();
  for (int root : roots_) {
    const Node* node = nodes + root;
    if (any_nan) {
      while (node->feature >= 0) {
        const double v = in[node->feature];
        const bool left = std::isnan(v) ? node->missing_left : v <= node->threshold;
        node = nodes + (left ? node->left : node->right);
      }
    } else {
      while (node->feature >= 0) node = nodes + (in[node->feature] <= node->threshold ? node->left : node->right);
    }
    if (average_) {
      sum += node->value;
    } else {
      sum += scale_ * node->value;
    }
  }
  if (average_) return base_ + scale_ * (sum / static_cast<double>(trees_.size()));
  return sum;
}

double LearnedModel::eval_mlp(const double* x) const {
  std::vector<double> a(x, x + num_features());
  std::vector<double> b;
  for (const DenseLayer& d : layers_) {
    b.assign(static_cast<std::size_t>(d.outputs), 0.0);
    for (int i = 0; i < d.inputs; ++i) {
      const double xi = a[i];
      const double* row = d.weights.data() + static_cast<std::size_t>(i) * d.outputs;
      for (int o = 0; o < d.outputs; ++o) b[o] += xi * row[o];
    }
    for (int o = 0; o < d.outputs; ++o) b[o] = activate(d.activation, b[o] + d.bias[o]);
    a.swap(b);
  }
  return a[0];
}

double LearnedModel::predict(const double* x, std::size_t n) const {
  if (n != features_.size()) {
    throw std::invalid_argument("model '" + name_ + "' takes " + std::to_string(features_.size()) +
                                " features, got " + std::to_string(n));
  }
  const double y = eval(x, n);
  if (!std::isfinite(y)) {
    std::string first_bad;
    for (std::size_t j = 0; j < n && first_bad.empty(); ++j) {
      if (!std::isfinite(x[j])) first_bad = "; feature " + features_[j] + " is " + detail::fmt(x[j]);
    }
    throw std::invalid_argument("learned model '" + name_ + "' predicts " + detail::fmt(y) +
                                ", not a finite number" + first_bad +
                                (first_bad.empty() ? " (its parameters overflow on these features)" : ""));
  }
  return y;
}

double LearnedModel::eval(const double* x, std::size_t n) const {
  if (type_ == Type::mean) {
    double sum = 0;
    for (const LearnedModel& member : members_) sum += member.eval(x, n);
    return sum / static_cast<double>(members_.size());
  }
  if (type_ == Type::tree_ensemble && scaler_mean_.empty()) return eval_trees(x);
  Scratch buffer(n);
  double* z = buffer.data();
  for (std::size_t j = 0; j < n; ++j) {
    if (!scaler_mean_.empty()) {
      if (std::isinf(x[j])) refuse_scaler_input(j, x[j]);
      z[j] = (x[j] - scaler_mean_[j]) / scaler_scale_[j];
    } else {
      z[j] = x[j];
    }
  }
  switch (type_) {
    case Type::linear: return eval_linear(z);
    case Type::tree_ensemble: return eval_trees(z);
    case Type::mlp: return eval_mlp(z);
    case Type::mean: break;  // handled above
  }
  return 0;
}

void LearnedModel::predict_batch(const double* x, std::size_t rows, std::size_t cols, double* out) const {
  if (cols != features_.size()) {
    throw std::invalid_argument("model '" + name_ + "' takes " + std::to_string(features_.size()) +
                                " features per row, got " + std::to_string(cols));
  }
  for (std::size_t r = 0; r < rows; ++r) out[r] = predict(x + r * cols, cols);
}

}  // namespace srift
