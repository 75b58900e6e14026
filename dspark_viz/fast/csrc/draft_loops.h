// The drafters' per-slot loops in one native call each: the draw of one index (sampling.sample) and DSpark's Markov
// head slot loop, greedy and sampled (drafters/dspark.py). Each computes the bits of the Python loop it replaces.
#pragma once

#include "decoder_layer.h"

// One slot's Markov bias b = W₁[prev]·W₂ᵀ through the kernel (what the drafter's patched linear computes, the
// same bits): e (r) and b (V_d) are the caller's buffers, reused across slots.
template <typename T>
void markov_bias(const torch::Tensor& W1, const torch::Tensor& W2, int64_t prev, std::vector<float>& e,
                 std::vector<T>& b, const char* name) {
  TORCH_CHECK(prev >= 0 && prev < W1.size(0), name, ": previous index outside W1");
  const int64_t r = W1.size(1);
  widen_into(W1.data_ptr<T>() + prev * r, e.data(), r);
  run<T>(e.data(), W2.data_ptr<T>(), b.data(), 1, r, W2.size(0), false);
}

// The checks both Markov loops make: U (γ, V_d) contiguous fp32 on the CPU, W1 (V_d + 1, r), W2 (V_d, r) in fp32
// or bf16 alike, r a multiple of 8. Returns the weights' dtype.
at::ScalarType check_markov_args(const torch::Tensor& U, const torch::Tensor& W1, const torch::Tensor& W2,
                                 const std::string& name) {
  const auto dt = W1.scalar_type();
  TORCH_CHECK(U.dim() == 2 && U.scalar_type() == at::kFloat && U.is_contiguous() && U.device().is_cpu(),
              name, ": U (γ, V_d) contiguous fp32 on the CPU");
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, name, ": W1, W2 float32 or bfloat16");
  TORCH_CHECK(W1.dim() == 2 && W2.dim() == 2 && W2.size(0) == U.size(1) && W2.size(1) == W1.size(1),
              name, ": W1 (V_d + 1, r), W2 (V_d, r)");
  TORCH_CHECK(W1.size(1) % 8 == 0, name, ": rank a multiple of 8");
  check_layer_args({W1, W2}, dt);
  ensure_weights({W2});
  return dt;
}

// The Markov head's slot loop of a greedy DSpark draft (drafters/dspark.py), in one call: for k = 1 … γ,
// e = W₁[prev]; b = e·W₂ᵀ through the kernel (what the drafter's patched linear computes, the same bits);
// logits = U_k + b in fp32; the draft is the first maximum (torch's argmax); prev = that index.
// U (γ, V_d) fp32, W1 (V_d + 1, r), W2 (V_d, r) in the drafter's dtype → the γ draft-vocabulary indices.
template <typename T>
std::vector<int64_t> markov_greedy_impl(const torch::Tensor& U, const torch::Tensor& W1, const torch::Tensor& W2,
                                        int64_t prev) {
  const int64_t g = U.size(0), Vd = U.size(1), r = W1.size(1);
  std::vector<int64_t> out(g);
  std::vector<float> e(r);
  std::vector<T> b(Vd);
  const float* Up = U.data_ptr<float>();
  for (int64_t k = 0; k < g; ++k) {
    markov_bias<T>(W1, W2, prev, e, b, "markov_greedy");
    const float* u = Up + k * Vd;
    int64_t best = 0;
    float top = u[0] + widen(b[0]);
    for (int64_t j = 1; j < Vd; ++j) {
      const float v = u[j] + widen(b[j]);
      if (v > top || (std::isnan(v) && !std::isnan(top))) { top = v; best = j; }
    }
    out[k] = best;
    prev = best;
  }
  return out;
}

std::vector<int64_t> markov_greedy(torch::Tensor U, torch::Tensor W1, torch::Tensor W2, int64_t prev) {
  const auto dt = check_markov_args(U, W1, W2, "markov_greedy");
  return dt == at::kFloat ? markov_greedy_impl<float>(U, W1, W2, prev)
                          : markov_greedy_impl<at::BFloat16>(U, W1, W2, prev);
}

// sampling.sample in one call: the first i with cdf_i > u, cdf the float64 running sum of p (V,) fp32 and
// u = U[0, 1) · cdf_{V−1} drawn by torch.rand(1, float64) from the same generator — the same sum in the same
// order, the same uniform, the same search, so the same index and the same generator state afterwards; u rounded
// up to the total gives the last index with mass.
int64_t sample_index(torch::Tensor p, c10::optional<at::Generator> gen) {
  TORCH_CHECK(p.dim() == 1 && p.numel() > 0 && p.scalar_type() == at::kFloat && p.device().is_cpu(),
              "sample_index: p (V,) fp32 on the CPU");
  const auto pc = p.contiguous();
  const float* pp = pc.data_ptr<float>();
  const int64_t V = pc.numel();
  std::vector<double> cdf(V);
  double s = 0.0;
  for (int64_t i = 0; i < V; ++i) cdf[i] = s += static_cast<double>(pp[i]);
  const double u = at::rand({1}, gen, at::TensorOptions().dtype(at::kDouble)).item<double>() * cdf[V - 1];
  int64_t i = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
  if (i >= V) {
    i = V - 1;
    while (i > 0 && pp[i] == 0.0f) --i;
  }
  return i;
}

// The Markov head's slot loop of a sampled DSpark draft (T > 0), in one call: for k = 1 … γ,
// b = W₁[prev]·W₂ᵀ as in markov_greedy; logits = U_k + b in fp32; p_k = softmax(logits / T) by torch's own
// operations (what sampling.probs_from_logits computes); the draft is sample_index(p_k, generator) (the same uniform
// from the same generator); prev = that index. U (γ, V_d) fp32, W1 (V_d + 1, r), W2 (V_d, r) in the drafter's
// dtype → the γ draft-vocabulary indices and P (γ, V_d) fp32, the rows p_k.
template <typename T>
std::tuple<std::vector<int64_t>, torch::Tensor> markov_sample_impl(
    const torch::Tensor& U, const torch::Tensor& W1, const torch::Tensor& W2, int64_t prev, double temp,
    c10::optional<at::Generator> gen) {
  const int64_t g = U.size(0), Vd = U.size(1), r = W1.size(1);
  std::vector<int64_t> out(g);
  std::vector<float> e(r);
  std::vector<T> b(Vd);
  auto P = torch::empty({g, Vd}, U.options());
  auto logits = torch::empty({Vd}, U.options());
  const float* Up = U.data_ptr<float>();
  for (int64_t k = 0; k < g; ++k) {
    markov_bias<T>(W1, W2, prev, e, b, "markov_sample");
    const float* u = Up + k * Vd;
    float* l = logits.data_ptr<float>();
    for (int64_t j = 0; j < Vd; ++j) l[j] = u[j] + widen(b[j]);
    const auto p = at::softmax(logits.div(temp), -1);                   // (V_d,)
    P[k].copy_(p);
    out[k] = sample_index(p, gen);
    prev = out[k];
  }
  return {out, P};
}

std::tuple<std::vector<int64_t>, torch::Tensor> markov_sample(torch::Tensor U, torch::Tensor W1, torch::Tensor W2,
                                                              int64_t prev, double temperature,
                                                              c10::optional<at::Generator> gen) {
  TORCH_CHECK(temperature > 0, "markov_sample: temperature must be > 0 (greedy drafts take markov_greedy)");
  const auto dt = check_markov_args(U, W1, W2, "markov_sample");
  return dt == at::kFloat ? markov_sample_impl<float>(U, W1, W2, prev, temperature, gen)
                          : markov_sample_impl<at::BFloat16>(U, W1, W2, prev, temperature, gen);
}
