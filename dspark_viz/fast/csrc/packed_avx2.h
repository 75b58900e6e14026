// fp32 and bf16 products on AVX2 + FMA in the outer-product form: y (M, O) = x (M, I) · W (O, I)ᵀ for 1…64 rows
// of x, every weight read from memory once for all rows (skinny_kernels.h's run_all takes it where the CPU has no
// AVX-512F, or in the avx2 variant).
//
// The 8 lanes of a ymm are 8 outputs: W is packed once (packs.h) into blocks of 8 weight rows, so that one 32-byte
// load holds input i of 8 outputs (F32X8), or inputs 2p and 2p + 1 of 8 outputs as bf16 pairs (BF16X8: the even
// input is the word shifted up 16 bits, the odd one the word with its low half cleared — both exact). x's value
// x[m, i] is broadcast to every lane, and a tile of NB blocks × MB rows keeps NB·MB accumulators in registers:
// NB·MB + NB + 1 of the 16 ymm registers, each weight vector loaded feeding MB FMAs.
//
// Width invariance: output y[m, o] is one lane of one accumulator, into which w[o, i]·x[m, i] is fused-multiply-
// added for i = 0, 1, … I − 1 in order, then rounded to T once — the same sequence whatever M, the tile shape or
// the thread split is. So a token's product is bit-identical alone, in its block of 2–8, or beside other sequences'
// rows in up to 64. (The same sequence for fp32 and bf16 weights: only the weights' values differ.)
#pragma once
#include "packs.h"

#include <immintrin.h>

namespace packed {

constexpr int64_t LANES8 = 8;
constexpr int64_t PF8 = 16;                   // lines ahead each block's stream is prefetched
// Rows of x a tile takes at most: NB·MB accumulators + NB weights + a broadcast (+ the bf16 mask) ≤ 16 registers.
template <bool BF>
inline constexpr int64_t mb8() { return BF ? 3 : 4; }

// 8 weights of input i of a block: fp32 as stored, bf16 widened from its pair word (exactly; e = i's parity).
template <bool BF>
inline __m256 weights8(const uint16_t* blk, int64_t i, int e) {
  if constexpr (BF) {
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + (i >> 1) * 16));
    return _mm256_castsi256_ps(e == 0 ? _mm256_slli_epi32(v, 16)
                                      : _mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  } else {
    return _mm256_load_ps(reinterpret_cast<const float*>(blk) + i * 8);
  }
}

// One register tile: NB blocks (8·NB outputs) against MB rows of x (fp32, stride I) over inputs [i0, i1) (i0 even),
// continuing the sums in io (MB, 8·NB) fp32 (zeros first where fresh): a tile cut into spans of inputs adds the
// same products in the same order. P: the tile's first block, bs its words.
template <int NB, int MB, bool BF>
__attribute__((noinline)) void tile8(const float* x, int64_t I, const uint16_t* P, int64_t bs,
                                                        float* io, int64_t i0, int64_t i1, bool fresh) {
  __m256 acc[NB][MB];
  _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n)
    _Pragma("GCC unroll 16") for (int m = 0; m < MB; ++m) acc[n][m] = fresh ? _mm256_setzero_ps() : _mm256_loadu_ps(io + (m * NB + n) * 8);
  // One input: NB weight vectors, then per row a broadcast and NB FMAs (written out, not as a lambda, and every
  // loop unrolled, so that the accumulators stay in registers: GCC spilled them to the stack each step otherwise).
#define DSPARK_TILE8_STEP(II, E)                                                   \
  {                                                                                \
    __m256 w[NB];                                                                  \
    _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n) w[n] = weights8<BF>(P + n * bs, (II), (E)); \
    _Pragma("GCC unroll 16") for (int m = 0; m < MB; ++m) {                                \
      const __m256 xv = _mm256_broadcast_ss(x + m * I + (II));                     \
      _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n) acc[n][m] = _mm256_fmadd_ps(w[n], xv, acc[n][m]); \
    }                                                                              \
  }
  int64_t i = i0;
  for (; i + 1 < i1; i += 2) {                    // two inputs a step: 32 (bf16) or 64 (fp32) bytes of each block
    const int64_t at = BF ? (i >> 1) * 16 : i * 16;                       // the step's first word in a block
    _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n)
      _mm_prefetch(reinterpret_cast<const char*>(P + n * bs + at + PF8 * 32), _MM_HINT_T0);
    DSPARK_TILE8_STEP(i, 0)
    DSPARK_TILE8_STEP(i + 1, 1)
  }
  if (i < i1) DSPARK_TILE8_STEP(i, 0)
#undef DSPARK_TILE8_STEP
  _Pragma("GCC unroll 16") for (int m = 0; m < MB; ++m)
    _Pragma("GCC unroll 16") for (int n = 0; n < NB; ++n) _mm256_storeu_ps(io + (m * NB + n) * 8, acc[n][m]);
}

template <int NB, bool BF>
inline void span8(const float* x, int64_t I, const uint16_t* P, int64_t bs, float* io, int64_t mb, int64_t i0,
                  int64_t i1, bool fresh) {
  switch (mb) {                                                   // mb ≤ mb8<BF>() rows
    case 1: tile8<NB, 1, BF>(x, I, P, bs, io, i0, i1, fresh); break;
    case 2: tile8<NB, 2, BF>(x, I, P, bs, io, i0, i1, fresh); break;
    case 3: tile8<NB, 3, BF>(x, I, P, bs, io, i0, i1, fresh); break;
    default:
      if constexpr (!BF) tile8<NB, 4, BF>(x, I, P, bs, io, i0, i1, fresh);
      break;
  }
}

// Blocks [b, b + NB) against all M rows, into y (M, O) rounded to T. Up to mb8 rows: one pass over every input.
// More: spans of KC8 inputs (NB · KC8 weight vectors, within L1), each span applied to the rows mb8 at a time.
template <int NB, bool BF, typename T>
inline void tile_rows8(const float* x, const Pack& pk, int64_t b, T* y, int64_t M, float* io) {
  constexpr int64_t KC8 = 128;
  const int64_t I = pk.I;
  const uint16_t* P = pk.P.data() + b * pk.bs;
  spans_by_rows(I, KC8, M, mb8<BF>(), [&](int64_t m0, int64_t mb, int64_t i0, int64_t i1, bool fresh) {
    span8<NB, BF>(x + m0 * I, I, P, pk.bs, io + m0 * NB * LANES8, mb, i0, i1, fresh);
  });
  round_into(io, NB * LANES8, y, M, pk.O, b * LANES8);
}

// Blocks [b0, b1) of one pack (F32X8 or BF16X8) against all M rows (x fp32 (M, I)), NB blocks a tile.
template <typename T>
inline void blocks8(const float* x, const Pack& pk, T* y, int64_t M, int64_t b0, int64_t b1) {
  std::vector<float> io(M * 8 * LANES8);
  auto run = [&](auto nb_tag, auto bf_tag) {
    constexpr int NB = decltype(nb_tag)::value;
    constexpr bool BF = decltype(bf_tag)::value;
    int64_t b = b0;
    for (; b + NB <= b1; b += NB) tile_rows8<NB, BF>(x, pk, b, y, M, io.data());
    for (; b < b1; ++b) tile_rows8<1, BF>(x, pk, b, y, M, io.data());
  };
  if (pk.kind == BF16X8) {                                        // the tiles GCC keeps in registers
    if (M <= 2) run(std::integral_constant<int, 4>{}, std::true_type{});
    else run(std::integral_constant<int, 3>{}, std::true_type{});
  } else {
    if (M <= 1) run(std::integral_constant<int, 6>{}, std::false_type{});
    else if (M <= 2) run(std::integral_constant<int, 5>{}, std::false_type{});
    else run(std::integral_constant<int, 3>{}, std::false_type{});
  }
}

}  // namespace packed
