// The bf16 product on a CPU with AVX512-BF16, in the outer-product form: y (M, O) = x (M, I) · W (O, I)ᵀ for
// 1…64 rows of x (skinny_kernels.h's run_all takes it in the avx512 variant where the CPU has the instructions;
// the avx512-fma variant multiplies the same pack by FMAs of the widened weights instead, packed_avx512.h).
//
// vdpbf16ps adds, into each of 16 fp32 lanes, the products of one bf16 pair of its two operands. The dot-product
// form (one weight row against one row of x, 16 lanes of partial sums, reduced at the end) needs a load of x and
// of W for every instruction and is bound by the loads well before the arithmetic. Here the 16 lanes are 16
// outputs: W is repacked once into blocks of 16 weight rows, pair-interleaved,
//
//   P[b][p][2j + e] = W[16b + j][2p + e]            (b < ⌈O/16⌉, p < ⌈I/2⌉, j < 16, e < 2; zero past O or I)
//
// so one 64-byte vector holds the p-th pair of inputs of 16 outputs; x's pair (x[m, 2p], x[m, 2p + 1]) is
// broadcast to every lane, and a tile of NB blocks × MB rows of x keeps NB·MB accumulators in registers: each
// weight vector loaded feeds MB instructions, each broadcast NB.
//
// Width invariance: output y[m, o] is one lane of one accumulator, to which the pairs p = 0, 1, … are added in
// order, then rounded to T once — the same sequence whatever M, the tile shape or the thread split is. So a
// token's product is bit-identical alone, in its block of 2–8, or beside other sequences' rows in up to 64.
//
// The pack (packs.h, layout BF16X16) is made once per weight and checked at every use.
#pragma once
#include "packs.h"

#include <immintrin.h>

namespace packed {

constexpr int64_t LANES = 16;                 // outputs per block: one zmm of fp32 sums

// Each block is one sequential stream; several side by side defeat the hardware prefetcher's pace, so the tile
// prefetches each PF_LINES cache lines ahead (measured on an AMD EPYC VM: 8 rows of x 9.0 → 7.8 ms over the
// target's weights at 16, 7.3 at 32 in a noisier run; 4 rows 8.4 → 7.1).
constexpr int64_t PF_LINES = 16;

// One register tile: NB blocks (16·NB outputs) against MB rows of x over the pairs [p0, p1), continuing the sums
// in acc (MB, 16·NB) fp32 (zeros first where fresh) — a tile cut into spans of pairs adds the same pairs in the
// same order. xp: the rows' pairs as 32-bit words (stride ip); P: the tile's first block.
template <int NB, int MB>
__attribute__((target("avx512f,avx512bw,avx512bf16"), noinline)) void tile(const uint32_t* xp, int64_t ip,
                                                                        const uint16_t* P, int64_t bs, float* io, int64_t p0,
                                                                        int64_t p1, bool fresh) {
  __m512 acc[NB][MB];
  for (int n = 0; n < NB; ++n)
    for (int m = 0; m < MB; ++m) acc[n][m] = fresh ? _mm512_setzero_ps() : _mm512_loadu_ps(io + (m * NB + n) * LANES);
  for (int64_t p = p0; p < p1; ++p) {
    for (int n = 0; n < NB; ++n)                                  // each block's stream, PF_LINES lines ahead
      _mm_prefetch(reinterpret_cast<const char*>(P + n * bs + (p + PF_LINES) * 32), _MM_HINT_T0);
    __m512bh w[NB];
    for (int n = 0; n < NB; ++n)
      w[n] = (__m512bh)_mm512_loadu_si512(reinterpret_cast<const void*>(P + n * bs + p * 32));
    for (int m = 0; m < MB; ++m) {
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(static_cast<int>(xp[m * ip + p]));
      for (int n = 0; n < NB; ++n) acc[n][m] = _mm512_dpbf16_ps(acc[n][m], xv, w[n]);
    }
  }
  for (int m = 0; m < MB; ++m)
    for (int n = 0; n < NB; ++n) _mm512_storeu_ps(io + (m * NB + n) * LANES, acc[n][m]);
}

template <int NB>
inline void span(const uint32_t* xp, int64_t ip, const uint16_t* P, int64_t bs, float* io, int64_t mb, int64_t p0, int64_t p1,
                 bool fresh) {
  switch (mb) {                                                   // mb ≤ 8 rows
    case 1: tile<NB, 1>(xp, ip, P, bs, io, p0, p1, fresh); break;
    case 2: tile<NB, 2>(xp, ip, P, bs, io, p0, p1, fresh); break;
    case 3: tile<NB, 3>(xp, ip, P, bs, io, p0, p1, fresh); break;
    case 4: tile<NB, 4>(xp, ip, P, bs, io, p0, p1, fresh); break;
    case 5: tile<NB, 5>(xp, ip, P, bs, io, p0, p1, fresh); break;
    case 6: tile<NB, 6>(xp, ip, P, bs, io, p0, p1, fresh); break;
    case 7: tile<NB, 7>(xp, ip, P, bs, io, p0, p1, fresh); break;
    default: tile<NB, 8>(xp, ip, P, bs, io, p0, p1, fresh); break;
  }
}

// Blocks [b, b + NB) against all M rows, into y (M, O) rounded to T. Up to 8 rows: one pass over every pair. More:
// spans of KC pairs (NB · KC weight vectors, within L1), each span applied to the rows 8 at a time.
template <int NB, typename T>
inline void tile_rows(const uint32_t* xp, const Pack& pk, int64_t b, T* y, int64_t M, float* io) {
  constexpr int64_t KC = 96;
  const int64_t ip = pk.ip;
  const uint16_t* P = pk.bf16(b);
  spans_by_rows(ip, KC, M, 8, [&](int64_t m0, int64_t mb, int64_t p0, int64_t p1, bool fresh) {
    span<NB>(xp + m0 * ip, ip, P, pk.bs, io + m0 * NB * LANES, mb, p0, p1, fresh);
  });
  round_into(io, NB * LANES, y, M, pk.O, b * LANES);
}

// Blocks [b0, b1) of one pack against all M rows, NB blocks a tile: NB·min(M, 8) accumulators, NB weight vectors
// and a broadcast within the 32 zmm registers, and enough independent sums to cover the instruction's latency
// (one row: a few blocks suffice, the weights arrive more slowly than they are multiplied).
template <typename T>
inline void blocks(const uint32_t* xp, const Pack& pk, T* y, int64_t M, int64_t b0, int64_t b1) {
  std::vector<float> io(M * 8 * LANES);
  auto run = [&](auto nb_tag) {
    constexpr int NB = decltype(nb_tag)::value;
    int64_t b = b0;
    for (; b + NB <= b1; b += NB) tile_rows<NB>(xp, pk, b, y, M, io.data());
    for (; b < b1; ++b) tile_rows<1>(xp, pk, b, y, M, io.data());
  };
  if (M <= 1) run(std::integral_constant<int, 4>{});
  else if (M <= 3) run(std::integral_constant<int, 6>{});
  else if (M <= 6) run(std::integral_constant<int, 4>{});
  else run(std::integral_constant<int, 3>{});
}

}  // namespace packed
