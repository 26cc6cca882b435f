#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <exception>
#include <thread>

#include "bindings.hpp"
#include "srift/search.hpp"

namespace py = pybind11;

namespace srift::bindings {
namespace {

// Runs a long core call on a worker thread with the GIL released, polling Python's signal
// handlers every 20 ms so Ctrl-C cancels it through the token; returns as soon as the call
// ends (a condition variable, not a sleep) and rethrows the core's exceptions here.
template <class Fn>
SearchResult run_cancellable(Fn&& fn, CancelToken& token) {
  SearchResult result;
  std::exception_ptr error;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  bool interrupted = false;
  {
    py::gil_scoped_release release;
    std::thread worker([&] {
      try {
        result = fn(token);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex);
      done = true;
      finished.notify_one();
    });
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        if (finished.wait_for(lock, std::chrono::milliseconds(20), [&] { return done; })) break;
      }
      py::gil_scoped_acquire acquire;
      if (!interrupted && PyErr_CheckSignals() != 0) {
        interrupted = true;
        token.cancel();
      }
    }
    worker.join();
  }
  if (interrupted) throw py::error_already_set();
  if (error) std::rethrow_exception(error);
  return result;
}

}  // namespace

void bind_search(py::module_& m) {
  m.attr("MAX_TOP_K") = kMaxTopK;
  py::enum_<Market>(m, "Market").value("on_demand", Market::on_demand).value("spot", Market::spot);
  py::enum_<Objective>(m, "Objective")
      .value("min_cost", Objective::min_cost)
      .value("max_throughput", Objective::max_throughput);

  py::class_<CancelToken>(m, "CancelToken")
      .def(py::init<>())
      .def("cancel", &CancelToken::cancel)
      .def_property_readonly("cancelled", &CancelToken::is_cancelled);

  py::class_<Offer>(m, "Offer")
      .def(py::init<>())
      .def_readwrite("instance", &Offer::instance)
      .def_readwrite("region", &Offer::region)
      .def_readwrite("market", &Offer::market)
      .def_readwrite("usd_per_hour", &Offer::usd_per_hour)
      .def_readwrite("max_count", &Offer::max_count)
      .def_readwrite("compute", &Offer::compute)
      .def_readwrite("interruptions_per_hour", &Offer::interruptions_per_hour)
      .def_readwrite("band", &Offer::band);

  py::class_<PlanGroup>(m, "PlanGroup", "count instances of offer `offer` (an index into offers).")
      .def(py::init<>())
      .def(py::init([](int offer, int count) { return PlanGroup{offer, count}; }), py::arg("offer"),
           py::arg("count"))
      .def_readwrite("offer", &PlanGroup::offer)
      .def_readwrite("count", &PlanGroup::count)
      .def("__repr__", [](const PlanGroup& g) {
        return "PlanGroup(offer=" + std::to_string(g.offer) + ", count=" + std::to_string(g.count) + ")";
      });

  py::class_<SearchRequest>(m, "SearchRequest")
      .def(py::init<>())
      .def_readwrite("workload", &SearchRequest::workload)
      .def_readwrite("instances", &SearchRequest::instances)
      .def_readwrite("offers", &SearchRequest::offers)
      .def_readwrite("global_batch", &SearchRequest::global_batch)
      .def_readwrite("iterations", &SearchRequest::iterations)
      .def_readwrite("objective", &SearchRequest::objective)
      .def_readwrite("deadline_s", &SearchRequest::deadline_s)
      .def_readwrite("budget_usd", &SearchRequest::budget_usd)
      .def_readwrite("max_usd_per_hour", &SearchRequest::max_usd_per_hour)
      .def_readwrite("max_types", &SearchRequest::max_types)
      .def_readwrite("max_instances", &SearchRequest::max_instances)
      .def_readwrite("top_k", &SearchRequest::top_k)
      .def_readwrite("threads", &SearchRequest::threads)
      .def_readwrite("collect_pareto", &SearchRequest::collect_pareto)
      .def_readwrite("usable_memory_fraction", &SearchRequest::usable_memory_fraction)
      .def_readwrite("max_accumulation_steps", &SearchRequest::max_accumulation_steps)
      .def_readwrite("max_local_batch", &SearchRequest::max_local_batch)
      .def_readwrite("min_gpu_memory_bytes", &SearchRequest::min_gpu_memory_bytes)
      .def_readwrite("held", &SearchRequest::held)
      .def_readwrite("deadline_confidence", &SearchRequest::deadline_confidence)
      .def_readwrite("spot", &SearchRequest::spot)
      .def_readwrite("scaling_band", &SearchRequest::scaling_band)
      .def_readwrite("time_limit_s", &SearchRequest::time_limit_s)
      .def("validate", &SearchRequest::validate);

  py::class_<Plan>(m, "Plan")
      .def_readonly("groups", &Plan::groups)
      .def_readonly("iteration", &Plan::iteration)
      .def_readonly("total_s", &Plan::total_s)
      .def_readonly("total_usd", &Plan::total_usd)
      .def_readonly("spot", &Plan::spot)
      .def_readonly("band", &Plan::band)
      .def_readonly("deadline_probability", &Plan::deadline_probability);

  py::class_<SearchStats>(m, "SearchStats")
      .def_readonly("evaluated", &SearchStats::evaluated)
      .def_readonly("feasible", &SearchStats::feasible)
      .def_readonly("infeasible_memory", &SearchStats::infeasible_memory)
      .def_readonly("infeasible_batch", &SearchStats::infeasible_batch)
      .def_readonly("violated_deadline", &SearchStats::violated_deadline)
      .def_readonly("violated_budget", &SearchStats::violated_budget)
      .def_readonly("pruned", &SearchStats::pruned)
      .def_readonly("nodes", &SearchStats::nodes)
      .def_readonly("space", &SearchStats::space)
      .def_readonly("cancelled", &SearchStats::cancelled)
      .def_readonly("seconds", &SearchStats::seconds);

  py::class_<SearchResult>(m, "SearchResult")
      .def_readonly("plans", &SearchResult::plans)
      .def_readonly("pareto", &SearchResult::pareto)
      .def_readonly("closest", &SearchResult::closest)
      .def_readonly("stats", &SearchResult::stats)
      .def_readonly("why_none", &SearchResult::why_none)
      .def_readonly("optimal", &SearchResult::optimal)
      .def_readonly("gap", &SearchResult::gap);

  m.def(
      "search_exhaustive",
      [](const SearchRequest& request, CancelToken* token) {
        request.validate();  // bad input raises before any thread starts
        CancelToken local;
        CancelToken& t = token != nullptr ? *token : local;
        return run_cancellable([&](CancelToken& tok) { return search_exhaustive(request, &tok); }, t);
      },
      py::arg("request"), py::arg("cancel") = nullptr,
      "Exhaustive plan search (the reference; small spaces). Ctrl-C cancels and raises "
      "KeyboardInterrupt.");

  m.def(
      "search",
      [](const SearchRequest& request, CancelToken* token) {
        request.validate();
        CancelToken local;
        CancelToken& t = token != nullptr ? *token : local;
        return run_cancellable([&](CancelToken& tok) { return search(request, &tok); }, t);
      },
      py::arg("request"), py::arg("cancel") = nullptr,
      "Exact branch-and-bound plan search (all regions, up to max_types offers per plan). "
      "Stops at request.time_limit_s or on cancel with result.optimal False and result.gap; "
      "Ctrl-C cancels and raises KeyboardInterrupt.");
}

}  // namespace srift::bindings
