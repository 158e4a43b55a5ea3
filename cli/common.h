// Pieces aim-train and aim-infer share: usage errors, device and list flags, the model list,
// and appending a results line. Boost.Program_options stays in the mains.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/device.h"

namespace aim::cli {

// A wrong flag or value: the main prints it with "(see --help)" and exits with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --device: "" = cuda when a GPU is present, else cpu; checks that the device exists.
Device resolve_device(const std::string& value);
// A flag holding one integer >= `min` or a comma-separated list ("256" or "128,256,512");
// anything else is a UsageError naming the flag.
std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& value, int64_t min);
inline std::vector<int64_t> parse_positive_list(const std::string& flag, const std::string& value) {
  return parse_int_list(flag, value, 1);
}
// `--list`: one line per registered model (name, task, description, config keys).
void print_models(std::ostream& os);
// Appends `line` as one JSON line to `path` (creating it) in one write: on a short or failed
// write (a full disk) the file is cut back to its previous size, so no half line is ever left;
// errors name the flag and the file.
void append_results(const std::string& path, const nlohmann::json& line);
// Calls per "op/variant" so far, and the calls made since `before` as a JSON object (results
// files: the kernel variants that ran during one run of a sweep), with any substitutions.
std::map<std::string, int64_t> variant_counts();
nlohmann::json variants_since(const std::map<std::string, int64_t>& before);
nlohmann::json substitutions_json();
// Sets the OpenMP threads (0 = leave the default); negative is a usage error; more threads than
// the machine's cores is allowed (a benchmark may want it) with a warning on stderr.
void set_threads(int threads);
// A flag's unsigned 64-bit value ("--seed"): digits only, so "-1" is an error, not 2^64 - 1.
uint64_t parse_u64(const std::string& flag, const std::string& value);
// --kernels SPEC / --kernels-fallback (README, kernels/registry.h): own | vendor | default |
// op=variant,... over AIM_KERNELS; an unknown op or keyword is a UsageError naming the flag.
void set_kernels(const std::string& spec, bool given, bool fallback);
// Output paths are checked before any work (a run is not lost to a typo in its last step):
// a file's folder must exist and be writable and the path must not be a folder; a folder
// (--checkpoint-dir) is created now. UsageError naming the flag and the path otherwise.
void check_output_file(const std::string& flag, const std::string& path);
void prepare_output_dir(const std::string& flag, const std::string& dir);
// --tf32 on|off|conv|matmul: sets where fp32 vendor convolutions / matmuls may use TF32
// (kernels/math_mode.h); anything else is a UsageError naming the flag and the allowed values.
inline constexpr const char* kTf32Help =
    "TF32 for fp32 cuDNN/cuBLAS: on | off | conv | matmul (default conv: convolutions may use "
    "TF32, matmul not, as PyTorch)";
void set_tf32(const std::string& value);
// --winograd 4|2|off: the largest Winograd tile of the CPU's fp32 3x3 convolutions
// (kernels/math_mode.h); anything else is a UsageError naming the flag and the allowed values.
inline constexpr const char* kWinogradHelp =
    "CPU fp32 3x3 and 5x5 convolutions: 4 (default: Winograd F(4x4,3x3) from 16x16 outputs up, "
    "F(2x2,3x3) below, F(2x2,5x5) for 5x5; fastest, ~5e-4 from the direct sum) | 2 (F(2x2,3x3) "
    "only, ~1e-4) | off (im2col: the direct sum's rounding, as PyTorch's CPU convolutions)";
void set_winograd(const std::string& value);
inline constexpr const char* kDenormalsHelp =
    "CPU subnormal floats: flush (default: to zero, as TensorFlow; they are slow on the CPU) | "
    "keep (IEEE gradual underflow, PyTorch's default)";
// --denormals flush|keep on this thread and the OpenMP workers (call after set_threads).
void set_denormals(const std::string& value);
inline constexpr const char* kDeterministicHelp =
    "bit-identical results at any --threads and run to run: the kernels whose sums follow the "
    "team size (CPU) or use float atomics (CUDA) run their deterministic variants, cuDNN only "
    "deterministic algorithms; slower on several threads (docs/determinism.md)";
// --deterministic: sets the kernel selection's mode (kernels/math_mode.h) and, when on, says so
// on stdout with the variants it replaces.
void set_deterministic(bool on);

// The fields every results line ends with (aim-train and aim-infer alike): the kernel variants
// called since `before` and any substitutions, the cuDNN convolution algorithms, the TF32
// setting, --deterministic (with the ops that had no deterministic variant), the environment, the
// git commit and the command line.
void add_run_fields(nlohmann::json& j, const std::map<std::string, int64_t>& before, int argc,
                    char** argv);
// Runs a CLI's body and maps its failures to the exit status: a UsageError prints
// "<prog>: <what>\n(see <prog> --help)" and gives 2, an aim::Error prints "<prog>: error: <what>"
// and gives 1 (the message without the internal "[check: ...]" and "(file.cpp:N)" parts unless
// AIM_DEBUG is set); std::bad_alloc prints what ran out and the flags that shrink the run, and
// gives 1. Anything else propagates.
int run_cli(const char* prog, const std::function<int()>& body);

}  // namespace aim::cli
