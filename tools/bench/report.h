// How brigade-bench shows what it measured: each level's rows as a table on stdout and as the
// JSON rows of --json, and the JSON file written. brigade-bench.cpp reads the command line and
// measures; each level's rows come here, in the order it measures them.
//
// "%peak" (the op, model and runtime tables, JSON "fraction_of_peak") is a row's GFLOP/s over
// the yardstick of its device (peak.h): a CPU row's, the FMA peak of the same thread count; a
// GPU row's, cuBLAS SGEMM on cuda:0. 0 where there is none.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "tools/bench/call_count_bench.h"
#include "tools/bench/gemm_bf16_bench.h"
#include "tools/bench/model_bench.h"
#include "tools/bench/op_bench.h"
#include "tools/bench/peak.h"
#include "tools/bench/runtime_bench.h"

namespace brigade::bench {

// The yardsticks: the CPU's per thread count, and (gpu_peak > 0) the GPU's SGEMM of n = gpu_peak_n.
// JSON "peak", and with `gpus` > 0 "gpu_peak_sgemm_gflops" and "gpu_peak_sgemm_n".
void print_peaks(const std::map<int, Peak>& peaks, int gpus, double gpu_peak, int gpu_peak_n,
                 nlohmann::json* out);

// The op level's table and its JSON rows ("ops").
void print_op_rows(const std::vector<OpRow>& rows, const std::map<int, Peak>& peaks,
                   double gpu_peak, nlohmann::json* out);

// The model level's table and its JSON rows ("model").
void print_model_rows(const std::vector<ModelRow>& rows, const std::string& model_name,
                      const model::ModelSpec& spec, const std::map<int, Peak>& peaks,
                      double gpu_peak, nlohmann::json* out);

// The runtime level's table and its JSON rows ("runtime").
void print_runtime_rows(const std::vector<RuntimeRow>& rows, const std::string& model_name,
                        const model::ModelSpec& spec, const std::map<int, Peak>& peaks,
                        double gpu_peak, nlohmann::json* out);

// The gemm level's table at `batch`, its total row, and its JSON rows ("gemm").
void print_gemm_rows(const std::vector<GemmRow>& rows, int64_t batch, nlohmann::json* out);

// The calls of a GPU training step, one row per (device, path, batch, precision), and its top
// entry points; JSON rows "calls".
void print_call_counts(const std::vector<CallCountRow>& rows, const std::string& model_name,
                       const CallCountOptions& o, nlohmann::json* out);

// --json FILE: every figure printed, as JSON (nothing when json_path is empty).
void write_json_if_asked(const nlohmann::json& out, const std::string& json_path);

}  // namespace brigade::bench
