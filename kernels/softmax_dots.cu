// tokenbook: inner products of softmax rows <pi_j, pi_k> = sum_v exp(l_jv - m_j) exp(l_kv - m_k) / (s_j s_k)
// for a list of (j, k) pairs, without materialising the softmax. m and s are each row's max and
// sum exp(l - m) (from row_state_*, which the host wrapper runs first). One block per pair
// (grid-stride), blockDim.x a multiple of 32 (at most 1024). A row with no finite logit has no
// softmax: its pairs give NaN (as torch.softmax does), so do out-of-range row indices.
#include "common.cuh"

template <typename T>
__device__ __forceinline__ void tb_softmax_dots(const T* __restrict__ logits, long long n_rows,
                                                long long n_cols, long long ld,
                                                const long long* __restrict__ pairs,
                                                long long n_pairs, const float* __restrict__ m,
                                                const float* __restrict__ s,
                                                float* __restrict__ out) {
  __shared__ float sh_sum[TB_MAX_WARPS];
  const int lane = threadIdx.x % TB_WARP;
  const int warp = threadIdx.x / TB_WARP;
  const int n_warps = blockDim.x / TB_WARP;

  for (long long p = blockIdx.x; p < n_pairs; p += gridDim.x) {
    const long long j = pairs[2 * p], k = pairs[2 * p + 1];
    const bool ok = j >= 0 && j < n_rows && k >= 0 && k < n_rows && m[j] != tb_neg_inf() &&
                    m[k] != tb_neg_inf();
    float acc = 0.0f;
    if (ok) {  // block-uniform branch
      const T* xj = logits + j * ld;
      const T* xk = logits + k * ld;
      const float mj = m[j], mk = m[k];
      for (long long v = threadIdx.x; v < n_cols; v += blockDim.x) {
        // each factor <= 1; a -inf logit makes the sum -inf and the term exactly 0
        acc += expf((tb_load(xj, v) - mj) + (tb_load(xk, v) - mk));
      }
    }
    acc = tb_warp_reduce_sum(acc);
    if (lane == 0) sh_sum[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < n_warps ? sh_sum[lane] : 0.0f;
      acc = tb_warp_reduce_sum(acc);
      if (lane == 0) out[p] = ok ? acc / (s[j] * s[k]) : tb_nan();
    }
    __syncthreads();
  }
}

extern "C" __global__ void softmax_dots_f32(const float* logits, long long n_rows,
                                            long long n_cols, long long ld,
                                            const long long* pairs, long long n_pairs,
                                            const float* m, const float* s, float* out) {
  tb_softmax_dots<float>(logits, n_rows, n_cols, ld, pairs, n_pairs, m, s, out);
}

extern "C" __global__ void softmax_dots_bf16(const unsigned short* logits, long long n_rows,
                                             long long n_cols, long long ld,
                                             const long long* pairs, long long n_pairs,
                                             const float* m, const float* s, float* out) {
  tb_softmax_dots<unsigned short>(logits, n_rows, n_cols, ld, pairs, n_pairs, m, s, out);
}
