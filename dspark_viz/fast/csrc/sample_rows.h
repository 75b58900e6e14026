// One token per row from softmax(logits / T) by inverting its CDF at the row's uniform (train/sample.py's
// next_tokens for many rows at once: the corpus sampler draws 64–256 rows of a 49k vocabulary per forward, where
// torch's divide, softmax, cumsum and search cost a sixth of the forward).
//
// Per row, one pass for the max m, one for e_j = exp((l_j − m)/T) in blocks of 64 (each block's sum over its
// eight 8-lane partial sums, in order), then the walk: the CDF at a block's end is the running sum of the block
// sums in order, inside a block the running sum of its e_j in order; the token is the first j whose CDF exceeds
// u · (the total) — so a token of zero mass is never drawn, and u rounded up to the total gives the last block
// with mass. The law is softmax(l / T) to within fp32 rounding; the arithmetic is fixed per row, so a row's token
// does not depend on the other rows or on the thread count.
// Shapes: logits (R, V) fp32 or bf16 contiguous, u (R,) fp32 in [0, 1) → (R,) int64.
#pragma once
#include <vector>

namespace {

template <typename T>
int64_t icdf_row(const T* l, int64_t V, float inv_t, float u, float* e, float* block) {
  constexpr int64_t B = 64;
  const float m = row_max(l, V);
  TORCH_CHECK(m > -INFINITY, "sample_icdf: a row has no token of positive mass (every logit is -inf)");
  // exp8 clamps its argument at −87.3 (≈ fp32's smallest normal); below that the mass is 0, so −inf logits
  // (masked tokens) are never drawn
  const __m256 mb = _mm256_set1_ps(m), it = _mm256_set1_ps(inv_t), lo = _mm256_set1_ps(-87.3f);
  const int64_t nb = (V + B - 1) / B;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t j0 = b * B, j1 = std::min(V, j0 + B);
    __m256 sv = _mm256_setzero_ps();
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8) {
      const __m256 a = _mm256_mul_ps(_mm256_sub_ps(load8(l + j), mb), it);
      const __m256 x = _mm256_and_ps(exp8(a), _mm256_cmp_ps(a, lo, _CMP_GE_OQ));
      _mm256_storeu_ps(e + j, x);
      sv = _mm256_add_ps(sv, x);
    }
    float s = hsum(sv);
    for (; j < j1; ++j) s += e[j] = std::exp((widen(l[j]) - m) * inv_t);
    block[b] = s;
  }
  float total = 0.0f;
  for (int64_t b = 0; b < nb; ++b) total += block[b];
  const float x = u * total;
  float run = 0.0f;
  int64_t last = 0;
  for (int64_t b = 0; b < nb; ++b) {
    if (block[b] > 0.0f) last = b;
    if (run + block[b] > x) {
      float r = run;
      const int64_t j1 = std::min(V, (b + 1) * B);
      for (int64_t j = b * B; j < j1; ++j)
        if ((r += e[j]) > x) return j;
      break;                                          // rounding: the block's own walk fell short of x
    }
    run += block[b];
  }
  for (int64_t j = std::min(V, (last + 1) * B) - 1; j >= last * B; --j)   // the last token with mass
    if (e[j] > 0.0f) return j;
  return V - 1;
}

}  // namespace

torch::Tensor sample_icdf(torch::Tensor logits, double temperature, torch::Tensor u) {
  TORCH_CHECK(temperature > 0, "sample_icdf: temperature must be > 0 (greedy rows take argmax)");
  TORCH_CHECK(logits.dim() == 2 && logits.size(1) > 0 && logits.device().is_cpu() && logits.is_contiguous() &&
                  (logits.scalar_type() == at::kFloat || logits.scalar_type() == at::kBFloat16),
              "sample_icdf: logits (R, V) fp32 or bf16, contiguous, on the CPU");
  TORCH_CHECK(u.dim() == 1 && u.size(0) == logits.size(0) && u.scalar_type() == at::kFloat && u.is_contiguous() &&
                  u.device().is_cpu(), "sample_icdf: u (R,) fp32 on the CPU");
  const int64_t R = logits.size(0), V = logits.size(1);
  auto out = torch::empty({R}, logits.options().dtype(at::kLong));
  int64_t* op = out.data_ptr<int64_t>();
  const float* up = u.data_ptr<float>();
  const float inv_t = static_cast<float>(1.0 / temperature);
  const bool bf = logits.scalar_type() == at::kBFloat16;
  at::parallel_for(0, R, 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> e(V), block((V + 63) / 64);
    for (int64_t r = r0; r < r1; ++r)
      op[r] = bf ? icdf_row(logits.data_ptr<at::BFloat16>() + r * V, V, inv_t, up[r], e.data(), block.data())
                 : icdf_row(logits.data_ptr<float>() + r * V, V, inv_t, up[r], e.data(), block.data());
  });
  return out;
}
