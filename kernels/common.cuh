// tokenbook kernels: device helpers shared by row_state.cu and softmax_dots.cu.
//
// Plain CUDA C that NVRTC, nvcc and the CPU SIMT harness (tests/scoring/simt/simt.h) all accept:
// no <cuda_bf16.h> (the NVRTC wheels do not ship it), no INFINITY (NVRTC rejects it), no std::.
//
// bf16 input is read as its raw 16-bit pattern, the storage layout of __nv_bfloat16; widening a
// bfloat16 to float is exact (the bits shifted left by 16), so this equals __bfloat162float.
#pragma once

#define TB_WARP 32
#define TB_FULL_MASK 0xffffffffu
#define TB_MAX_WARPS 32

__device__ __forceinline__ float tb_neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float tb_nan() { return __int_as_float(0x7fc00000); }

__device__ __forceinline__ float tb_load(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float tb_load(const unsigned short* p, long long i) {
  return __uint_as_float(((unsigned int)p[i]) << 16);
}

// The scoring contract's running state of one row, relative to the running max m:
//   s = sum exp(l - m), u = sum exp(l - m) * (l - m), b = the same as s over beginning-of-word ids.
// The empty state is {-inf, 0, 0, 0}; -inf logits contribute exactly 0.
struct TbState {
  float m, s, u, b;
};

__device__ __forceinline__ TbState tb_empty_state() {
  TbState st;
  st.m = tb_neg_inf();
  st.s = 0.0f;
  st.u = 0.0f;
  st.b = 0.0f;
  return st;
}

// Online update with one logit l (bow: whether its vocabulary id begins a word).
// A NaN logit makes the whole state NaN (sticky), as torch's amax/sum do in the reference.
__device__ __forceinline__ void tb_push(TbState& st, float l, bool bow) {
  if (l == tb_neg_inf()) return;  // exp(-inf) = 0: no contribution (and no -inf - -inf = NaN)
  if (l != l) {
    st.m = st.s = st.u = st.b = l;
    return;
  }
  if (l > st.m) {                 // new max: rescale what was seen so far
    if (st.m == tb_neg_inf()) {   // first finite logit of this row
      st.s = 1.0f;
      st.u = 0.0f;
      st.b = bow ? 1.0f : 0.0f;
    } else {
      const float d = st.m - l;  // < 0
      const float f = expf(d);
      st.u = f * (st.u + st.s * d);
      st.s = st.s * f + 1.0f;
      st.b = st.b * f + (bow ? 1.0f : 0.0f);
    }
    st.m = l;
  } else {  // l <= m (or m is NaN: then t is NaN and the state stays NaN)
    const float t = l - st.m;
    const float e = expf(t);
    st.s += e;
    st.u += e * t;
    if (bow) st.b += e;
  }
}

// The contract's merge: with M = max(a.m, c.m),
//   s = a.s e^(a.m-M) + c.s e^(c.m-M),  u = e^(a.m-M)(a.u + a.s (a.m-M)) + e^(c.m-M)(c.u + c.s (c.m-M)).
// Symmetric in its arguments (bitwise where the compiler does not contract a*b + c into an FMA;
// only lane 0's result is used after a reduction, so lanes differing by rounding would not matter).
// A NaN state wins (NaN propagates as in the torch reference).
__device__ __forceinline__ TbState tb_merge(const TbState& a, const TbState& c) {
  if (a.m != a.m) return a;
  if (c.m != c.m) return c;
  if (a.m == tb_neg_inf()) return c;
  if (c.m == tb_neg_inf()) return a;
  const float M = fmaxf(a.m, c.m);
  const float da = a.m - M, dc = c.m - M;
  const float ea = expf(da), ec = expf(dc);
  TbState r;
  r.m = M;
  r.s = a.s * ea + c.s * ec;
  r.u = ea * (a.u + a.s * da) + ec * (c.u + c.s * dc);
  r.b = a.b * ea + c.b * ec;
  return r;
}

__device__ __forceinline__ TbState tb_warp_reduce_state(TbState st) {
#pragma unroll
  for (int off = TB_WARP / 2; off > 0; off >>= 1) {
    TbState o;
    o.m = __shfl_xor_sync(TB_FULL_MASK, st.m, off);
    o.s = __shfl_xor_sync(TB_FULL_MASK, st.s, off);
    o.u = __shfl_xor_sync(TB_FULL_MASK, st.u, off);
    o.b = __shfl_xor_sync(TB_FULL_MASK, st.b, off);
    st = tb_merge(st, o);
  }
  return st;
}

__device__ __forceinline__ float tb_warp_reduce_sum(float v) {
#pragma unroll
  for (int off = TB_WARP / 2; off > 0; off >>= 1) v += __shfl_down_sync(TB_FULL_MASK, v, off);
  return v;  // the full sum is in lane 0
}
