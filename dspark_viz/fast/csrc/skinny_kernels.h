// The few-row matmul kernels (see skinny_linear.cpp): run<T>(x, W, y, M, I, O, row_layout) computes
// y (M, O) = x (M, I) · W (O, I)ᵀ with x widened to fp32, fp32 sums and y rounded to T once.
//
// Width invariance: within one variant (dtype × instruction set × layout) every output y[m, o] is summed in
// one order fixed by I alone — the same partial accumulators, combined the same way — whatever M is and
// however the rows of W are split across threads (each output is one thread's whole sum). So a token's
// product is bit-identical whether it is computed alone or beside up to 63 others. The packed outer-product forms
// (packed_bf16.h, packed_avx512.h, packed_avx2.h) take 1–64 rows a pass; the row layout 8.
#pragma once
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include "packed_avx2.h"
#include "packed_avx512.h"
#include "packed_bf16.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

inline float hsum(__m256 v) {                                   // sum of the 8 lanes
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 h = _mm_movehdup_ps(s);
  s = _mm_add_ps(s, h);
  h = _mm_movehl_ps(h, s);
  return _mm_cvtss_f32(_mm_add_ss(s, h));
}

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const at::BFloat16* p) {                   // 8 bf16 → 8 fp32 (exact: bf16 is fp32's top half)
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float widen(float v) { return v; }
inline float widen(at::BFloat16 v) { return static_cast<float>(v); }
inline void put(float* y, float v) { *y = v; }
inline void put(at::BFloat16* y, float v) { *y = at::BFloat16(v); }   // round to nearest even

// Reading and arithmetic overlap badly from 3 rows of x up: while a thread multiplies the weight rows it holds into
// every row of x, nothing fetches the rows it needs next, so the arithmetic adds to the reading (docs/roofline.md).
// So the last pass over a weight row (or a group of them) prefetches, into L2, the row PF_AHEAD ahead in its stream,
// as fast as it reads its own (the row layout; the packed forms prefetch in their own way). 1–2 rows of x are bound
// by the reading alone and take no prefetch (it measured no faster). A prefetch moves no value: the bits stay the same (prefetch_on, set_prefetch: A/B).
constexpr int64_t PF_AHEAD = 4;
constexpr int PF_MIN_ROWS = 3;
inline bool& prefetch_on() {
  static bool v = true;
  return v;
}

// The row layout: one weight row at a time, read as one long sequential stream, applied to every row of x, 8 rows
// a pass. It runs only through skinny_linear_rows (A/B against the packed forms, stream512 in the AVX-512 variant).
//
// Width invariance: every output is summed in one fixed order whatever M is — ACC = 4 partial 8-lane
// accumulators over consecutive 8-element blocks of I, added pairwise ((0 + 1) + (2 + 3)), then the lanes
// (hsum), then the tail in order — so a row's result does not depend on how many rows share the call. The M
// rows are taken in groups of at most 3 (4 · 3 accumulators and a weight vector fit the 16 ymm registers);
// the weight row is still in L1 for the later groups, so the weights stream from memory once.
constexpr int ACC = 4;

template <int G, int NR, typename T>
__attribute__((always_inline)) inline void stream_group(const float* x, const T* const* ws, T* const* ys, int64_t I,
                                                        int64_t O, const T* ahead = nullptr) {
  constexpr int64_t step = 8 * ACC;
  const int64_t Iu = I - I % step;
  __m256 acc[NR][ACC][G];
  for (int r = 0; r < NR; ++r)
    for (int u = 0; u < ACC; ++u)
      for (int m = 0; m < G; ++m) acc[r][u][m] = _mm256_setzero_ps();
  for (int64_t i = 0; i < Iu; i += step) {
    if (ahead != nullptr)                              // the row PF_AHEAD on, step · sizeof(T) bytes, into L2
      for (int64_t b = 0; b < step * static_cast<int64_t>(sizeof(T)); b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(ahead + i) + b, _MM_HINT_T1);
    for (int r = 0; r < NR; ++r)
      for (int u = 0; u < ACC; ++u) {
        const __m256 wv = load8(ws[r] + i + 8 * u);
        for (int m = 0; m < G; ++m)
          acc[r][u][m] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + m * I + i + 8 * u), acc[r][u][m]);
      }
  }
  for (int r = 0; r < NR; ++r)
    for (int m = 0; m < G; ++m) {
      float s = hsum(_mm256_add_ps(_mm256_add_ps(acc[r][0][m], acc[r][1][m]),
                                   _mm256_add_ps(acc[r][2][m], acc[r][3][m])));
      for (int64_t i = Iu; i < I; ++i) s += widen(ws[r][i]) * x[m * I + i];   // tail when I is not a multiple
      put(ys[r] + m * O, s);
    }
}

// One row of x: a thread reads its weight rows as two streams at once (rows o and o + q of its range cut in two:
// one sequential stream per core left part of the memory bandwidth unused), 2 · 4 accumulators of the 16 ymm
// registers.
template <int M, typename T>
void stream_rows(const float* x, const T* W, T* y, int64_t I, int64_t O, int64_t o0, int64_t o1) {
  static_assert(ACC == 4, "stream_group adds exactly four accumulators");
  int64_t o = o0;
  if constexpr (M == 1) {
    const int64_t q = (o1 - o0) / 2;
    for (; o < o0 + q; ++o) {
      const T* ws[2] = {W + o * I, W + (o + q) * I};
      T* ys[2] = {y + o, y + o + q};
      stream_group<1, 2>(x, ws, ys, I, O);
    }
    o = o0 + 2 * q;
  }
  const bool fetch = M >= PF_MIN_ROWS && prefetch_on();
  for (; o < o1; ++o) {
    const T* ws[1] = {W + o * I};
    T* ys[3] = {y + o, y + 3 * O + o, y + 6 * O + o};
    const T* ahead = fetch && o + PF_AHEAD < o1 ? W + (o + PF_AHEAD) * I : nullptr;    // by the row's last group
    stream_group<(M < 3 ? M : 3), 1>(x, ws, ys, I, O, M <= 3 ? ahead : nullptr);
    if constexpr (M > 3) stream_group<(M < 6 ? M - 3 : 3), 1>(x + 3 * I, ws, ys + 1, I, O, M <= 6 ? ahead : nullptr);
    if constexpr (M > 6) stream_group<M - 6, 1>(x + 6 * I, ws, ys + 2, I, O, ahead);
  }
}

// The same row layout in 16-lane AVX-512 registers (fp32 weights only), compiled for AVX-512 alone and
// chosen at run time where the CPU has it (has_avx512()); the AVX2 code above stays the baseline. One fixed
// order per output here too: ACC512 = 4 16-lane accumulators over consecutive 16-element blocks (four chains,
// so one or two rows alone are not bound by the FMA latency), added pairwise ((0 + 1) + (2 + 3)), then
// _mm512_reduce_add_ps, then the tail. Rows in groups of at most 4 (4 · 4 accumulators of the 32 zmm
// registers); the second group of 5–8 rows finds the weight row in L1.
constexpr int ACC512 = 4;

template <int G, int NR>
__attribute__((target("avx512f"), always_inline)) inline void stream_group512(const float* x, const float* const* ws,
                                                                              float* const* ys, int64_t I, int64_t O,
                                                                              const float* ahead = nullptr) {
  constexpr int64_t step = 16 * ACC512;
  const int64_t Iu = I - I % step;
  __m512 acc[NR][ACC512][G];
  for (int r = 0; r < NR; ++r)
    for (int u = 0; u < ACC512; ++u)
      for (int m = 0; m < G; ++m) acc[r][u][m] = _mm512_setzero_ps();
  for (int64_t i = 0; i < Iu; i += step) {
    if (ahead != nullptr)                              // the row PF_AHEAD on, step · 4 bytes, into L2
      for (int64_t b = 0; b < step * 4; b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(ahead + i) + b, _MM_HINT_T1);
    for (int r = 0; r < NR; ++r)
      for (int u = 0; u < ACC512; ++u) {
        const __m512 wv = _mm512_loadu_ps(ws[r] + i + 16 * u);
        for (int m = 0; m < G; ++m)
          acc[r][u][m] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + m * I + i + 16 * u), acc[r][u][m]);
      }
  }
  for (int r = 0; r < NR; ++r)
    for (int m = 0; m < G; ++m) {
      const __m512 t = _mm512_add_ps(_mm512_add_ps(acc[r][0][m], acc[r][1][m]),
                                     _mm512_add_ps(acc[r][2][m], acc[r][3][m]));
      float s = _mm512_reduce_add_ps(t);
      for (int64_t i = Iu; i < I; ++i) s += ws[r][i] * x[m * I + i];
      ys[r][m * O] = s;
    }
}

// Weight rows [o0, o1): with one or two rows of x, a thread reads its rows as NR streams at once (rows o, o + q, …
// of its range cut in NR parts: measured on an AMD EPYC VM, the LM head read at 24–29 GB/s as one stream, 31–33 as
// four), each output in its one order.
template <int M>
__attribute__((target("avx512f"))) void stream_rows512(const float* x, const float* W, float* y, int64_t I, int64_t O,
                                                      int64_t o0, int64_t o1) {
  static_assert(ACC512 == 4, "stream_group512 adds exactly four accumulators");
  constexpr int NR = M == 1 ? 4 : M == 2 ? 2 : 1;            // NR · 4 · M accumulators within the 32 zmm registers
  int64_t o = o0;
  if constexpr (NR > 1) {
    const int64_t q = (o1 - o0) / NR;
    for (; o < o0 + q; ++o) {
      const float* ws[NR];
      float* ys[NR];
      for (int r = 0; r < NR; ++r) ws[r] = W + (o + r * q) * I, ys[r] = y + o + r * q;
      stream_group512<M, NR>(x, ws, ys, I, O);
    }
    o = o0 + NR * q;
  }
  const bool fetch = M >= PF_MIN_ROWS && prefetch_on();
  for (; o < o1; ++o) {
    const float* ws[1] = {W + o * I};
    float* ys[1] = {y + o};
    const float* ahead = fetch && o + PF_AHEAD < o1 ? W + (o + PF_AHEAD) * I : nullptr;  // by the row's last group
    stream_group512<(M < 4 ? M : 4), 1>(x, ws, ys, I, O, M <= 4 ? ahead : nullptr);
    if constexpr (M > 4) {
      float* ys2[1] = {y + 4 * O + o};
      stream_group512<M - 4, 1>(x + 4 * I, ws, ys2, I, O, ahead);
    }
  }
}

inline bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

inline void stream512(const float* x, const float* W, float* y, int64_t M, int64_t I, int64_t O, int64_t o0,
                      int64_t o1) {
  switch (M) {
    case 1: stream_rows512<1>(x, W, y, I, O, o0, o1); break;
    case 2: stream_rows512<2>(x, W, y, I, O, o0, o1); break;
    case 3: stream_rows512<3>(x, W, y, I, O, o0, o1); break;
    case 4: stream_rows512<4>(x, W, y, I, O, o0, o1); break;
    case 5: stream_rows512<5>(x, W, y, I, O, o0, o1); break;
    case 6: stream_rows512<6>(x, W, y, I, O, o0, o1); break;
    case 7: stream_rows512<7>(x, W, y, I, O, o0, o1); break;
    default: stream_rows512<8>(x, W, y, I, O, o0, o1); break;
  }
}

inline bool has_avx512_bf16() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512bf16");
  return yes;
}

template <typename T>
void stream(const float* x, const T* W, T* y, int64_t M, int64_t I, int64_t O, int64_t o0, int64_t o1) {
  switch (M) {
    case 1: stream_rows<1>(x, W, y, I, O, o0, o1); break;
    case 2: stream_rows<2>(x, W, y, I, O, o0, o1); break;
    case 3: stream_rows<3>(x, W, y, I, O, o0, o1); break;
    case 4: stream_rows<4>(x, W, y, I, O, o0, o1); break;
    case 5: stream_rows<5>(x, W, y, I, O, o0, o1); break;
    case 6: stream_rows<6>(x, W, y, I, O, o0, o1); break;
    case 7: stream_rows<7>(x, W, y, I, O, o0, o1); break;
    default: stream_rows<8>(x, W, y, I, O, o0, o1); break;
  }
}

}  // namespace

// The AVX-512 variant where the CPU has it, unless switched off (set_isa, for A/B, the machine's choice and the
// tests): 0 = AVX2; 1 = AVX-512 where available, bf16 by vdpbf16ps where the CPU has AVX512-BF16; 2 = AVX-512 FMAs
// alone (bf16 widened to fp32 in registers, as on a CPU without AVX512-BF16).
inline int& isa_choice() {
  static int v = 1;
  return v;
}
inline bool use_avx512() { return isa_choice() >= 1 && has_avx512(); }
inline bool use_bf16_dot() { return isa_choice() == 1 && has_avx512_bf16(); }

// The packed layout (packs.h) a product takes in the variant in use, or −1 (the row layout): on AVX-512F bf16 in
// BF16X16 (multiplied by vdpbf16ps where use_bf16_dot(), else widened into FMAs) and fp32 in F32X16, else BF16X8
// and F32X8. The FMA forms fuse each output's products in input order whatever the lanes: the same bits in both.
inline int pack_kind(bool bf16, bool row_layout) {
  if (row_layout) return -1;
  if (bf16) return use_avx512() ? packed::BF16X16 : packed::BF16X8;
  return use_avx512() ? packed::F32X16 : packed::F32X8;
}

// The most rows of x one pass over the weights takes: 64 in a packed form, 8 in the row layout.
inline int64_t rows_a_pass(int kind) { return kind >= 0 ? packed::MAX_M : 8; }

// The entry points name the weights they will multiply, so that their packs exist before the products run
// (a product whose weight has no valid pack packs it on the spot: the same bits, much slower).
inline void ensure_weights(const std::vector<torch::Tensor>& ws) {
  for (const auto& w : ws) {
    const int kind = pack_kind(w.scalar_type() == at::kBFloat16, false);
    if (kind >= 0) packed::ensure_packed(w, kind);
  }
}

// One product of a run_all call: y (M, O) = x · W (O, I)ᵀ, every product of the call sharing x.
template <typename T>
struct Product {
  const T* W;
  T* y;
  int64_t O;
};

// Every product of ``ps`` in one parallel region: their weight rows, end to end, split across torch's intra-op
// threads (a thread's range may run from one product's rows into the next's). Each output is computed by the same
// code on the same values as a call of its own, so the bits do not depend on the grouping.
template <typename T>
inline void run_all(const float* xp, const std::vector<Product<T>>& ps, int64_t M, int64_t I, bool row_layout) {
  constexpr bool BF = !std::is_same_v<T, float>;
  const int kind = pack_kind(BF, row_layout);
  const int64_t cap = rows_a_pass(kind);
  if (M > cap) {                         // blocks of rows: each row's sums are its own, so the bits stay the same
    for (int64_t m0 = 0; m0 < M; m0 += cap) {
      std::vector<Product<T>> part;
      for (const auto& p : ps) part.push_back({p.W, p.y + m0 * p.O, p.O});
      run_all<T>(xp + m0 * I, part, std::min(cap, M - m0), I, row_layout);
    }
    return;
  }
  if (kind >= 0) {                                               // a packed outer-product form
    const bool dot = kind == packed::BF16X16 && use_bf16_dot();
    std::vector<uint32_t> xw;                                    // vdpbf16ps: x narrowed once, exactly, to pairs
    const int64_t ip = (I + 1) / 2;
    if (dot) {
      xw.assign(M * ip, 0);
      auto* xb = reinterpret_cast<uint16_t*>(xw.data());
      for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < I; ++i) xb[m * 2 * ip + i] = at::BFloat16(xp[m * I + i]).x;
    }
    std::vector<std::shared_ptr<const packed::Pack>> pks;
    int64_t blocks = 0;
    for (const auto& p : ps) pks.push_back(packed::pack_for(p.W, p.O, I, kind)), blocks += pks.back()->nb;
    at::parallel_for(0, blocks, 4, [&](int64_t a, int64_t b) {
      int64_t base = 0;
      for (size_t k = 0; k < ps.size(); ++k) {
        const int64_t nb = pks[k]->nb, lo = std::max(a, base), hi = std::min(b, base + nb);
        if (lo < hi) {
          if (dot) packed::blocks(xw.data(), *pks[k], ps[k].y, M, lo - base, hi - base);
          else if (packed::lanes(kind) == 16) packed::blocks16(xp, *pks[k], ps[k].y, M, lo - base, hi - base);
          else packed::blocks8(xp, *pks[k], ps[k].y, M, lo - base, hi - base);
        }
        base += nb;
      }
    });
    return;
  }
  int64_t total = 0;
  for (const auto& p : ps) total += p.O;
  at::parallel_for(0, total, 64, [&](int64_t a, int64_t b) {     // the row layout over the products' rows [a, b)
    int64_t base = 0;
    for (const auto& p : ps) {
      const int64_t lo = std::max(a, base), hi = std::min(b, base + p.O);
      if (lo < hi) {
        if constexpr (!BF) {
          if (use_avx512()) stream512(xp, p.W, p.y, M, I, p.O, lo - base, hi - base);
          else stream(xp, p.W, p.y, M, I, p.O, lo - base, hi - base);
        } else {
          stream(xp, p.W, p.y, M, I, p.O, lo - base, hi - base);
        }
      }
      base += p.O;
    }
  });
}

template <typename T>
inline void run(const float* xp, const T* wp, T* yp, int64_t M, int64_t I, int64_t O, bool row_layout) {
  run_all<T>(xp, {Product<T>{wp, yp, O}}, M, I, row_layout);
}
