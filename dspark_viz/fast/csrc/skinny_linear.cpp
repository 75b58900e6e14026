// y = x · Wᵀ for 1–64 rows of x (fp32 or bf16, CPU): the verification forward's matmuls.
//
// A decode step on a small model is bound by streaming the weights from memory. BLAS libraries pick
// kernels tuned for large M; with 2–8 rows (the tokens a speculative round verifies) they can run
// slower than one row, and they pick another kernel (another summation order) for each M. Here each weight is read
// from memory once for all rows of x, 1–64 rows a pass, in a packed outer-product form: bf16 by vdpbf16ps on a CPU
// with AVX512-BF16 (packed_bf16.h), fp32 by AVX-512 FMAs on a CPU with AVX-512F (packed_avx512.h), fp32 and bf16 by
// AVX2 FMAs elsewhere (packed_avx2.h). A row layout, 8 rows a pass, stays for A/B (skinny_kernels.h).
//
// Shapes: x (M, I) contiguous, W (O, I) contiguous → y (M, O). at::parallel_for splits the rows of W across
// torch's intra-op threads (built with -fopenmp, it shares torch's own OpenMP runtime and thread count).
// float32: fp32 products and sums. bfloat16: W is read as bf16 (half the bytes), products exact, sums fp32 and y
// rounded to bf16 (nearest even) — the semantics of a bf16 GEMM with fp32 accumulation, in another summation order.
// That order is fixed per output, whatever M (1…64) is and whatever the thread count: one arithmetic for every
// width.
#include "skinny_kernels.h"
#include "decoder_layer.h"
#include "draft_loops.h"
#include "sample_rows.h"

#include <pybind11/stl.h>
#include <map>

torch::Tensor product(torch::Tensor x, torch::Tensor W, bool row_layout) {
  TORCH_CHECK(x.dim() == 2 && W.dim() == 2, "skinny_linear: x (M, I) and W (O, I)");
  TORCH_CHECK(x.size(1) == W.size(1), "skinny_linear: inner sizes differ");
  const auto dt = W.scalar_type();
  TORCH_CHECK(x.scalar_type() == dt && (dt == at::kFloat || dt == at::kBFloat16),
              "skinny_linear: float32 or bfloat16, x and W alike");
  TORCH_CHECK(x.device().is_cpu() && W.device().is_cpu(), "skinny_linear: CPU tensors only");
  TORCH_CHECK(W.is_contiguous(), "skinny_linear: W must be contiguous");
  const int64_t M = x.size(0), I = x.size(1), O = W.size(0);
  TORCH_CHECK(M >= 1 && M <= packed::MAX_M, "skinny_linear: 1..64 rows, got ", M);
  auto y = torch::empty({M, O}, x.options());
  if (!row_layout) ensure_weights({W});
  if (dt == at::kFloat) {
    x = x.contiguous();
    run<float>(x.data_ptr<float>(), W.data_ptr<float>(), y.data_ptr<float>(), M, I, O, row_layout);
  } else {
    const auto xf = x.to(at::kFloat).contiguous();                 // (M, I) fp32, exact
    run<at::BFloat16>(xf.data_ptr<float>(), W.data_ptr<at::BFloat16>(), y.data_ptr<at::BFloat16>(), M, I, O, row_layout);
  }
  return y;
}

torch::Tensor skinny_linear(torch::Tensor x, torch::Tensor W) { return product(x, W, false); }
torch::Tensor skinny_linear_rows(torch::Tensor x, torch::Tensor W) { return product(x, W, true); }

// Which variant runs: "avx512" (16-output blocks by AVX-512 FMAs where the CPU has AVX-512F; bf16 by vdpbf16ps
// where it also has AVX512-BF16, reported as "avx512+bf16") or "avx2". set_isa("avx512-fma") keeps the FMAs for
// bf16 too on a CPU with AVX512-BF16 (elsewhere it is "avx512").
std::string isa() { return use_bf16_dot() ? "avx512+bf16" : use_avx512() ? "avx512" : "avx2"; }
void set_isa(const std::string& name) {
  TORCH_CHECK(name == "avx2" || name == "avx512" || name == "avx512-fma", "set_isa: avx2, avx512 or avx512-fma");
  isa_choice() = name == "avx512" ? 1 : name == "avx512-fma" ? 2 : 0;
}

// Whether the kernel prefetches the weight rows ahead from 3 rows of x up (skinny_kernels.h, PF_AHEAD; on by default,
// the same bits either way: bench_matmul.py --what prefetch times it).
bool prefetch() { return prefetch_on(); }

// The weight packs (packs.h): {"live": packs held now, "made": made from a weight, "on_the_spot": products
// whose weight had no valid pack}.
std::map<std::string, int64_t> pack_stats() {
  auto& r = packed::registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return {{"live", static_cast<int64_t>(r.packs.size())}, {"made", r.made}, {"on_the_spot", r.temporary}};
}

// The most rows of x one pass over the weights takes: 64 in a packed form, 8 in the row layout (a call of up to 64
// rows reads the weights once per such block).
int64_t max_rows(bool bf16) { return rows_a_pass(pack_kind(bf16, false)); }
void set_prefetch(bool on) { prefetch_on() = on; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("isa", &isa, "the kernel variant in use: avx512+bf16 / avx512 where the CPU has it, else avx2");
  m.def("set_isa", &set_isa, "choose the kernel variant (avx2, avx512, avx512-fma; avx512 falls back to avx2 without it)");
  m.def("prefetch", &prefetch, "whether the kernel prefetches weight rows ahead (3+ rows of x)");
  m.def("set_prefetch", &set_prefetch, "switch that prefetch on or off (A/B; the bits are the same)");
  m.def("pack_stats", &pack_stats, "the weight packs: live, made, products packed on the spot");
  m.def("max_rows", &max_rows, "the most rows of x one pass over the weights takes (a packed form: 64; the row layout: 8)");
  m.def("skinny_linear", &skinny_linear, "y = x·Wᵀ for 1..64 rows of x (fp32 or bf16)");
  m.def("skinny_linear_rows", &skinny_linear_rows, "the same in the row layout (A/B against the packed forms)");
  m.def("layer_qkv", &layer_qkv, "decoder layer, first half: RMSNorm, q/k/v projections, rotary (decoder_layer.h)");
  m.def("layer_rest", &layer_rest, "decoder layer, second half: causal attention over the cache, o-projection, MLP");
  m.def("layer_rest_full", &layer_rest_full, "the same, every query attending to all keys (a parallel draft block)");
  m.def("ragged_layer", &ragged_layer, "a decoder layer over rows of many sequences in the few-token layers' arithmetic");
  m.def("ragged_attention", &ragged_attention, "causal attention of rows from many sequences over their own cache slots");
  m.def("sample_icdf", &sample_icdf, "one token per row from softmax(logits / T) at the row's uniform (sample_rows.h)");
  m.def("rms_norm_rows", &rms_norm_rows, "RMSNorm over the last dimension in the fused layers' arithmetic");
  m.def("sample_index", &sample_index, "sampling.sample of a (V,) fp32 distribution in one call (draft_loops.h)",
        py::arg("p"), py::arg("generator") = py::none());
  m.def("markov_greedy", &markov_greedy, "a greedy DSpark draft's Markov-head slot loop (draft_loops.h)");
  m.def("markov_sample", &markov_sample, "a sampled DSpark draft's Markov-head slot loop (draft_loops.h)",
        py::arg("U"), py::arg("W1"), py::arg("W2"), py::arg("prev"), py::arg("temperature"),
        py::arg("generator") = py::none());
  py::class_<StackPlan>(m, "StackPlan", "every decoder layer of a few-token forward in one call (decoder_layer.h)")
      .def(py::init<std::vector<torch::Tensor>, std::vector<double>, std::vector<double>, std::vector<double>,
                    std::vector<int64_t>, std::vector<int64_t>>())
      .def("n_layers", &StackPlan::n_layers)
      .def("step", &StackPlan::step, "x, key buffers, value buffers, past, cos, sin → every layer's output")
      .def("forward", &StackPlan::forward, "step, then final norm and LM head → layer outputs, normed rows, logits");
}
