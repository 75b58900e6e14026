// The weight packs of the outer-product kernels (packed_bf16.h, packed_avx512.h, packed_avx2.h): each weight W (O, I)
// the kernel multiplies, copied once into blocks of LANES outputs so that one vector load holds the same input of
// LANES outputs. Four layouts (Kind):
//
//   BF16X16  bf16, 16 outputs a block, pair-interleaved:  P[b][p][2j + e] = W[16b + j][2p + e]   (AVX512-BF16)
//   BF16X8   bf16,  8 outputs a block, pair-interleaved:  P[b][p][2j + e] = W[8b + j][2p + e]    (AVX2)
//   F32X16   fp32, 16 outputs a block:                    P[b][i][j]      = W[16b + j][i]        (AVX-512F)
//   F32X8    fp32,  8 outputs a block:                    P[b][i][j]      = W[8b + j][i]         (AVX2)
//
// (b < ⌈O/LANES⌉, p < ⌈I/2⌉, j < LANES, e < 2; zeros past O or I.) Each (b, p) or (b, i) vector is 32 or 64 bytes,
// the pack 64-byte aligned.
//
// The packs live in a registry keyed by the weight's address, size and layout, made on first use of a tensor
// (ensure_packed at every entry point) and checked at every use: the storage still alive (a weak reference), its
// version counter unchanged and a fingerprint of 16 of its 16-bit words the same; otherwise packed again. Memory:
// one more copy of each weight the kernel multiplies (the 135M target: ≈ 270 MB in bf16, 540 MB in fp32), freed
// with the weight.
#pragma once
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace packed {

constexpr int64_t MAX_M = 64;                 // rows of x per call
constexpr int NFP = 16;                       // 16-bit words in a pack's fingerprint

enum Kind : int { BF16X16 = 0, BF16X8 = 1, F32X8 = 2, F32X16 = 3 };
inline constexpr int64_t lanes(int kind) { return kind == BF16X16 || kind == F32X16 ? 16 : 8; }
inline constexpr bool is_bf16(int kind) { return kind == BF16X16 || kind == BF16X8; }

template <typename V>
struct Aligned64Of {                          // an allocator of 64-byte aligned memory (a vector per cache line)
  using value_type = V;
  Aligned64Of() = default;
  template <typename U>
  Aligned64Of(const Aligned64Of<U>&) {}
  V* allocate(size_t n) {
    void* p = std::aligned_alloc(64, ((n * sizeof(V) + 63) / 64) * 64);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<V*>(p);
  }
  void deallocate(V* p, size_t) { std::free(p); }
  template <typename U>
  bool operator==(const Aligned64Of<U>&) const { return true; }
  template <typename U>
  bool operator!=(const Aligned64Of<U>&) const { return false; }
};
using Aligned64 = Aligned64Of<uint16_t>;

struct Pack {
  int kind = BF16X16;
  int64_t O = 0, I = 0, nb = 0, ip = 0;       // nb blocks of lanes(kind) outputs, ip pairs of inputs
  int64_t bs = 0;                             // one block's 16-bit words: ip · 2 · lanes (bf16), I · 2 · lanes (fp32)
  std::vector<uint16_t, Aligned64> P;         // (nb, bs) words: bf16 bits, or fp32 values as word pairs
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> storage;   // the weight's (none: made on the spot)
  std::unique_ptr<c10::VariableVersion> version;   // null for inference tensors (no counter)
  uint32_t at_version = 0;
  uint16_t fp[NFP] = {};
  const float* f32(int64_t b) const { return reinterpret_cast<const float*>(P.data() + b * bs); }
  const uint16_t* bf16(int64_t b) const { return P.data() + b * bs; }
};

inline void fingerprint(const uint16_t* words, int64_t n, uint16_t* out) {
  for (int k = 0; k < NFP; ++k) out[k] = words[(k * (n - 1)) / (NFP - 1)];
}

inline void fill(Pack& pk, const void* W) {                      // P from W (O, I), in parallel over blocks
  pk.P.assign(pk.nb * pk.bs, 0);
  const int64_t L = lanes(pk.kind);
  at::parallel_for(0, pk.nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t j = 0; j < L && b * L + j < pk.O; ++j) {
        if (is_bf16(pk.kind)) {
          const uint16_t* w = static_cast<const uint16_t*>(W) + (b * L + j) * pk.I;
          uint16_t* d = pk.P.data() + b * pk.bs + 2 * j;
          for (int64_t i = 0; i < pk.I; ++i) d[(i / 2) * 2 * L + (i & 1)] = w[i];
        } else {
          const float* w = static_cast<const float*>(W) + (b * L + j) * pk.I;
          float* d = reinterpret_cast<float*>(pk.P.data() + b * pk.bs) + j;
          for (int64_t i = 0; i < pk.I; ++i) d[i * L] = w[i];
        }
      }
  });
}

// A pack of W (O, I) in the given layout: its sizes, then P from W.
inline std::shared_ptr<Pack> make_pack(const void* W, int64_t O, int64_t I, int kind) {
  auto pk = std::make_shared<Pack>();
  const int64_t L = lanes(kind);
  pk->kind = kind, pk->O = O, pk->I = I, pk->nb = (O + L - 1) / L, pk->ip = (I + 1) / 2;
  pk->bs = is_bf16(kind) ? pk->ip * 2 * L : I * 2 * L;
  fill(*pk, W);
  return pk;
}

// What both kernels' tiles share. The inputs [0, n) in spans of kc (all at once where M ≤ mb, else kc small
// enough that a span of the tile's weights stays in L1), each span applied to the rows mb at a time:
// span(m0, rows, s0, s1, fresh), where fresh marks a span whose sums start from zero.
template <typename Span>
inline void spans_by_rows(int64_t n, int64_t kc, int64_t M, int64_t mb, Span&& span) {
  if (M <= mb) kc = n;
  for (int64_t s0 = 0; s0 < n; s0 += kc)
    for (int64_t m0 = 0; m0 < M; m0 += mb) span(m0, std::min(mb, M - m0), s0, std::min(s0 + kc, n), s0 == 0);
}

// A tile's sums io (M, width) fp32 into the columns [o0, o0 + n) of y (M, O), each rounded to T once (nearest
// even), the columns past O dropped.
template <typename T>
inline void round_into(const float* io, int64_t width, T* y, int64_t M, int64_t O, int64_t o0) {
  const int64_t n = std::min(width, O - o0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < n; ++k) y[m * O + o0 + k] = T(io[m * width + k]);
}

struct Key {
  const void* w;
  int64_t O, I;
  int kind;
  bool operator==(const Key& k) const { return w == k.w && O == k.O && I == k.I && kind == k.kind; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<const void*>()(k.w) ^ (std::hash<int64_t>()(k.O) * 31) ^ (std::hash<int64_t>()(k.I) * 131) ^
           (static_cast<size_t>(k.kind) * 7919);
  }
};

struct Registry {
  std::mutex mu;
  std::unordered_map<Key, std::shared_ptr<Pack>, KeyHash> packs;
  int64_t made = 0, temporary = 0;            // packs made from tensors; products packed on the spot (no tensor)
};
inline Registry& registry() {
  static Registry* r = new Registry();        // never destroyed: used from torch's threads until exit
  return *r;
}

inline int64_t words(const Pack& pk) { return pk.O * pk.I * (is_bf16(pk.kind) ? 1 : 2); }

inline bool valid(const Pack& pk, const void* W) {
  if (!pk.storage || pk.storage->expired()) return false;
  if (pk.version && pk.version->current_version() != pk.at_version) return false;
  uint16_t fp[NFP];
  fingerprint(static_cast<const uint16_t*>(W), words(pk), fp);
  return std::memcmp(fp, pk.fp, sizeof fp) == 0;
}

// Make (or check) the pack of a weight W (O, I) in the given layout: contiguous, CPU, of the layout's dtype.
inline void ensure_packed(const torch::Tensor& W, int kind) {
  const auto want = is_bf16(kind) ? at::kBFloat16 : at::kFloat;
  if (W.scalar_type() != want || W.dim() != 2 || !W.is_contiguous() || !W.device().is_cpu()) return;
  const int64_t O = W.size(0), I = W.size(1);
  if (O == 0 || I == 0) return;
  const void* w = W.data_ptr();
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const Key key{w, O, I, kind};
  auto it = r.packs.find(key);
  if (it != r.packs.end() && valid(*it->second, w)) return;
  for (auto j = r.packs.begin(); j != r.packs.end();)            // forget the packs of freed weights
    j = !j->second->storage || j->second->storage->expired() ? r.packs.erase(j) : std::next(j);
  auto pk = make_pack(w, O, I, kind);
  pk->storage.emplace(W.storage().getWeakStorageImpl());
  if (!W.is_inference()) {
    pk->version = std::make_unique<c10::VariableVersion>(W.unsafeGetTensorImpl()->version_counter());
    pk->at_version = pk->version->current_version();
  }
  fingerprint(static_cast<const uint16_t*>(w), words(*pk), pk->fp);
  r.packs[key] = pk;
  ++r.made;
}

// The pack of W for this call: the registry's where it is still valid, else one made on the spot (correct, slow).
inline std::shared_ptr<const Pack> pack_for(const void* W, int64_t O, int64_t I, int kind) {
  auto& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.packs.find(Key{W, O, I, kind});
    if (it != r.packs.end() && valid(*it->second, W)) return it->second;
    ++r.temporary;
  }
  return make_pack(W, O, I, kind);
}

}  // namespace packed
