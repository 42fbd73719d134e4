// Kernels that exercise simt.h's own semantics (tests/scoring/test_kernels_simt.py compares each
// against the CUDA definition computed in numpy). out has one int per thread of the grid
// (index blockIdx.x * blockDim.x + threadIdx.x) unless said otherwise.
extern "C" __global__ void harness_selftest(int which, const int* in, int* out) {
  __shared__ int sh[1024];
  const int t = threadIdx.x, g = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = t % 32;
  const int v = in[g];
  switch (which) {
    case 0: out[g] = __shfl_xor_sync(0xffffffffu, v, 5); break;
    case 1: out[g] = __shfl_down_sync(0xffffffffu, v, 3); break;
    case 2: out[g] = __shfl_up_sync(0xffffffffu, v, 2); break;
    case 3: out[g] = __shfl_sync(0xffffffffu, v, 7); break;
    case 4: out[g] = __shfl_down_sync(0xffffffffu, v, 1, 8); break;  // width 8 segments
    case 5: out[g] = (int)__ballot_sync(0xffffffffu, v & 1); break;
    case 6: {  // shared memory is per block, __syncthreads orders writes before reads
      sh[t] = v;
      __syncthreads();
      out[g] = sh[blockDim.x - 1 - t];
      break;
    }
    case 7: {  // block sum with shuffles + shared memory; written by thread 0 to out[blockIdx.x]
      int x = v;
      for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
      if (lane == 0) sh[t / 32] = x;
      __syncthreads();
      if (t < 32) {
        x = t < (int)(blockDim.x / 32) ? sh[t] : 0;
        for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
        if (t == 0) out[blockIdx.x] = x;
      }
      break;
    }
    case 8: {  // kernel bug: thread 0 returns before the barrier -> the harness reports a deadlock
      if (t == 0) return;
      __syncthreads();
      out[g] = v;
      break;
    }
    case 9: {  // kernel bug: the even lanes shuffle with a mask that excludes the odd lanes, and
               // read from an odd lane
      if (lane % 2 == 0) out[g] = __shfl_sync(0x55555555u, v, lane + 1);
      break;
    }
    case 10: {  // float atomics across blocks: out[0] counts every thread
      atomicAdd((float*)out, 1.0f);
      break;
    }
    case 11: {  // kernel bug: a missing __syncthreads between the write and the read of shared memory
      sh[t] = v;
      out[g] = sh[(t + 1) % blockDim.x];
      break;
    }
    default: break;
  }
}

// Every thread of a 3-D grid of 3-D blocks writes its indices, at its global linear index.
extern "C" __global__ void harness_indices(int* out) {
  const unsigned bl = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned tl = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int* o = out + 6 * (bl * (blockDim.x * blockDim.y * blockDim.z) + tl);
  o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
  o[3] = blockIdx.x; o[4] = blockIdx.y; o[5] = blockIdx.z;
}
