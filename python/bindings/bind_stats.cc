// SPDX-License-Identifier: Apache-2.0
//
// Read-only Python views of the engine's statistics snapshots
// (feedline/pipeline/stats.h). Durations are float seconds; counters are
// totals since the pipeline started.

#include <functional>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "feedline/base/proc_usage.h"
#include "feedline/pipeline/histogram.h"
#include "feedline/pipeline/stats.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

double seconds(std::chrono::nanoseconds d) {
  return static_cast<double>(d.count()) * 1e-9;
}

// Duration member or getter M of T, in seconds: a property getter.
template <typename T, auto M>
double secs(const T& x) {
  return seconds(std::invoke(M, x));
}

}  // namespace

void bind_stats(nb::module_& m) {
  nb::class_<ProcessGroupUsage>(
      m, "ProcessGroupResourceUsage",
      "One sample of a process group's resources, read from /proc "
      "(ProcessGroupStatsMonitor).")
      .def_ro("pid", &ProcessGroupUsage::pid, "The monitoring process.")
      .def_ro("pgid", &ProcessGroupUsage::pgid)
      .def_ro("cpu_percent", &ProcessGroupUsage::cpu_percent,
              "CPU time of the group per wall second since the previous "
              "sample, in percent of one CPU; None on the first.")
      .def_ro("rss_bytes", &ProcessGroupUsage::rss_bytes)
      .def_ro("pss_bytes", &ProcessGroupUsage::pss_bytes,
              "None when no smaps_rollup could be read.")
      .def_ro("private_bytes", &ProcessGroupUsage::private_bytes)
      .def_ro("disk_read_bytes", &ProcessGroupUsage::disk_read_bytes,
              "None when no /proc/<pid>/io could be read.")
      .def_ro("disk_write_bytes", &ProcessGroupUsage::disk_write_bytes)
      .def_ro("num_procs", &ProcessGroupUsage::num_procs)
      .def_ro("net_rx_bytes", &ProcessGroupUsage::net_rx_bytes,
              "Host-wide bytes received (not on lo) since the previous "
              "sample; None on the first.")
      .def_ro("net_tx_bytes", &ProcessGroupUsage::net_tx_bytes)
      .def_ro("problems", &ProcessGroupUsage::problems,
              "Malformed /proc files met for the first time, one per kind.")
      .def("__repr__", [](const ProcessGroupUsage& u) {
        return "<ProcessGroupResourceUsage pgid=" + std::to_string(u.pgid) +
               " procs=" + std::to_string(u.num_procs) +
               " rss=" + std::to_string(u.rss_bytes) + ">";
      });
  nb::class_<ProcessGroupMonitor>(
      m, "_ProcessGroupMonitor",
      "Samples a process group's resources from /proc (proc_usage.h).")
      .def(nb::init<int, std::string>(), nb::arg("pgid") = 0,
           nb::arg("proc_root") = "/proc")
      .def_prop_ro("pgid", &ProcessGroupMonitor::pgid)
      .def(
          "sample",
          [](ProcessGroupMonitor& monitor) {
            ReleaseGil release;
            return monitor.sample();
          },
          "Reads every process of the group now (without the GIL).");

  nb::class_<LatencyHistogram>(
      m, "LatencyHistogram",
      "Durations of calls, in log-linear buckets (values within 12.5%).")
      .def_prop_ro("count", &LatencyHistogram::count)
      .def_prop_ro("total", &secs<LatencyHistogram, &LatencyHistogram::sum>,
                   "Sum of all durations, in seconds.")
      .def_prop_ro("mean", &secs<LatencyHistogram, &LatencyHistogram::mean>)
      .def_prop_ro("max", &secs<LatencyHistogram, &LatencyHistogram::max>)
      .def(
          "quantile",
          [](const LatencyHistogram& h, double q) {
            return seconds(h.quantile(q));
          },
          nb::arg("q"),
          "The duration at quantile q in [0, 1], in seconds (0 when empty).")
      .def("since", &LatencyHistogram::since, nb::arg("earlier"),
           "What was recorded after `earlier`, an older snapshot of the same "
           "histogram.");

  nb::class_<QueueStats>(m, "QueueStats", "The queue in front of a stage.")
      .def_ro("capacity", &QueueStats::capacity)
      .def_ro("depth", &QueueStats::depth)
      .def_ro("max_depth", &QueueStats::max_depth)
      .def_ro("items_put", &QueueStats::items_put)
      .def_ro("items_got", &QueueStats::items_got)
      .def_prop_ro("time_empty", &secs<QueueStats, &QueueStats::time_empty>)
      .def_prop_ro("time_full", &secs<QueueStats, &QueueStats::time_full>)
      .def_prop_ro("elapsed", &secs<QueueStats, &QueueStats::elapsed>)
      .def_prop_ro("put_wait", &secs<QueueStats, &QueueStats::put_wait>,
                   "Total time the producer waited for room, in seconds.")
      .def_prop_ro("get_wait", &secs<QueueStats, &QueueStats::get_wait>,
                   "Total time the consumer waited for an item, in seconds.")
      .def_prop_ro("occupancy", &QueueStats::occupancy,
                   "Mean depth / capacity over the elapsed time, in [0, 1].");

  nb::class_<StageStats>(m, "StageStats", "One stage's counters.")
      .def_ro("name", &StageStats::name)
      .def_ro("kind", &StageStats::kind)
      .def_ro("concurrency", &StageStats::concurrency)
      .def_ro("items_in", &StageStats::items_in)
      .def_ro("items_out", &StageStats::items_out)
      .def_ro("items_skipped", &StageStats::items_skipped)
      .def_ro("calls", &StageStats::calls)
      .def_ro("failures", &StageStats::failures)
      .def_ro("epochs", &StageStats::epochs)
      .def_ro("op_time", &StageStats::op_time)
      .def_prop_ro("wait_input", &secs<StageStats, &StageStats::wait_input>)
      .def_prop_ro("wait_output", &secs<StageStats, &StageStats::wait_output>)
      .def_ro("gil_acquisitions", &StageStats::gil_acquisitions,
              "Times the stage's Python calls took the GIL (0: native).")
      .def_prop_ro("gil_wait", &secs<StageStats, &StageStats::gil_wait>,
                   "Seconds its calls waited to take the GIL.")
      .def_prop_ro("gil_held", &secs<StageStats, &StageStats::gil_held>,
                   "CPU seconds its calls used while holding the GIL.")
      .def_ro("finished", &StageStats::finished)
      .def_ro("failed", &StageStats::failed)
      .def_ro("input_queue", &StageStats::input_queue);

  nb::class_<RegionStats>(
      m, "RegionStats",
      "The stages of a placement region, summed over its worker processes.")
      .def_ro("name", &RegionStats::name)
      .def_ro("host_stage", &RegionStats::host_stage,
              "Index in PipelineStats.stages of the stage that feeds it.")
      .def_ro("workers", &RegionStats::workers)
      .def_ro("reporting", &RegionStats::reporting,
              "Workers whose counters are included.")
      .def_ro("stages", &RegionStats::stages);

  m.def(
      "encode_stage_stats",
      [](const std::vector<StageStats>& stages) {
        std::string record = encode_stage_stats(stages);
        return nb::bytes(record.data(), record.size());
      },
      nb::arg("stages"),
      "A compact record of `stages` for another process of this machine "
      "(Pipeline.report_region there).");

  nb::class_<Bottleneck>(
      m, "Bottleneck",
      "The stage that limits throughput and why (PipelineStats.bottleneck()).")
      .def_ro("kind", &Bottleneck::kind,
              "'consumer', 'gil', 'stage', 'threads' or 'none'.")
      .def_ro("stage", &Bottleneck::stage,
              "Index in PipelineStats.stages, or -1.")
      .def_ro("stage_name", &Bottleneck::stage_name)
      .def_ro("reason", &Bottleneck::reason)
      .def_ro("advice", &Bottleneck::advice)
      .def("__repr__", [](const Bottleneck& b) {
        return "<Bottleneck " + b.kind + " " +
               (b.stage_name.empty() ? "-" : b.stage_name) + ": " + b.reason +
               ">";
      });

  nb::class_<AutotuneDecision>(
      m, "AutotuneDecision",
      "One change autotune made (PipelineStats.autotune).")
      .def_prop_ro("at", &secs<AutotuneDecision, &AutotuneDecision::at>,
                   "Seconds since the pipeline started.")
      .def_ro("stage", &AutotuneDecision::stage,
              "Index in PipelineStats.stages; -1: the pool's threads.")
      .def_ro("target", &AutotuneDecision::target,
              "The stage's name, or 'threads'.")
      .def_ro("before", &AutotuneDecision::from,
              "Concurrency (or active threads) before.")
      .def_ro("after", &AutotuneDecision::to, "... and after.")
      .def_ro("reason", &AutotuneDecision::reason)
      .def("__repr__", [](const AutotuneDecision& d) {
        return "<AutotuneDecision " + d.target + " " + std::to_string(d.from) +
               " -> " + std::to_string(d.to) + ": " + d.reason + ">";
      });

  nb::class_<AutotuneStats>(m, "AutotuneStats",
                            "What autotune did (PipelineStats.autotune).")
      .def_ro("enabled", &AutotuneStats::enabled)
      .def_ro("cpu_budget", &AutotuneStats::cpu_budget,
              "CPUs the pool may use (the share times the machine's CPUs).")
      .def_ro("cpu_used", &AutotuneStats::cpu_used,
              "CPUs the pool used in the controller's last interval.")
      .def_ro("decisions", &AutotuneStats::decisions,
              "The latest changes (at most 256), oldest first.")
      .def_ro("decisions_total", &AutotuneStats::decisions_total,
              "Changes made, including those no longer listed.");

  nb::class_<PipelineStats>(
      m, "PipelineStats",
      "A snapshot of every stage's counters (totals since start).")
      .def_ro("name", &PipelineStats::name)
      .def_ro("num_threads", &PipelineStats::num_threads)
      .def_prop_ro("elapsed", &secs<PipelineStats, &PipelineStats::elapsed>)
      .def_ro("stages", &PipelineStats::stages)
      .def_ro("items_delivered", &PipelineStats::items_delivered)
      .def_ro("regions", &PipelineStats::regions,
              "RegionStats of each placement region, after its host stage.")
      .def_ro("autotune", &PipelineStats::autotune,
              "AutotuneStats: the changes autotune made (enabled is False "
              "when it is off).")
      .def("to_json", &to_json,
           "One JSON object on one line, with every field (durations in "
           "seconds, keys ending in _s).")
      .def("format_table", &format_table,
           "A human-readable table, one row per stage, and the bottleneck.")
      .def_static("from_json", &stats_from_json, nb::arg("record"),
                  "Reads one object of to_json() back (a line of a JSON "
                  "Lines export). Raises FormatError naming a bad field.")
      .def("bottleneck", &find_bottleneck,
           "The stage that limits throughput, the kind of limit, the figures "
           "behind it and what to change (docs/stats.md).")
      .def("__repr__", [](const PipelineStats& p) {
        return "<PipelineStats " + p.name + ": " +
               std::to_string(p.stages.size()) + " stages, " +
               std::to_string(p.items_delivered) + " items delivered>";
      });
}

}  // namespace feedline::bindings
