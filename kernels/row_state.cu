// tokenbook: the fused per-row pass of the scoring reduction over one vocabulary chunk, and the
// merge of partial states (see lib/tokenbook/scoring/cuda.py and the contract in reduction.py).
//
// row_state_{f32,bf16}: one block per row (grid-stride over rows), blockDim.x a multiple of 32
// (at most 1024). Each thread runs the online update over columns threadIdx.x, +blockDim.x, ...;
// the block then merges its threads' states with warp shuffles and shared memory.
// Inputs: logits [n_rows, n_cols] with row stride ld (elements; the column stride must be 1),
// target[n_rows] (int64: the target's column in this chunk, or -1; may be NULL), bow[n_cols]
// (uint8 beginning-of-word mask; may be NULL = none). Outputs float32 [n_rows]: m, s, u, b, xt.
#include "common.cuh"

template <typename T>
__device__ __forceinline__ void tb_row_state(const T* __restrict__ logits, long long n_rows,
                                             long long n_cols, long long ld,
                                             const long long* __restrict__ target,
                                             const unsigned char* __restrict__ bow,
                                             float* __restrict__ m_out, float* __restrict__ s_out,
                                             float* __restrict__ u_out, float* __restrict__ b_out,
                                             float* __restrict__ xt_out) {
  __shared__ float sh_m[TB_MAX_WARPS], sh_s[TB_MAX_WARPS], sh_u[TB_MAX_WARPS], sh_b[TB_MAX_WARPS];
  const int lane = threadIdx.x % TB_WARP;
  const int warp = threadIdx.x / TB_WARP;
  const int n_warps = blockDim.x / TB_WARP;

  for (long long row = blockIdx.x; row < n_rows; row += gridDim.x) {
    const T* x = logits + row * ld;
    TbState st = tb_empty_state();
    for (long long j = threadIdx.x; j < n_cols; j += blockDim.x) {
      tb_push(st, tb_load(x, j), bow != 0 && bow[j] != 0);
    }
    st = tb_warp_reduce_state(st);
    if (lane == 0) {
      sh_m[warp] = st.m;
      sh_s[warp] = st.s;
      sh_u[warp] = st.u;
      sh_b[warp] = st.b;
    }
    __syncthreads();
    if (warp == 0) {
      if (lane < n_warps) {
        st.m = sh_m[lane];
        st.s = sh_s[lane];
        st.u = sh_u[lane];
        st.b = sh_b[lane];
      } else {
        st = tb_empty_state();
      }
      st = tb_warp_reduce_state(st);
      if (lane == 0) {
        m_out[row] = st.m;
        s_out[row] = st.s;
        u_out[row] = st.u;
        b_out[row] = st.b;
        const long long t = target != 0 ? target[row] : -1;
        xt_out[row] = (t >= 0 && t < n_cols) ? tb_load(x, t) : tb_neg_inf();
      }
    }
    __syncthreads();  // the shared slots are reused by the next row
  }
}

extern "C" __global__ void row_state_f32(const float* logits, long long n_rows, long long n_cols,
                                         long long ld, const long long* target,
                                         const unsigned char* bow, float* m, float* s, float* u,
                                         float* b, float* xt) {
  tb_row_state<float>(logits, n_rows, n_cols, ld, target, bow, m, s, u, b, xt);
}

extern "C" __global__ void row_state_bf16(const unsigned short* logits, long long n_rows,
                                          long long n_cols, long long ld, const long long* target,
                                          const unsigned char* bow, float* m, float* s, float* u,
                                          float* b, float* xt) {
  tb_row_state<unsigned short>(logits, n_rows, n_cols, ld, target, bow, m, s, u, b, xt);
}

// Elementwise merge of two partial states (one thread per row); xt is the finite one of the two
// (computed as max(a.xt, c.xt) with NaN propagating, like torch.maximum in the reference).
extern "C" __global__ void merge_states(long long n, const float* am, const float* as,
                                        const float* au, const float* ab, const float* axt,
                                        const float* cm, const float* cs, const float* cu,
                                        const float* cb, const float* cxt, float* m, float* s,
                                        float* u, float* b, float* xt) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    TbState a, c;
    a.m = am[i]; a.s = as[i]; a.u = au[i]; a.b = ab[i];
    c.m = cm[i]; c.s = cs[i]; c.u = cu[i]; c.b = cb[i];
    const TbState r = tb_merge(a, c);
    const float xa = axt[i], xc = cxt[i];
    m[i] = r.m;
    s[i] = r.s;
    u[i] = r.u;
    b[i] = r.b;
    xt[i] = (xa != xa || xa > xc) ? xa : xc;
  }
}
