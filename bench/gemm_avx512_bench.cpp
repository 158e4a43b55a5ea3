// Benchmark: aim::kernels::sgemm_avx512 vs OpenBLAS cblas_sgemm, best-of-N GFLOP/s.
//
// Build:  g++ -std=c++17 -O3 -fopenmp -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma
//           -c kernels/matmul/gemm_avx512.cpp -I. -o /tmp/gemm_avx512.o
//         g++ -std=c++17 -O2 -fopenmp bench/gemm_avx512_bench.cpp /tmp/gemm_avx512.o -I.
//           -lopenblas -o /tmp/gemm_avx512_bench
// Run:    OMP_NUM_THREADS=2 /tmp/gemm_avx512_bench [--reps N] [--shape M,N,K,TA,TB]...
//
// Columns: "aim" = sgemm_avx512; "openblas" = cblas_sgemm in the current environment (here
// OPENBLAS_CORETYPE=Haswell, OPENBLAS_L2_SIZE=512 -> AVX2 kernels); "openblas-avx512" =
// cblas_sgemm in a child process of this program started with both variables removed from its
// environment (OpenBLAS then uses its SkylakeX AVX-512 kernels). The child is skipped with
// --no-child. Every result is checked against OpenBLAS before timing.
#include <cblas.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul/gemm_avx512.h"

namespace {

struct Shape {
  int64_t m, n, k;
  bool ta, tb;
};

std::string shape_name(const Shape& s) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%lldx%lldx%lld %c%c", (long long)s.m, (long long)s.n,
                (long long)s.k, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N');
  return buf;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Problem {
  Shape s;
  int64_t lda, ldb, ldc;
  std::vector<float> a, b, c;
  explicit Problem(const Shape& sh) : s(sh) {
    lda = s.ta ? s.m : s.k;  // stored A is K x M when transposed
    ldb = s.tb ? s.k : s.n;
    ldc = s.n;
    a.resize(size_t(s.m * s.k));
    b.resize(size_t(s.k * s.n));
    c.resize(size_t(s.m * s.n));
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (auto& x : a) x = d(rng);
    for (auto& x : b) x = d(rng);
  }
  void run_aim() {
    aim::kernels::sgemm_avx512(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                               c.data(), ldc);
  }
  void run_blas() {
    cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                int(s.m), int(s.n), int(s.k), 1.0f, a.data(), int(lda), b.data(), int(ldb), 0.0f,
                c.data(), int(ldc));
  }
};

// Best-of time over `reps` timed rounds after a warm-up; each round repeats the call enough times
// to last >= ~20 ms to smooth timer noise on tiny shapes.
template <class F>
double best_seconds(F&& f, int reps) {
  f();  // warm-up (also touches buffers)
  double t0 = now();
  f();
  double one = std::max(now() - t0, 1e-7);
  int inner = std::max(1, int(0.02 / one));
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t = now();
    for (int i = 0; i < inner; ++i) f();
    best = std::min(best, (now() - t) / inner);
  }
  return best;
}

double gflops(const Shape& s, double sec) { return 2.0 * s.m * s.n * s.k / sec * 1e-9; }

std::vector<Shape> default_shapes() {
  return {
      {4096, 4096, 1024, false, false}, {4096, 4096, 1024, true, false},
      {4096, 4096, 1024, false, true},  {4096, 4096, 1024, true, true},
      {2048, 2048, 2048, false, false}, {1024, 1024, 1024, false, false},
      {1024, 1024, 1024, true, true},   {1000, 1000, 1000, false, false},
      {512, 512, 512, false, false},    {256, 256, 256, false, false},
      {128, 128, 128, false, false},    {64, 4096, 1024, false, false},
      {4096, 64, 1024, false, false},   {1, 4096, 1024, false, false},
      {4096, 1, 1024, false, false},    {4096, 1024, 4096, false, true},
  };
}

bool parse_shape(const char* arg, Shape* s) {
  long long m, n, k;
  int ta = 0, tb = 0;
  int got = std::sscanf(arg, "%lld,%lld,%lld,%d,%d", &m, &n, &k, &ta, &tb);
  if (got < 3) return false;
  *s = Shape{m, n, k, ta != 0, tb != 0};
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 10;
  bool child = false, no_child = false;
  std::vector<Shape> shapes;
  std::vector<std::string> shape_args;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--child-openblas")) {
      child = true;
    } else if (!std::strcmp(argv[i], "--no-child")) {
      no_child = true;
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      Shape s;
      if (!parse_shape(argv[i + 1], &s)) {
        std::fprintf(stderr, "bad --shape %s (want M,N,K[,TA,TB])\n", argv[i + 1]);
        return 2;
      }
      shape_args.push_back(argv[++i]);
      shapes.push_back(s);
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--shape M,N,K[,TA,TB]]... [--no-child]\n",
                   argv[0]);
      return 2;
    }
  }
  if (shapes.empty()) shapes = default_shapes();

  if (child) {  // OpenBLAS-only timing, environment prepared by the parent.
    for (const Shape& s : shapes) {
      Problem p(s);
      double t = best_seconds([&] { p.run_blas(); }, reps);
      std::printf("%s|%.1f\n", shape_name(s).c_str(), gflops(s, t));
    }
    return 0;
  }

  if (!aim::kernels::cpu_has_avx512()) {
    std::fprintf(stderr, "CPU lacks AVX-512; nothing to benchmark\n");
    return 1;
  }

  std::printf("threads=%d  OPENBLAS_CORETYPE=%s  OPENBLAS_L2_SIZE=%s  reps=%d (best of)\n",
              omp_get_max_threads(), getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "",
              getenv("OPENBLAS_L2_SIZE") ? getenv("OPENBLAS_L2_SIZE") : "", reps);

  std::vector<double> g_aim, g_blas;
  bool all_ok = true;
  for (const Shape& s : shapes) {
    Problem p(s);
    // Correctness check against OpenBLAS (the C buffer is poisoned first: beta = 0 path).
    p.run_blas();
    std::vector<float> ref = p.c;
    std::fill(p.c.begin(), p.c.end(), std::nanf(""));
    p.run_aim();
    double max_err = 0, max_ref = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      double e = std::fabs(double(p.c[i]) - double(ref[i]));
      if (!(e <= max_err)) max_err = std::isnan(e) ? INFINITY : e;
      max_ref = std::max(max_ref, std::fabs(double(ref[i])));
    }
    const double tol = 1e-5 * std::sqrt(double(s.k)) * std::max(1.0, max_ref);
    if (!(max_err <= tol)) {
      std::printf("MISMATCH %s: max abs err %g (tol %g)\n", shape_name(s).c_str(), max_err, tol);
      all_ok = false;
    }
    // Interleave the two implementations so both see the same machine noise.
    double ta = 1e30, tb = 1e30;
    for (int round = 0; round < 2; ++round) {
      ta = std::min(ta, best_seconds([&] { p.run_aim(); }, reps));
      tb = std::min(tb, best_seconds([&] { p.run_blas(); }, reps));
    }
    g_aim.push_back(gflops(s, ta));
    g_blas.push_back(gflops(s, tb));
  }

  std::map<std::string, double> g_child;
  if (!no_child) {
    std::string cmd = "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /proc/" +
                      std::to_string(getpid()) + "/exe --child-openblas --reps " +
                      std::to_string(reps);
    for (const auto& a : shape_args) cmd += " --shape " + a;
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char line[256];
      while (std::fgets(line, sizeof line, f)) {
        char* bar = std::strchr(line, '|');
        if (!bar) continue;
        *bar = 0;
        g_child[line] = std::atof(bar + 1);
      }
      pclose(f);
    }
  }

  std::printf("%-22s %10s %10s %16s   (GFLOP/s)\n", "MxNxK op", "aim", "openblas",
              "openblas-avx512");
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::string name = shape_name(shapes[i]);
    char child_col[32] = "-";
    auto it = g_child.find(name);
    if (it != g_child.end()) std::snprintf(child_col, sizeof child_col, "%.1f", it->second);
    std::printf("%-22s %10.1f %10.1f %16s\n", name.c_str(), g_aim[i], g_blas[i], child_col);
  }
  std::printf("%s\n", all_ok ? "all results match OpenBLAS" : "SOME RESULTS MISMATCH");
  return all_ok ? 0 : 1;
}
