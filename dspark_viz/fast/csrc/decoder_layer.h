// One Llama decoder layer of a few-token forward (one sequence, 1–64 new tokens: a decode step or a
// verification) in two native calls.
//
// Outside its matmuls a few-token forward of a 135M model is ~50 small tensor ops per layer (norms,
// rotary embedding, attention, SiLU gate, residuals), each a Python → dispatcher round trip that costs
// more than its arithmetic. Here they run as straight loops around the few-row kernel (skinny_kernels.h):
//
//   layer_qkv:  h = RMSNorm₁(x); q, k, v = h·W_{q,k,v}ᵀ; rotary embedding on q, k   → q, k, v
//   (the caller appends k, v to its KV cache and passes the whole cache back)
//   layer_rest: o = softmax(q·Kᵀ·scale, causal) · V; x += o·W_oᵀ; h = RMSNorm₂(x);
//               x += (SiLU(h·W_gᵀ) ⊙ h·W_uᵀ)·W_dᵀ                                       → x
//
// Rounding follows transformers' Llama layer in the model's dtype T (round8): every tensor that layer materialises
// (norm output, q/k/v, each rotary product and their sum, attention output, residual sums, the SiLU and the
// gate product) is rounded to T here at the same point; inside, sums are fp32 as in torch's CPU kernels.
// Only summation orders differ (the RMS mean, the attention's softmax), so logits agree with the stock
// layers to within T's rounding, not bit for bit (tests/test_lean.py measures it).
//
// Width invariance: every reduction here runs per row in an order fixed by that row alone — the RMS mean
// over d, each score over Dh, the softmax max and sum over the n = past + m + 1 keys the row sees, P·V over
// those keys, and the products (skinny_kernels.h) — and each row is one thread's work. So a token's output
// is bit-identical whether it comes in a forward of 1 or of up to 64 tokens, at any thread count
// (tests/test_width_invariance.py).
//
// Shapes: x (1, M, d); cos, sin (1, M, Dh); q (1, H, M, Dh); k, v (1, Hk, M, Dh); K, V (1, Hk, S, Dh) with
// the M new positions last, so query m sees cache positions 0 … S − M + m (the causal mask of one sequence).
// layer_rest_full is the same layer with every query seeing all S keys: a parallel drafter's block, whose rows
// attend to the context and to each other both ways (drafters/backbone.py).
#pragma once
#include <cmath>
#include <cstring>
#include <vector>

namespace {

constexpr int64_t MAX_NEW = 64;                 // new rows of one forward (products of more than 8 in blocks of 8
                                                // where the kernel takes no more: fp32, CPUs without AVX512-BF16)

// 8 lanes rounded to T and back: bf16 round-to-nearest-even on the bit pattern (NaN kept), as at::BFloat16.
template <typename T>
inline __m256 round8(__m256 v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    const __m256i b = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_and_si256(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))),
                                       _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)));
    return _mm256_blendv_ps(_mm256_castsi256_ps(r), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
}

// Store 8 lanes already holding T values (round8) as T.
template <typename T>
inline void store8(T* dst, __m256 v) {
  if constexpr (std::is_same_v<T, float>) {
    _mm256_storeu_ps(dst, v);
  } else {
    const __m256i b = _mm256_srli_epi32(_mm256_castps_si256(v), 16);               // the bf16 bits, 8 × u32
    const __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), p);
  }
}

// e^x for 8 lanes: Cephes' expf, n·ln 2 + r with a degree-6 polynomial on r, within 2 ulp of std::exp
// (inputs clamped to ±87.3, where e^x stays a normal float).
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(87.3f));
  __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

// Elementwise loops over n floats (n a multiple of 8: every row length here is; checked by the callers).
template <typename T>
void widen_into(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(dst + i, load8(src + i));
}

template <typename T>
void residual(float* x, const float* y, int64_t n) {               // x = round(x + y)
  for (int64_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(x + i, round8<T>(_mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i))));
}

template <typename T>
void silu_gate(float* g, const float* u, int64_t n) {              // g = round(round(SiLU(g)) · u)
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = _mm256_loadu_ps(g + i);
    const __m256 a = round8<T>(_mm256_div_ps(v, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), v)))));
    _mm256_storeu_ps(g + i, round8<T>(_mm256_mul_ps(a, _mm256_loadu_ps(u + i))));
  }
}

// out (M, d) fp32 holding T values = round(w ⊙ round(x · rsqrt(mean(x²) + eps))), as LlamaRMSNorm.
template <typename T>
void rms_norm(const float* x, const T* w, float eps, float* out, int64_t M, int64_t d) {
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * d;
    __m256 ss = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) ss = _mm256_fmadd_ps(_mm256_loadu_ps(xr + i), _mm256_loadu_ps(xr + i), ss);
    const __m256 r = _mm256_set1_ps(1.0f / std::sqrt(hsum(ss) / static_cast<float>(d) + eps));
    for (int64_t i = 0; i < d; i += 8) {
      const __m256 h = round8<T>(_mm256_mul_ps(_mm256_loadu_ps(xr + i), r));
      _mm256_storeu_ps(out + m * d + i, round8<T>(_mm256_mul_ps(load8(w + i), h)));
    }
  }
}

// y (M, O) fp32 holding T values = round(x · Wᵀ): the kernel writes T, widened back for the next step. Several
// weights that read the same x (q, k, v; gate, up) go as one call: one parallel region instead of one each.
template <typename T>
struct Into {                                                 // y (M, O) = x · W (O, I)ᵀ
  const T* W;
  float* y;
  int64_t O;
};

template <typename T>
void matmul(const float* x, const std::vector<Into<T>>& ws, int64_t M, int64_t I) {
  std::vector<Product<T>> ps;
  if constexpr (std::is_same_v<T, float>) {
    for (const auto& w : ws) ps.push_back({w.W, w.y, w.O});
    run_all<float>(x, ps, M, I, false);
  } else {
    std::vector<std::vector<T>> yt;
    for (const auto& w : ws) yt.emplace_back(M * w.O);
    for (size_t i = 0; i < ws.size(); ++i) ps.push_back({ws[i].W, yt[i].data(), ws[i].O});
    run_all<T>(x, ps, M, I, false);
    for (size_t i = 0; i < ws.size(); ++i) widen_into(yt[i].data(), ws[i].y, M * ws[i].O);
  }
}

template <typename T>
void matmul(const float* x, const T* W, float* y, int64_t M, int64_t I, int64_t O) {
  matmul<T>(x, std::vector<Into<T>>{{W, y, O}}, M, I);
}

// Eight 8-lane sums in one register: lane u = hsum(a[u]) bit for bit — the same adds in the same order,
// ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)) — in 11 instructions instead of eight reductions of six.
inline __m256 hsum8(const __m256* a) {
  auto halves = [&](int u) {                  // [lo(a[u]) + hi(a[u]), lo(a[u+4]) + hi(a[u+4])]: l_i + l_{i+4}
    return _mm256_add_ps(_mm256_permute2f128_ps(a[u], a[u + 4], 0x20), _mm256_permute2f128_ps(a[u], a[u + 4], 0x31));
  };
  const __m256 h0 = _mm256_hadd_ps(halves(0), halves(1));     // (s0 + s1), (s2 + s3) of keys 0, 1 | 4, 5
  const __m256 h1 = _mm256_hadd_ps(halves(2), halves(3));     // … of keys 2, 3 | 6, 7
  return _mm256_hadd_ps(h0, h1);                              // keys 0 1 2 3 | 4 5 6 7
}

// Scores of one query row q (Dh, fp32) against keys 0 … n − 1 of K (S, Dh) in the cache's dtype T (widened in
// registers, exactly), eight keys at a time (eight independent accumulators), scaled: s[t] = scale · q·k_t. Each
// score is one 8-lane accumulator over Dh in order, then its lanes (hsum / hsum8, the same bits).
template <typename T>
inline void scores(const float* q, const T* K, int64_t Dh, int64_t n, float scale, float* s) {
  const __m256 sv = _mm256_set1_ps(scale);
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    const T* k = K + t * Dh;
    __m256 a[8];
    for (int u = 0; u < 8; ++u) a[u] = _mm256_setzero_ps();
    for (int64_t j = 0; j < Dh; j += 8) {
      const __m256 qv = _mm256_loadu_ps(q + j);
      for (int u = 0; u < 8; ++u) a[u] = _mm256_fmadd_ps(qv, load8(k + u * Dh + j), a[u]);
    }
    _mm256_storeu_ps(s + t, _mm256_mul_ps(sv, hsum8(a)));
  }
  for (; t < n; ++t) {
    __m256 a = _mm256_setzero_ps();
    for (int64_t j = 0; j < Dh; j += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), load8(K + t * Dh + j), a);
    s[t] = scale * hsum(a);
  }
}

// out[c0 .. c0 + 8·NV) = inv · Σ_t p[t] · V[t, c0 …] over t < n (V in T, widened in registers), one accumulator
// per 8 columns.
template <int NV, typename T>
void pv_cols(const float* p, const T* V, int64_t Dh, int64_t n, int64_t c0, float inv, float* out) {
  __m256 acc[NV];
  for (int u = 0; u < NV; ++u) acc[u] = _mm256_setzero_ps();
  for (int64_t t = 0; t < n; ++t) {
    const __m256 w = _mm256_set1_ps(p[t]);
    const T* vr = V + t * Dh + c0;
    for (int u = 0; u < NV; ++u) acc[u] = _mm256_fmadd_ps(w, load8(vr + 8 * u), acc[u]);
  }
  for (int u = 0; u < NV; ++u) _mm256_storeu_ps(out + c0 + 8 * u, _mm256_mul_ps(acc[u], _mm256_set1_ps(inv)));
}

// The largest of x[0 … n − 1] (in T, widened), −inf for n = 0; a maximum, so exact in any order.
template <typename T>
inline float row_max(const T* x, int64_t n) {
  const int64_t n8 = n - n % 8;
  __m256 mv = _mm256_set1_ps(-INFINITY);
  for (int64_t t = 0; t < n8; t += 8) mv = _mm256_max_ps(mv, load8(x + t));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mv);
  float mx = -INFINITY;
  for (float v : lanes) mx = std::max(mx, v);
  for (int64_t t = n8; t < n; ++t) mx = std::max(mx, widen(x[t]));
  return mx;
}

// One query row's softmax over its n visible scores (in place) and its output row o (Dh) = softmax · V.
template <typename T>
inline void softmax_pv(float* s, const T* V, int64_t Dh, int64_t n, float* o) {
  const int64_t n8 = n - n % 8;
  const float mx = row_max(s, n);
  const __m256 mb = _mm256_set1_ps(mx);
  __m256 sv = _mm256_setzero_ps();
  for (int64_t t = 0; t < n8; t += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + t), mb));
    _mm256_storeu_ps(s + t, e);
    sv = _mm256_add_ps(sv, e);
  }
  float sum = hsum(sv);
  for (int64_t t = n8; t < n; ++t) {
    s[t] = std::exp(s[t] - mx);
    sum += s[t];
  }
  const float inv = 1.0f / sum;
  int64_t c = 0;
  for (; c + 64 <= Dh; c += 64) pv_cols<8>(s, V, Dh, n, c, inv, o);
  for (; c < Dh; c += 8) pv_cols<1>(s, V, Dh, n, c, inv, o);
}

// x (M, d) → q (H, M, Dh) at qo; new keys and values: head g's row m at ko / vo + g·head + m·Dh (head: a head's
// stride — M·Dh for a (1, Hk, M, Dh) tensor, capacity·Dh for a cache buffer at its write position).
template <typename T>
void qkv_core(const T* x, int64_t M, int64_t d, const T* ln_w, float eps, const T* Wq, const T* Wk, const T* Wv,
              const T* cosp, const T* sinp, int64_t Dh, int64_t H, int64_t Hk, T* qo, T* ko, T* vo, int64_t head) {
  const int64_t half = Dh / 2;
  std::vector<float> xf(M * d), h(M * d), q(M * H * Dh), k(M * Hk * Dh), v(M * Hk * Dh), c(M * Dh), s(M * Dh);
  widen_into(x, xf.data(), M * d);
  widen_into(cosp, c.data(), M * Dh);
  widen_into(sinp, s.data(), M * Dh);
  rms_norm<T>(xf.data(), ln_w, eps, h.data(), M, d);
  matmul<T>(h.data(), {{Wq, q.data(), H * Dh},                                       // q (M, H·Dh)
                       {Wk, k.data(), Hk * Dh},                                      // k, v (M, Hk·Dh)
                       {Wv, v.data(), Hk * Dh}}, M, d);
  // rotary: round(round(u·cos) + round(rotate_half(u)·sin)), rotate_half(u) = (−u₂, u₁) by halves
  const __m256 neg = _mm256_set1_ps(-0.0f);
  auto rope = [&](const float* src, int64_t heads, T* dst, int64_t stride) {
    for (int64_t hd = 0; hd < heads; ++hd)
      for (int64_t m = 0; m < M; ++m) {
        const float* u = src + m * heads * Dh + hd * Dh;
        T* o = dst + hd * stride + m * Dh;
        for (int64_t j = 0; j < Dh; j += 8) {
          const __m256 rot = j < half ? _mm256_xor_ps(_mm256_loadu_ps(u + j + half), neg) : _mm256_loadu_ps(u + j - half);
          const __m256 a = round8<T>(_mm256_mul_ps(_mm256_loadu_ps(u + j), _mm256_loadu_ps(c.data() + m * Dh + j)));
          const __m256 b = round8<T>(_mm256_mul_ps(rot, _mm256_loadu_ps(s.data() + m * Dh + j)));
          store8(o + j, round8<T>(_mm256_add_ps(a, b)));
        }
      }
  };
  rope(q.data(), H, qo, M * Dh);
  rope(k.data(), Hk, ko, head);
  for (int64_t g = 0; g < Hk; ++g)                            // v is already rounded to T by the kernel
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < Dh; j += 8)
        store8(vo + g * head + m * Dh + j, _mm256_loadu_ps(v.data() + m * Hk * Dh + g * Dh + j));
}

template <typename T>
std::vector<torch::Tensor> qkv_impl(torch::Tensor x, torch::Tensor ln_w, double eps, torch::Tensor Wq,
                                    torch::Tensor Wk, torch::Tensor Wv, torch::Tensor cos, torch::Tensor sin,
                                    int64_t H, int64_t Hk) {
  const int64_t M = x.size(1), d = x.size(2), Dh = cos.size(2);
  auto opt = x.options();
  auto qo = torch::empty({1, H, M, Dh}, opt), ko = torch::empty({1, Hk, M, Dh}, opt),
       vo = torch::empty({1, Hk, M, Dh}, opt);
  qkv_core<T>(x.data_ptr<T>(), M, d, ln_w.data_ptr<T>(), static_cast<float>(eps), Wq.data_ptr<T>(), Wk.data_ptr<T>(),
              Wv.data_ptr<T>(), cos.data_ptr<T>(), sin.data_ptr<T>(), Dh, H, Hk, qo.data_ptr<T>(), ko.data_ptr<T>(),
              vo.data_ptr<T>(), M * Dh);
  return {qo, ko, vo};
}

// The layer after its attention: x += o·W_oᵀ; h = RMSNorm₂(x); x += (SiLU(h·W_gᵀ) ⊙ h·W_uᵀ)·W_dᵀ.
// x (M, d), o (M, H·Dh) fp32 holding T values → out (M, d) at op.
template <typename T>
void mlp_tail(const T* x, int64_t M, int64_t d, const float* o, int64_t HD, const T* Wo, const T* ln_w, float eps,
              const T* Wg, const T* Wu, const T* Wd, int64_t F, T* op) {
  std::vector<float> xf(M * d), y(M * d), h(M * d), gt(M * F), up(M * F);
  widen_into(x, xf.data(), M * d);
  matmul<T>(o, Wo, y.data(), M, HD, d);
  residual<T>(xf.data(), y.data(), M * d);
  rms_norm<T>(xf.data(), ln_w, eps, h.data(), M, d);
  matmul<T>(h.data(), {{Wg, gt.data(), F}, {Wu, up.data(), F}}, M, d);
  silu_gate<T>(gt.data(), up.data(), M * F);
  matmul<T>(gt.data(), Wd, y.data(), M, F, d);
  for (int64_t i = 0; i < M * d; i += 8)                                               // residual, rounded once
    store8(op + i, round8<T>(_mm256_add_ps(_mm256_loadu_ps(xf.data() + i), _mm256_loadu_ps(y.data() + i))));
}

// x (M, d), q (H, M, Dh); head g's S keys / values: rows of Dh at K + g·k_head / V + g·v_head → out (M, d) at op.
template <typename T>
void rest_core(const T* x, int64_t M, int64_t d, const T* q, int64_t H, int64_t Dh, const T* Kp, const T* Vp,
               int64_t k_head, int64_t v_head, int64_t Hk, int64_t S, float scf, const T* Wo, const T* ln_w, float eps,
               const T* Wg, const T* Wu, const T* Wd, int64_t F, bool causal, T* op) {
  const int64_t rep = H / Hk, past = S - M;
  const int64_t R = rep * M;                                  // query rows per kv head
  std::vector<float> qf(H * M * Dh), o(M * H * Dh);
  widen_into(q, qf.data(), H * M * Dh);                       // (H, M, Dh): a kv head's R query rows adjacent
  // the Hk · R query rows split across torch's intra-op threads (row u: kv head g = u / R, its row r = u % R,
  // query head g·rep + r / M at new position m = r % M — so qf's row hd·M + m is row u); keys and values read in
  // T straight from the cache; each row writes its own head's columns of o
  at::parallel_for(0, Hk * R, 1, [&](int64_t u0, int64_t u1) {
    std::vector<float> sc(S), orow(Dh);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t g = u / R, r = u % R, hd = g * rep + r / M, m = r % M;
      const int64_t n = causal ? past + m + 1 : S;            // causal: keys 0 … past + m; else all
      scores(qf.data() + u * Dh, Kp + g * k_head, Dh, n, scf, sc.data());
      softmax_pv(sc.data(), Vp + g * v_head, Dh, n, orow.data());
      float* dst = o.data() + m * H * Dh + hd * Dh;            // (M, H·Dh): heads side by side
      for (int64_t j = 0; j < Dh; j += 8) _mm256_storeu_ps(dst + j, round8<T>(_mm256_loadu_ps(orow.data() + j)));
    }
  });
  mlp_tail<T>(x, M, d, o.data(), H * Dh, Wo, ln_w, eps, Wg, Wu, Wd, F, op);
}

template <typename T>
torch::Tensor rest_impl(torch::Tensor x, torch::Tensor q, torch::Tensor K, torch::Tensor V, double scale,
                        torch::Tensor Wo, torch::Tensor ln_w, double eps, torch::Tensor Wg, torch::Tensor Wu,
                        torch::Tensor Wd, bool causal) {
  const int64_t M = x.size(1), d = x.size(2);
  auto out = torch::empty({1, M, d}, x.options());
  // a growing cache's heads lie a capacity apart (K.stride(1))
  rest_core<T>(x.data_ptr<T>(), M, d, q.data_ptr<T>(), q.size(1), q.size(3), K.data_ptr<T>(), V.data_ptr<T>(),
               K.stride(1), V.stride(1), K.size(1), K.size(2), static_cast<float>(scale), Wo.data_ptr<T>(),
               ln_w.data_ptr<T>(), static_cast<float>(eps), Wg.data_ptr<T>(), Wu.data_ptr<T>(), Wd.data_ptr<T>(),
               Wg.size(0), causal, out.data_ptr<T>());
  return out;
}

// out (rows, d) = RMSNorm(x) as rms_norm: a final norm with the fused layers' arithmetic.
template <typename T>
void norm_rows(const T* x, const T* w, float eps, T* out, int64_t rows, int64_t d) {
  std::vector<float> xf(rows * d), h(rows * d);
  widen_into(x, xf.data(), rows * d);
  rms_norm<T>(xf.data(), w, eps, h.data(), rows, d);
  for (int64_t i = 0; i < rows * d; i += 8) store8(out + i, _mm256_loadu_ps(h.data() + i));
}

void check_layer_args(const std::vector<torch::Tensor>& ts, at::ScalarType dt) {
  for (const auto& t : ts) {
    TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == dt, "decoder layer: CPU tensors of one dtype");
    TORCH_CHECK(t.is_contiguous(), "decoder layer: contiguous tensors");
  }
}

}  // namespace

std::vector<torch::Tensor> layer_qkv(torch::Tensor x, torch::Tensor ln_w, double eps, torch::Tensor Wq,
                                     torch::Tensor Wk, torch::Tensor Wv, torch::Tensor cos, torch::Tensor sin,
                                     int64_t H, int64_t Hk) {
  const auto dt = x.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, "layer_qkv: float32 or bfloat16");
  TORCH_CHECK(x.dim() == 3 && x.size(0) == 1 && x.size(1) >= 1 && x.size(1) <= MAX_NEW, "layer_qkv: x (1, 1..64, d)");
  TORCH_CHECK(cos.dim() == 3 && cos.size(1) == x.size(1) && cos.sizes() == sin.sizes(), "layer_qkv: cos, sin (1, M, Dh)");
  TORCH_CHECK(x.size(2) % 8 == 0, "layer_qkv: hidden size a multiple of 8");
  TORCH_CHECK(cos.size(2) % 16 == 0 && Wq.size(0) == H * cos.size(2) && Wk.size(0) == Hk * cos.size(2) &&
              Wv.size(0) == Wk.size(0), "layer_qkv: projection sizes");
  const int64_t d = x.size(2);
  TORCH_CHECK(ln_w.numel() == d && Wq.size(1) == d && Wk.size(1) == d && Wv.size(1) == d,
              "layer_qkv: norm and projection inner sizes must equal the hidden size");
  check_layer_args({x, ln_w, Wq, Wk, Wv, cos, sin}, dt);
  ensure_weights({Wq, Wk, Wv});
  return dt == at::kFloat ? qkv_impl<float>(x, ln_w, eps, Wq, Wk, Wv, cos, sin, H, Hk)
                          : qkv_impl<at::BFloat16>(x, ln_w, eps, Wq, Wk, Wv, cos, sin, H, Hk);
}

torch::Tensor rest_checked(torch::Tensor x, torch::Tensor q, torch::Tensor K, torch::Tensor V, double scale,
                           torch::Tensor Wo, torch::Tensor ln_w, double eps, torch::Tensor Wg, torch::Tensor Wu,
                           torch::Tensor Wd, bool causal) {
  const auto dt = x.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, "layer_rest: float32 or bfloat16");
  TORCH_CHECK(x.dim() == 3 && x.size(0) == 1 && x.size(1) >= 1 && x.size(1) <= MAX_NEW, "layer_rest: x (1, 1..64, d)");
  TORCH_CHECK(q.dim() == 4 && K.dim() == 4 && K.sizes() == V.sizes() && q.size(2) == x.size(1) &&
              q.size(1) % K.size(1) == 0 && K.size(2) >= x.size(1) && q.size(3) == K.size(3) &&
              q.size(3) % 8 == 0, "layer_rest: q (1, H, M, Dh), K/V (1, Hk, S ≥ M, Dh)");
  TORCH_CHECK(x.size(2) % 8 == 0 && Wg.size(0) % 8 == 0, "layer_rest: hidden and MLP sizes multiples of 8");
  const int64_t d = x.size(2), F = Wg.size(0), HD = q.size(1) * q.size(3);
  TORCH_CHECK(Wo.size(0) == d && Wo.size(1) == HD && ln_w.numel() == d && Wg.size(1) == d &&
              Wu.size(0) == F && Wu.size(1) == d && Wd.size(0) == d && Wd.size(1) == F,
              "layer_rest: o-projection, norm and MLP shapes do not fit x and q");
  check_layer_args({x, q, Wo, ln_w, Wg, Wu, Wd}, dt);
  ensure_weights({Wo, Wg, Wu, Wd});
  for (const auto& t : {K, V}) {       // each head's (S, Dh) rows contiguous; heads may sit further apart
    TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == dt, "decoder layer: CPU tensors of one dtype");
    TORCH_CHECK(t.size(0) == 1 && t.stride(3) == 1 && (t.stride(2) == t.size(3) || t.size(2) == 1) &&
                (t.stride(1) >= t.size(2) * t.size(3) || t.size(1) == 1),
                "layer_rest: K/V with contiguous (S, Dh) rows per head");
  }
  return dt == at::kFloat ? rest_impl<float>(x, q, K, V, scale, Wo, ln_w, eps, Wg, Wu, Wd, causal)
                          : rest_impl<at::BFloat16>(x, q, K, V, scale, Wo, ln_w, eps, Wg, Wu, Wd, causal);
}

torch::Tensor layer_rest(torch::Tensor x, torch::Tensor q, torch::Tensor K, torch::Tensor V, double scale,
                         torch::Tensor Wo, torch::Tensor ln_w, double eps, torch::Tensor Wg, torch::Tensor Wu,
                         torch::Tensor Wd) {
  return rest_checked(x, q, K, V, scale, Wo, ln_w, eps, Wg, Wu, Wd, true);
}

torch::Tensor layer_rest_full(torch::Tensor x, torch::Tensor q, torch::Tensor K, torch::Tensor V, double scale,
                              torch::Tensor Wo, torch::Tensor ln_w, double eps, torch::Tensor Wg, torch::Tensor Wu,
                              torch::Tensor Wd) {
  return rest_checked(x, q, K, V, scale, Wo, ln_w, eps, Wg, Wu, Wd, false);
}

// RMSNorm over the last dimension of x (…, d), rows of any count, in the fused layers' arithmetic (rms_norm): the
// lean final norm (fast/lean.py), so that a forward's last hidden state and logits keep the layers' width invariance.
torch::Tensor rms_norm_rows(torch::Tensor x, torch::Tensor w, double eps) {
  const auto dt = x.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, "rms_norm_rows: float32 or bfloat16");
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) % 8 == 0 && w.dim() == 1 && w.numel() == x.size(-1),
              "rms_norm_rows: x (…, d) with d a multiple of 8, w (d)");
  check_layer_args({x, w}, dt);
  auto out = torch::empty_like(x);
  const int64_t d = x.size(-1), rows = x.numel() / d;
  if (dt == at::kFloat) norm_rows<float>(x.data_ptr<float>(), w.data_ptr<float>(), static_cast<float>(eps),
                                         out.data_ptr<float>(), rows, d);
  else norm_rows<at::BFloat16>(x.data_ptr<at::BFloat16>(), w.data_ptr<at::BFloat16>(), static_cast<float>(eps),
                               out.data_ptr<at::BFloat16>(), rows, d);
  return out;
}

// Attention for a ragged batch (fast/ragged.py): rows from many sequences, each sequence's keys and values in its
// own slot of a shared buffer. Row i (query heads q[i] (H, Dh)) belongs to slot slot[i] and sees that slot's keys
// 0 … n_keys[i] − 1 (its own position and before: the causal mask of each sequence, with no mask tensor and no
// padding read). Each query head is scores + softmax_pv, the few-token layers' own arithmetic, so a row's output
// does not depend on which other rows share the call. The rep query heads that share a key/value head run one
// after the other on that head's keys and values, read in the cache's dtype and widened in registers (exact; the
// second and third heads find them in L1/L2).
// Shapes: q (N, H, Dh); K, V (slots, Hk, capacity, Dh) contiguous; slot, n_keys (N,) int64 → o (N, H·Dh) in T.
namespace {

template <typename T>
void ragged_attention_core(const T* q, int64_t N, int64_t H, int64_t Dh, const T* Kp, const T* Vp, int64_t Hk,
                           int64_t cap, const int64_t* slot, const int64_t* n_keys, float scale, T* op) {
  const int64_t rep = H / Hk, per_slot = Hk * cap * Dh;
  at::parallel_for(0, N * Hk, 1, [&](int64_t u0, int64_t u1) {
    std::vector<float> sc(cap), of(Dh), qf(Dh);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t i = u / Hk, g = u % Hk, n = n_keys[i];
      const T* Kg = Kp + slot[i] * per_slot + g * cap * Dh;
      const T* Vg = Vp + slot[i] * per_slot + g * cap * Dh;
      for (int64_t h = g * rep; h < (g + 1) * rep; ++h) {
        widen_into(q + (i * H + h) * Dh, qf.data(), Dh);
        scores<T>(qf.data(), Kg, Dh, n, scale, sc.data());
        softmax_pv<T>(sc.data(), Vg, Dh, n, of.data());
        for (int64_t j = 0; j < Dh; j += 8) store8(op + (i * H + h) * Dh + j, round8<T>(_mm256_loadu_ps(of.data() + j)));
      }
    }
  });
}

}  // namespace

torch::Tensor ragged_attention(torch::Tensor q, torch::Tensor K, torch::Tensor V, torch::Tensor slot,
                               torch::Tensor n_keys, double scale) {
  const auto dt = q.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, "ragged_attention: float32 or bfloat16");
  check_layer_args({q, K, V}, dt);
  TORCH_CHECK(q.dim() == 3 && K.dim() == 4 && K.sizes() == V.sizes() && q.size(2) == K.size(3) &&
              q.size(2) % 8 == 0 && q.size(1) % K.size(1) == 0,
              "ragged_attention: q (N, H, Dh), K/V (slots, Hk, capacity, Dh), Dh a multiple of 8");
  const int64_t N = q.size(0);
  for (const auto* t : {&slot, &n_keys})
    TORCH_CHECK(t->dim() == 1 && t->size(0) == N && t->scalar_type() == at::kLong && t->is_contiguous() &&
                t->device().is_cpu(), "ragged_attention: slot and n_keys (N,) int64");
  const int64_t* sp = slot.data_ptr<int64_t>();
  const int64_t* np = n_keys.data_ptr<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    TORCH_CHECK(sp[i] >= 0 && sp[i] < K.size(0) && np[i] >= 1 && np[i] <= K.size(2),
                "ragged_attention: a row's slot or key count is out of range");
  auto out = torch::empty({N, q.size(1) * q.size(2)}, q.options());
  if (dt == at::kFloat)
    ragged_attention_core<float>(q.data_ptr<float>(), N, q.size(1), q.size(2), K.data_ptr<float>(),
                                 V.data_ptr<float>(), K.size(1), K.size(2), sp, np, static_cast<float>(scale),
                                 out.data_ptr<float>());
  else
    ragged_attention_core<at::BFloat16>(q.data_ptr<at::BFloat16>(), N, q.size(1), q.size(2),
                                        K.data_ptr<at::BFloat16>(), V.data_ptr<at::BFloat16>(), K.size(1), K.size(2),
                                        sp, np, static_cast<float>(scale), out.data_ptr<at::BFloat16>());
  return out;
}

// One decoder layer over a ragged batch in the few-token layers' arithmetic (fast/ragged.py, where the target runs
// on the fused layers): rows from many sequences, row i at position pos[i] of slot slot[i]. Rows go in chunks of
// ≤ 8 through qkv_core (each row's key and value then written into its slot at its position), every row through
// ragged_attention_core over its slot's keys 0 … pos[i], and chunks of ≤ 8 through mlp_tail. Every product, norm
// and reduction there is per row in an order fixed by that row (the width invariance above), so a row's output
// has the bits layer_qkv + layer_rest give it in a forward of its own sequence, whatever else shares the call.
// Shapes: x (N, d); cos, sin (N, Dh); K, V (slots, Hk, capacity, Dh) contiguous; slot, pos (N,) int64 → (N, d).
namespace {

template <typename T>
void ragged_layer_core(const T* x, int64_t N, int64_t d, const T* ln1, float eps1, const T* Wq, const T* Wk,
                       const T* Wv, const T* cosp, const T* sinp, int64_t Dh, int64_t H, int64_t Hk, T* Kp, T* Vp,
                       int64_t cap, const int64_t* slot, const int64_t* pos, float scale, const T* Wo, const T* ln2,
                       float eps2, const T* Wg, const T* Wu, const T* Wd, int64_t F, T* op) {
  const int64_t per_slot = Hk * cap * Dh, HD = H * Dh;
  constexpr int64_t C = MAX_NEW;                             // rows per pass: every weight read once per C rows
  std::vector<T> q(N * HD), qc(C * HD), kc(C * Hk * Dh), vc(C * Hk * Dh), o(N * HD);
  for (int64_t r0 = 0; r0 < N; r0 += C) {
    const int64_t M = std::min<int64_t>(C, N - r0);          // q (H, M, Dh), k, v (Hk, M, Dh)
    qkv_core<T>(x + r0 * d, M, d, ln1, eps1, Wq, Wk, Wv, cosp + r0 * Dh, sinp + r0 * Dh, Dh, H, Hk, qc.data(),
                kc.data(), vc.data(), M * Dh);
    for (int64_t m = 0; m < M; ++m) {
      const int64_t i = r0 + m;
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(q.data() + (i * H + h) * Dh, qc.data() + (h * M + m) * Dh, Dh * sizeof(T));
      for (int64_t g = 0; g < Hk; ++g) {
        const int64_t at = slot[i] * per_slot + (g * cap + pos[i]) * Dh;
        std::memcpy(Kp + at, kc.data() + (g * M + m) * Dh, Dh * sizeof(T));
        std::memcpy(Vp + at, vc.data() + (g * M + m) * Dh, Dh * sizeof(T));
      }
    }
  }
  std::vector<int64_t> n_keys(N);
  for (int64_t i = 0; i < N; ++i) n_keys[i] = pos[i] + 1;
  ragged_attention_core<T>(q.data(), N, H, Dh, Kp, Vp, Hk, cap, slot, n_keys.data(), scale, o.data());
  std::vector<float> of(C * HD);
  for (int64_t r0 = 0; r0 < N; r0 += C) {
    const int64_t M = std::min<int64_t>(C, N - r0);
    widen_into(o.data() + r0 * HD, of.data(), M * HD);
    mlp_tail<T>(x + r0 * d, M, d, of.data(), HD, Wo, ln2, eps2, Wg, Wu, Wd, F, op + r0 * d);
  }
}

}  // namespace

torch::Tensor ragged_layer(torch::Tensor x, torch::Tensor ln1, double eps1, torch::Tensor Wq, torch::Tensor Wk,
                           torch::Tensor Wv, torch::Tensor cos, torch::Tensor sin, int64_t H, int64_t Hk,
                           torch::Tensor K, torch::Tensor V, torch::Tensor slot, torch::Tensor pos, double scale,
                           torch::Tensor Wo, torch::Tensor ln2, double eps2, torch::Tensor Wg, torch::Tensor Wu,
                           torch::Tensor Wd) {
  const auto dt = x.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, "ragged_layer: float32 or bfloat16");
  check_layer_args({x, ln1, Wq, Wk, Wv, cos, sin, K, V, Wo, ln2, Wg, Wu, Wd}, dt);
  ensure_weights({Wq, Wk, Wv, Wo, Wg, Wu, Wd});
  TORCH_CHECK(x.dim() == 2 && x.size(1) % 8 == 0, "ragged_layer: x (N, d), d a multiple of 8");
  const int64_t N = x.size(0), d = x.size(1), Dh = cos.size(1), F = Wg.size(0);
  TORCH_CHECK(cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(0) == N && Dh % 16 == 0,
              "ragged_layer: cos, sin (N, Dh), Dh a multiple of 16");
  TORCH_CHECK(K.dim() == 4 && K.sizes() == V.sizes() && K.size(1) == Hk && K.size(3) == Dh && H % Hk == 0,
              "ragged_layer: K, V (slots, Hk, capacity, Dh)");
  TORCH_CHECK(Wq.size(0) == H * Dh && Wk.size(0) == Hk * Dh && Wv.size(0) == Hk * Dh && Wq.size(1) == d &&
              Wk.size(1) == d && Wv.size(1) == d && ln1.numel() == d && ln2.numel() == d && Wo.size(0) == d &&
              Wo.size(1) == H * Dh && Wg.size(1) == d && Wu.size(0) == F && Wu.size(1) == d && Wd.size(0) == d &&
              Wd.size(1) == F && F % 8 == 0, "ragged_layer: weight shapes do not fit x");
  for (const auto* t : {&slot, &pos})
    TORCH_CHECK(t->dim() == 1 && t->size(0) == N && t->scalar_type() == at::kLong && t->is_contiguous() &&
                t->device().is_cpu(), "ragged_layer: slot and pos (N,) int64");
  const int64_t* sp = slot.data_ptr<int64_t>();
  const int64_t* pp = pos.data_ptr<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    TORCH_CHECK(sp[i] >= 0 && sp[i] < K.size(0) && pp[i] >= 0 && pp[i] < K.size(2),
                "ragged_layer: a row's slot or position is out of range");
  auto out = torch::empty_like(x);
  auto run = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    ragged_layer_core<T>(x.data_ptr<T>(), N, d, ln1.data_ptr<T>(), static_cast<float>(eps1), Wq.data_ptr<T>(),
                         Wk.data_ptr<T>(), Wv.data_ptr<T>(), cos.data_ptr<T>(), sin.data_ptr<T>(), Dh, H, Hk,
                         K.data_ptr<T>(), V.data_ptr<T>(), K.size(2), sp, pp, static_cast<float>(scale),
                         Wo.data_ptr<T>(), ln2.data_ptr<T>(), static_cast<float>(eps2), Wg.data_ptr<T>(),
                         Wu.data_ptr<T>(), Wd.data_ptr<T>(), F, out.data_ptr<T>());
  };
  if (dt == at::kFloat) run(static_cast<float*>(nullptr));
  else run(static_cast<at::BFloat16*>(nullptr));
  return out;
}

// Every decoder layer of one sequence's few-token forward in one call (fast/stack.py). Per layer: norm, q/k/v and
// rotary with the new keys and values written straight into the caller's cache buffers at positions
// past … past + M − 1, then attention over positions 0 … past + M − 1, o-projection and MLP — the arithmetic of
// layer_qkv and layer_rest (the same cores: the same bits), without a tensor per intermediate or a return to Python
// per layer.
// Per layer the plan holds ln₁, W_q, W_k, W_v, W_o, ln₂, W_g, W_u, W_d (9 tensors, checked once here), eps₁, eps₂,
// scale, H, Hk.
// step: x (1, M, d); K[l], V[l] (1, Hk, capacity ≥ past + M, Dh) contiguous → every layer's output, each (1, M, d).
// forward: the same, then the final norm (rms_norm_rows' arithmetic) and the LM head W (V, d) through the kernel on
// the normed rows (the last only, or all) → every layer's output, the normed rows (1, M, d), logits (1, M or 1, V).
class StackPlan {
 public:
  StackPlan(std::vector<torch::Tensor> w, std::vector<double> eps1, std::vector<double> eps2,
            std::vector<double> scale, std::vector<int64_t> H, std::vector<int64_t> Hk)
      : w_(std::move(w)), eps1_(std::move(eps1)), eps2_(std::move(eps2)), scale_(std::move(scale)),
        H_(std::move(H)), Hk_(std::move(Hk)) {
    const size_t L = eps1_.size();
    TORCH_CHECK(L >= 1 && w_.size() == 9 * L && eps2_.size() == L && scale_.size() == L && H_.size() == L &&
                Hk_.size() == L, "StackPlan: 9 weights, two eps, a scale and the head counts per layer");
    dt_ = w_[0].scalar_type();
    TORCH_CHECK(dt_ == at::kFloat || dt_ == at::kBFloat16, "StackPlan: float32 or bfloat16 weights");
    check_layer_args(w_, dt_);
    d_ = w_[0].numel();
    for (size_t l = 0; l < L; ++l) {
      const torch::Tensor* t = w_.data() + 9 * l;
      TORCH_CHECK(H_[l] >= 1 && Hk_[l] >= 1 && H_[l] % Hk_[l] == 0 && t[1].dim() == 2 && t[1].size(0) % H_[l] == 0,
                  "StackPlan: head counts");
      const int64_t Dh = t[1].size(0) / H_[l], F = t[6].dim() == 2 ? t[6].size(0) : 0;
      if (l == 0) Dh_ = Dh, Hk0_ = Hk_[l];
      auto is = [](const torch::Tensor& x, int64_t a, int64_t b) {
        return x.dim() == 2 && x.size(0) == a && x.size(1) == b;
      };
      TORCH_CHECK(Dh == Dh_ && Hk_[l] == Hk0_ && Dh % 16 == 0 && d_ % 8 == 0 && F % 8 == 0 && F > 0 &&
                  t[0].numel() == d_ && t[5].numel() == d_ && is(t[1], H_[l] * Dh, d_) && is(t[2], Hk_[l] * Dh, d_) &&
                  is(t[3], Hk_[l] * Dh, d_) && is(t[4], d_, H_[l] * Dh) && is(t[6], F, d_) && is(t[7], F, d_) &&
                  is(t[8], d_, F), "StackPlan: weight shapes do not fit one Llama layer stack");
    }
  }

  int64_t n_layers() const { return static_cast<int64_t>(eps1_.size()); }

  std::vector<torch::Tensor> step(torch::Tensor x, const std::vector<torch::Tensor>& K,
                                  const std::vector<torch::Tensor>& V, int64_t past, torch::Tensor cos,
                                  torch::Tensor sin) const {
    return dt_ == at::kFloat ? layers<float>(x, K, V, past, cos, sin) : layers<at::BFloat16>(x, K, V, past, cos, sin);
  }

  std::vector<torch::Tensor> forward(torch::Tensor x, const std::vector<torch::Tensor>& K,
                                     const std::vector<torch::Tensor>& V, int64_t past, torch::Tensor cos,
                                     torch::Tensor sin, torch::Tensor norm_w, double norm_eps, torch::Tensor head_w,
                                     bool last_only) const {
    check_layer_args({norm_w, head_w}, dt_);
    ensure_weights({head_w});
    TORCH_CHECK(norm_w.numel() == d_ && head_w.dim() == 2 && head_w.size(1) == d_,
                "StackPlan.forward: final norm (d) and LM head (V, d)");
    auto outs = step(x, K, V, past, cos, sin);
    const int64_t M = x.size(1), rows = last_only ? 1 : M, Vn = head_w.size(0);
    auto normed = torch::empty({1, M, d_}, x.options());
    auto logits = torch::empty({1, rows, Vn}, x.options());
    if (dt_ == at::kFloat) tail<float>(outs.back(), norm_w, norm_eps, head_w, rows, normed, logits);
    else tail<at::BFloat16>(outs.back(), norm_w, norm_eps, head_w, rows, normed, logits);
    outs.push_back(normed);
    outs.push_back(logits);
    return outs;
  }

 private:
  template <typename T>
  std::vector<torch::Tensor> layers(torch::Tensor x, const std::vector<torch::Tensor>& K,
                                    const std::vector<torch::Tensor>& V, int64_t past, torch::Tensor cos,
                                    torch::Tensor sin) const {
    const int64_t L = n_layers();
    TORCH_CHECK(x.dim() == 3 && x.size(0) == 1 && x.size(1) >= 1 && x.size(1) <= MAX_NEW && x.size(2) == d_,
                "StackPlan.step: x (1, 1..64, d)");
    const int64_t M = x.size(1), Dh = Dh_, Hk = Hk0_;
    TORCH_CHECK(cos.dim() == 3 && cos.size(0) == 1 && cos.size(1) == M && cos.size(2) == Dh &&
                cos.sizes() == sin.sizes(), "StackPlan.step: cos, sin (1, M, Dh)");
    check_layer_args({x, cos, sin}, dt_);
    TORCH_CHECK(past >= 0, "StackPlan.step: past ≥ 0");
    TORCH_CHECK(static_cast<int64_t>(K.size()) == L && static_cast<int64_t>(V.size()) == L,
                "StackPlan.step: one key and one value buffer per layer");
    for (int64_t l = 0; l < L; ++l)
      for (const auto* b : {&K[l], &V[l]})
        TORCH_CHECK(b->dim() == 4 && b->size(0) == 1 && b->size(1) == Hk && b->size(3) == Dh &&
                    b->size(2) >= past + M && b->is_contiguous() && b->scalar_type() == dt_ && b->device().is_cpu(),
                    "StackPlan.step: cache buffers (1, Hk, capacity ≥ past + M, Dh), contiguous");
    auto all = torch::empty({L, 1, M, d_}, x.options());                 // every layer's output
    std::vector<T> q;
    const T* cp = cos.data_ptr<T>();
    const T* sp = sin.data_ptr<T>();
    const T* in = x.data_ptr<T>();
    T* out = all.data_ptr<T>();
    for (int64_t l = 0; l < L; ++l, in = out, out += M * d_) {
      const torch::Tensor* w = w_.data() + 9 * l;
      ensure_weights({w[1], w[2], w[3], w[4], w[6], w[7], w[8]});
      const int64_t H = H_[l], F = w[6].size(0), cap = K[l].size(2), head = cap * Dh;
      q.resize(H * M * Dh);
      T* Kp = K[l].data_ptr<T>();
      T* Vp = V[l].data_ptr<T>();
      qkv_core<T>(in, M, d_, w[0].data_ptr<T>(), static_cast<float>(eps1_[l]), w[1].data_ptr<T>(),
                  w[2].data_ptr<T>(), w[3].data_ptr<T>(), cp, sp, Dh, H, Hk, q.data(), Kp + past * Dh,
                  Vp + past * Dh, head);
      rest_core<T>(in, M, d_, q.data(), H, Dh, Kp, Vp, head, head, Hk, past + M, static_cast<float>(scale_[l]),
                   w[4].data_ptr<T>(), w[5].data_ptr<T>(), static_cast<float>(eps2_[l]), w[6].data_ptr<T>(),
                   w[7].data_ptr<T>(), w[8].data_ptr<T>(), F, true, out);
    }
    return all.unbind(0);
  }

  template <typename T>
  void tail(const torch::Tensor& last, const torch::Tensor& norm_w, double eps, const torch::Tensor& head_w,
            int64_t rows, torch::Tensor& normed, torch::Tensor& logits) const {
    const int64_t M = last.size(1);
    norm_rows<T>(last.data_ptr<T>(), norm_w.data_ptr<T>(), static_cast<float>(eps), normed.data_ptr<T>(), M, d_);
    std::vector<float> hf(rows * d_);                                     // the head's rows, widened exactly
    widen_into(normed.data_ptr<T>() + (M - rows) * d_, hf.data(), rows * d_);
    run<T>(hf.data(), head_w.data_ptr<T>(), logits.data_ptr<T>(), rows, d_, head_w.size(0), false);
  }

  std::vector<torch::Tensor> w_;
  std::vector<double> eps1_, eps2_, scale_;
  std::vector<int64_t> H_, Hk_;
  at::ScalarType dt_;
  int64_t d_ = 0, Dh_ = 0, Hk0_ = 0;
};
