// fp32 and bf16 products by AVX-512 FMAs in the outer-product form: y (M, O) = x (M, I) · W (O, I)ᵀ for 1…64 rows
// of x, every weight read from memory once for all rows (skinny_kernels.h's run_all takes it for fp32 on a CPU with
// AVX-512F, and for bf16 there unless vdpbf16ps runs: packed_bf16.h).
//
// The 16 lanes of a zmm are 16 outputs: W is packed once (packs.h) into blocks of 16 weight rows, so that one
// 64-byte load holds input i of 16 outputs (F32X16: P[b][i][j] = W[16b + j][i]), or inputs 2p and 2p + 1 of 16
// outputs as bf16 pairs (BF16X16, the pack vdpbf16ps reads). x's value x[m, i] is broadcast to every lane, and a
// tile of NB blocks × MB rows keeps NB·MB accumulators in registers: NB·MB + NB + 2 of the 32 zmm registers at most,
// each weight vector loaded feeding MB FMAs, each broadcast NB.
//
// Width invariance: output y[m, o] is one lane of one accumulator, into which w[o, i]·x[m, i] is fused-multiply-
// added for i = 0, 1, … I − 1 in order — the same sequence whatever M, the tile shape or the thread split is, so a
// token's product is bit-identical alone, in its block of 2–8, or beside other sequences' rows in up to 64. It is
// also the sequence of the AVX2 form (packed_avx2.h): fp32 and bf16 products give the same bits in both forms.
#pragma once
#include "packs.h"

#include <immintrin.h>

namespace packed {

constexpr int64_t LANES16 = 16;
constexpr int64_t PF16 = 16;                  // lines ahead each block's stream is prefetched
constexpr int64_t MB16 = 8;                   // rows of x a tile takes at most

// 16 weights of input i of a block: fp32 as stored (F32X16), or bf16 widened from its pair word (BF16X16: the
// even input is the word shifted up 16 bits, the odd one the word with its low half cleared — both exact).
template <bool BF>
__attribute__((target("avx512f"), always_inline)) inline __m512 weights16(const uint16_t* blk, int64_t i, int e) {
  if constexpr (BF) {
    const __m512i v = _mm512_load_si512(reinterpret_cast<const void*>(blk + (i >> 1) * 32));
    return _mm512_castsi512_ps(e == 0 ? _mm512_slli_epi32(v, 16)
                                      : _mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  } else {
    return _mm512_load_ps(reinterpret_cast<const float*>(blk) + i * LANES16);
  }
}

// One register tile: NB blocks (16·NB outputs) against MB rows of x (fp32, stride I) over inputs [i0, i1) (i0
// even), continuing the sums in io (MB, 16·NB) fp32 (zeros first where fresh): a tile cut into spans of inputs adds
// the same products in the same order. P: the tile's first block, bs its 16-bit words.
template <int NB, int MB, bool BF>
__attribute__((target("avx512f"), noinline)) void tile16(const float* x, int64_t I, const uint16_t* P, int64_t bs,
                                                         float* io, int64_t i0, int64_t i1, bool fresh) {
  static_assert(NB * MB + NB + 2 <= 32, "the tile's registers");
  __m512 acc[NB][MB];
  _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n)
    _Pragma("GCC unroll 16") for (int m = 0; m < MB; ++m)
      acc[n][m] = fresh ? _mm512_setzero_ps() : _mm512_loadu_ps(io + (m * NB + n) * LANES16);
  // One input: NB weight vectors, then per row a broadcast and NB FMAs (every loop unrolled, so that the
  // accumulators stay in registers).
#define DSPARK_TILE16_STEP(II, E)                                                                        \
  {                                                                                                      \
    __m512 w[NB];                                                                                        \
    _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n) w[n] = weights16<BF>(P + n * bs, (II), (E));   \
    _Pragma("GCC unroll 16") for (int m = 0; m < MB; ++m) {                                              \
      const __m512 xv = _mm512_set1_ps(x[m * I + (II)]);                                                 \
      _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n) acc[n][m] = _mm512_fmadd_ps(w[n], xv, acc[n][m]); \
    }                                                                                                    \
  }
  int64_t i = i0;
  for (; i + 1 < i1; i += 2) {           // two inputs a step: 64 (bf16) or 128 (fp32) bytes of each block
    const int64_t at = BF ? (i >> 1) * 32 : i * 32;                       // the step's first word in a block
    _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n) {
      _mm_prefetch(reinterpret_cast<const char*>(P + n * bs + at + PF16 * 32), _MM_HINT_T0);
      if constexpr (!BF) _mm_prefetch(reinterpret_cast<const char*>(P + n * bs + at + PF16 * 32 + 32), _MM_HINT_T0);
    }
    DSPARK_TILE16_STEP(i, 0)
    DSPARK_TILE16_STEP(i + 1, 1)
  }
  if (i < i1) DSPARK_TILE16_STEP(i, 0)
#undef DSPARK_TILE16_STEP
  _Pragma("GCC unroll 16") for (int m = 0; m < MB; ++m)
    _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n) _mm512_storeu_ps(io + (m * NB + n) * LANES16, acc[n][m]);
}

template <int NB, bool BF>
inline void span16(const float* x, int64_t I, const uint16_t* P, int64_t bs, float* io, int64_t mb, int64_t i0,
                   int64_t i1, bool fresh) {
  switch (mb) {                                                   // mb ≤ MB16 rows, within the registers
    case 1: tile16<NB, 1, BF>(x, I, P, bs, io, i0, i1, fresh); break;
    case 2: tile16<NB, 2, BF>(x, I, P, bs, io, i0, i1, fresh); break;
    case 3: tile16<NB, 3, BF>(x, I, P, bs, io, i0, i1, fresh); break;
    case 4: if constexpr (NB <= 6) tile16<NB, 4, BF>(x, I, P, bs, io, i0, i1, fresh); break;
    case 5: if constexpr (NB <= 5) tile16<NB, 5, BF>(x, I, P, bs, io, i0, i1, fresh); break;
    case 6: if constexpr (NB <= 4) tile16<NB, 6, BF>(x, I, P, bs, io, i0, i1, fresh); break;
    case 7: if constexpr (NB <= 3) tile16<NB, 7, BF>(x, I, P, bs, io, i0, i1, fresh); break;
    default: if constexpr (NB <= 3) tile16<NB, 8, BF>(x, I, P, bs, io, i0, i1, fresh); break;
  }
}

// Blocks [b, b + NB) against all M rows, into y (M, O) rounded to T. Up to MB rows: one pass over every input.
// More: spans of KC16 inputs (NB · KC16 weight vectors, ≤ 24 KB: within L1), each span applied to the rows MB at
// a time.
template <int NB, int MB, bool BF, typename T>
inline void tile_rows16(const float* x, const Pack& pk, int64_t b, T* y, int64_t M, float* io) {
  constexpr int64_t KC16 = 384 / NB;
  const int64_t I = pk.I;
  const uint16_t* P = pk.P.data() + b * pk.bs;
  spans_by_rows(I, KC16, M, MB, [&](int64_t m0, int64_t mb, int64_t i0, int64_t i1, bool fresh) {
    span16<NB, BF>(x + m0 * I, I, P, pk.bs, io + m0 * NB * LANES16, mb, i0, i1, fresh);
  });
  round_into(io, NB * LANES16, y, M, pk.O, b * LANES16);
}

template <bool BF, typename T>
inline void blocks16_of(const float* x, const Pack& pk, T* y, int64_t M, int64_t b0, int64_t b1) {
  std::vector<float> io(M * 6 * LANES16);
  auto run = [&](auto nb_tag, auto mb_tag) {
    constexpr int NB = decltype(nb_tag)::value;
    constexpr int MB = decltype(mb_tag)::value;
    int64_t b = b0;
    for (; b + NB <= b1; b += NB) tile_rows16<NB, MB, BF>(x, pk, b, y, M, io.data());
    for (; b < b1; ++b) tile_rows16<1, MB, BF>(x, pk, b, y, M, io.data());
  };
  using std::integral_constant;
  if (M <= 1) run(integral_constant<int, 4>{}, integral_constant<int, 1>{});
  else if (M <= 3) run(integral_constant<int, 6>{}, integral_constant<int, 3>{});
  else if (M <= 4) run(integral_constant<int, 5>{}, integral_constant<int, 4>{});
  else if (M <= 6) run(integral_constant<int, 4>{}, integral_constant<int, 6>{});
  else run(integral_constant<int, 3>{}, integral_constant<int, 8>{});
}

// Blocks [b0, b1) of one F32X16 or BF16X16 pack against all M rows (x fp32 (M, I)): the widest tile whose
// registers hold min(M, 8) rows.
template <typename T>
inline void blocks16(const float* x, const Pack& pk, T* y, int64_t M, int64_t b0, int64_t b1) {
  if (pk.kind == BF16X16) blocks16_of<true>(x, pk, y, M, b0, b1);
  else blocks16_of<false>(x, pk, y, M, b0, b1);
}

}  // namespace packed
