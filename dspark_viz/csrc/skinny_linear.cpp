// y = x · Wᵀ for a few rows of x (fp32, CPU, AVX2 + FMA): the verification forward's matmuls.
//
// A decode step on a small model is bound by streaming the weights from memory. BLAS libraries pick
// kernels tuned for large M; with 2–8 rows (the tokens a speculative round verifies) they ran 1.5–2.5×
// slower than one row on this CPU. Here each weight row is read once and multiplied into every row
// of x while it sits in registers, so M ≤ 8 rows cost about what one row costs.
//
// Shapes: x (M, I) contiguous, W (O, I) contiguous → y (M, O). Rows of W are split across threads.
// float32: fp32 products and sums. bfloat16: W is read as bf16 (half the bytes) and widened to fp32 in
// registers, x is widened once, sums are fp32 and y is rounded to bf16 (nearest even) — the semantics
// of a bf16 GEMM with fp32 accumulation, in another summation order.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

namespace {

inline float hsum(__m256 v) {                                   // sum of the 8 lanes
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 h = _mm_movehdup_ps(s);
  s = _mm_add_ps(s, h);
  h = _mm_movehl_ps(h, s);
  return _mm_cvtss_f32(_mm_add_ss(s, h));
}

// M rows of x against W rows [o0, o1). U independent accumulator sets hide the FMA latency when M
// is small (M·U ≤ 8 keeps everything in the 16 ymm registers).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const at::BFloat16* p) {                   // 8 bf16 → 8 fp32 (exact: bf16 is fp32's top half)
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float widen(float v) { return v; }
inline float widen(at::BFloat16 v) { return static_cast<float>(v); }
inline void put(float* y, float v) { *y = v; }
inline void put(at::BFloat16* y, float v) { *y = at::BFloat16(v); }   // round to nearest even

template <int M, int U, typename T>
void rows(const float* x, const T* W, T* y, int64_t I, int64_t O, int64_t o0, int64_t o1) {
  const int64_t step = 8 * U, Iu = I - I % step;
  for (int64_t o = o0; o < o1; ++o) {
    const T* w = W + o * I;
    __m256 acc[U][M];
    for (int u = 0; u < U; ++u)
      for (int m = 0; m < M; ++m) acc[u][m] = _mm256_setzero_ps();
    for (int64_t i = 0; i < Iu; i += step) {
      for (int u = 0; u < U; ++u) {
        const __m256 wv = load8(w + i + 8 * u);
        for (int m = 0; m < M; ++m)
          acc[u][m] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + m * I + i + 8 * u), acc[u][m]);
      }
    }
    for (int m = 0; m < M; ++m) {
      __m256 t = acc[0][m];
      for (int u = 1; u < U; ++u) t = _mm256_add_ps(t, acc[u][m]);
      float s = hsum(t);
      for (int64_t i = Iu; i < I; ++i) s += widen(w[i]) * x[m * I + i];   // tail when I is not a multiple
      put(y + m * O + o, s);
    }
  }
}

}  // namespace

template <typename T>
void run(const float* xp, const T* wp, T* yp, int64_t M, int64_t I, int64_t O) {
  at::parallel_for(0, O, 64, [&](int64_t a, int64_t b) {
    switch (M) {
      case 1: rows<1, 4>(xp, wp, yp, I, O, a, b); break;
      case 2: rows<2, 4>(xp, wp, yp, I, O, a, b); break;
      case 3: rows<3, 2>(xp, wp, yp, I, O, a, b); break;
      case 4: rows<4, 2>(xp, wp, yp, I, O, a, b); break;
      case 5: rows<5, 1>(xp, wp, yp, I, O, a, b); break;
      case 6: rows<6, 1>(xp, wp, yp, I, O, a, b); break;
      case 7: rows<7, 1>(xp, wp, yp, I, O, a, b); break;
      default: rows<8, 1>(xp, wp, yp, I, O, a, b); break;
    }
  });
}

torch::Tensor skinny_linear(torch::Tensor x, torch::Tensor W) {
  TORCH_CHECK(x.dim() == 2 && W.dim() == 2, "skinny_linear: x (M, I) and W (O, I)");
  TORCH_CHECK(x.size(1) == W.size(1), "skinny_linear: inner sizes differ");
  const auto dt = W.scalar_type();
  TORCH_CHECK(x.scalar_type() == dt && (dt == at::kFloat || dt == at::kBFloat16),
              "skinny_linear: float32 or bfloat16, x and W alike");
  TORCH_CHECK(x.device().is_cpu() && W.device().is_cpu(), "skinny_linear: CPU tensors only");
  TORCH_CHECK(W.is_contiguous(), "skinny_linear: W must be contiguous");
  const int64_t M = x.size(0), I = x.size(1), O = W.size(0);
  TORCH_CHECK(M >= 1 && M <= 8, "skinny_linear: 1..8 rows, got ", M);
  auto y = torch::empty({M, O}, x.options());
  if (dt == at::kFloat) {
    x = x.contiguous();
    run<float>(x.data_ptr<float>(), W.data_ptr<float>(), y.data_ptr<float>(), M, I, O);
  } else {
    const auto xf = x.to(at::kFloat).contiguous();                 // (M, I) fp32, exact
    run<at::BFloat16>(xf.data_ptr<float>(), W.data_ptr<at::BFloat16>(), y.data_ptr<at::BFloat16>(), M, I, O);
  }
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("skinny_linear", &skinny_linear, "y = x·Wᵀ for 1..8 rows of x (fp32 or bf16, AVX2)");
}
