// The fp32 product on a CPU with AVX-512F in the outer-product form: y (M, O) = x (M, I) · W (O, I)ᵀ for 1…64
// rows of x, every weight read from memory once for all rows (skinny_kernels.h's run_all takes it for fp32 in the
// AVX-512 variant).
//
// The 16 lanes of a zmm are 16 outputs: W is packed once (packs.h, layout F32X16) into blocks of 16 weight rows,
// P[b][i][j] = W[16b + j][i], so that one 64-byte load holds input i of 16 outputs. x's value x[m, i] is broadcast
// to every lane, and a tile of NB blocks × MB rows keeps NB·MB accumulators in registers: NB·MB + NB + 1 of the 32
// zmm registers, each weight vector loaded feeding MB FMAs, each broadcast NB.
//
// Width invariance: output y[m, o] is one lane of one accumulator, into which w[o, i]·x[m, i] is fused-multiply-
// added for i = 0, 1, … I − 1 in order — the same sequence whatever M, the tile shape or the thread split is, so a
// token's product is bit-identical alone, in its block of 2–8, or beside other sequences' rows in up to 64. It is
// also the sequence of the AVX2 form (packed_avx2.h, F32X8): fp32 products give the same bits in both variants.
#pragma once
#include "packs.h"

#include <immintrin.h>

namespace packed {

constexpr int64_t LANES16 = 16;
constexpr int64_t PF16 = 16;                  // lines ahead each block's stream is prefetched
constexpr int64_t MB16 = 8;                   // rows of x a tile takes at most

// One register tile: NB blocks (16·NB outputs) against MB rows of x (stride I) over inputs [i0, i1), continuing
// the sums in io (MB, 16·NB) fp32 (zeros first where fresh): a tile cut into spans of inputs adds the same
// products in the same order. P: the tile's first block, bs its 16-bit words.
template <int NB, int MB>
__attribute__((target("avx512f"), noinline)) void tile16(const float* x, int64_t I, const uint16_t* P, int64_t bs,
                                                         float* io, int64_t i0, int64_t i1, bool fresh) {
  static_assert(NB * MB + NB + 1 <= 32, "the tile's registers");
  __m512 acc[NB][MB];
  _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n)
    _Pragma("GCC unroll 16") for (int m = 0; m < MB; ++m)
      acc[n][m] = fresh ? _mm512_setzero_ps() : _mm512_loadu_ps(io + (m * NB + n) * LANES16);
  const float* W = reinterpret_cast<const float*>(P);
  const int64_t fs = bs / 2;                                      // a block's floats
  for (int64_t i = i0; i < i1; ++i) {                             // one input: one 64-byte line of each block
    __m512 w[NB];
    _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n) {
      _mm_prefetch(reinterpret_cast<const char*>(W + n * fs + (i + PF16) * LANES16), _MM_HINT_T0);
      w[n] = _mm512_load_ps(W + n * fs + i * LANES16);
    }
    _Pragma("GCC unroll 16") for (int m = 0; m < MB; ++m) {
      const __m512 xv = _mm512_set1_ps(x[m * I + i]);
      _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n) acc[n][m] = _mm512_fmadd_ps(w[n], xv, acc[n][m]);
    }
  }
  _Pragma("GCC unroll 16") for (int m = 0; m < MB; ++m)
    _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n) _mm512_storeu_ps(io + (m * NB + n) * LANES16, acc[n][m]);
}

template <int NB>
inline void span16(const float* x, int64_t I, const uint16_t* P, int64_t bs, float* io, int64_t mb, int64_t i0,
                   int64_t i1, bool fresh) {
  switch (mb) {                                                   // mb ≤ MB16 rows, within the registers
    case 1: tile16<NB, 1>(x, I, P, bs, io, i0, i1, fresh); break;
    case 2: tile16<NB, 2>(x, I, P, bs, io, i0, i1, fresh); break;
    case 3: tile16<NB, 3>(x, I, P, bs, io, i0, i1, fresh); break;
    case 4: if constexpr (NB <= 6) tile16<NB, 4>(x, I, P, bs, io, i0, i1, fresh); break;
    case 5: if constexpr (NB <= 5) tile16<NB, 5>(x, I, P, bs, io, i0, i1, fresh); break;
    case 6: if constexpr (NB <= 4) tile16<NB, 6>(x, I, P, bs, io, i0, i1, fresh); break;
    case 7: if constexpr (NB <= 3) tile16<NB, 7>(x, I, P, bs, io, i0, i1, fresh); break;
    default: if constexpr (NB <= 3) tile16<NB, 8>(x, I, P, bs, io, i0, i1, fresh); break;
  }
}

// Blocks [b, b + NB) against all M rows, into y (M, O) rounded to T. Up to MB rows: one pass over every input.
// More: spans of KC16 inputs (NB · KC16 weight vectors, ≤ 24 KB: within L1), each span applied to the rows MB at
// a time.
template <int NB, int MB, typename T>
inline void tile_rows16(const float* x, const Pack& pk, int64_t b, T* y, int64_t M, float* io) {
  constexpr int64_t KC16 = 384 / NB;
  const int64_t I = pk.I;
  const uint16_t* P = pk.P.data() + b * pk.bs;
  spans_by_rows(I, KC16, M, MB, [&](int64_t m0, int64_t mb, int64_t i0, int64_t i1, bool fresh) {
    span16<NB>(x + m0 * I, I, P, pk.bs, io + m0 * NB * LANES16, mb, i0, i1, fresh);
  });
  round_into(io, NB * LANES16, y, M, pk.O, b * LANES16);
}

// Blocks [b0, b1) of one F32X16 pack against all M rows (x fp32 (M, I)): the widest tile whose registers hold
// min(M, 8) rows.
template <typename T>
inline void blocks16(const float* x, const Pack& pk, T* y, int64_t M, int64_t b0, int64_t b1) {
  std::vector<float> io(M * 6 * LANES16);
  auto run = [&](auto nb_tag, auto mb_tag) {
    constexpr int NB = decltype(nb_tag)::value;
    constexpr int MB = decltype(mb_tag)::value;
    int64_t b = b0;
    for (; b + NB <= b1; b += NB) tile_rows16<NB, MB>(x, pk, b, y, M, io.data());
    for (; b < b1; ++b) tile_rows16<1, MB>(x, pk, b, y, M, io.data());
  };
  using std::integral_constant;
  if (M <= 1) run(integral_constant<int, 4>{}, integral_constant<int, 1>{});
  else if (M <= 3) run(integral_constant<int, 6>{}, integral_constant<int, 3>{});
  else if (M <= 4) run(integral_constant<int, 5>{}, integral_constant<int, 4>{});
  else if (M <= 6) run(integral_constant<int, 4>{}, integral_constant<int, 6>{});
  else run(integral_constant<int, 3>{}, integral_constant<int, 8>{});
}

}  // namespace packed
