// extern "C" entry points that run tokenbook's CUDA kernels (kernels/*.cu, the very same sources
// cupy.RawModule compiles) on the CPU through simt.h, for the tests (loaded with ctypes).
// Build: g++ -std=c++20 -O2 -pthread -fPIC -shared -include simt.h -I<kernels> -x c++ kernels_cpu.cpp
// Every function returns 0 on success and 1 on a kernel error (message: simt_last_error()).
#include "row_state.cu"
#include "softmax_dots.cu"
#include "harness_selftest.cu"

static thread_local std::string t_err;

extern "C" {

const char* simt_last_error() {
  t_err = simt::last_error();
  return t_err.c_str();
}

int tb_row_state(int bf16, const void* logits, long long n_rows, long long n_cols, long long ld,
                 const long long* target, const unsigned char* bow, float* m, float* s, float* u,
                 float* b, float* xt, int block, int grid) {
  const dim3 g(grid > 0 ? grid : (unsigned)n_rows), bl(block);
  const bool ok = bf16 ? simt::launch(row_state_bf16, g, bl, (const unsigned short*)logits, n_rows,
                                      n_cols, ld, target, bow, m, s, u, b, xt)
                       : simt::launch(row_state_f32, g, bl, (const float*)logits, n_rows, n_cols,
                                      ld, target, bow, m, s, u, b, xt);
  return ok ? 0 : 1;
}

int tb_merge_states(long long n, const float* am, const float* as, const float* au, const float* ab,
                    const float* axt, const float* cm, const float* cs, const float* cu,
                    const float* cb, const float* cxt, float* m, float* s, float* u, float* b,
                    float* xt, int block, int grid) {
  return simt::launch(merge_states, dim3(grid), dim3(block), n, am, as, au, ab, axt, cm, cs, cu,
                      cb, cxt, m, s, u, b, xt)
             ? 0
             : 1;
}

int tb_softmax_dots(int bf16, const void* logits, long long n_rows, long long n_cols, long long ld,
                    const long long* pairs, long long n_pairs, const float* m, const float* s,
                    float* out, int block, int grid) {
  const dim3 g(grid > 0 ? grid : (unsigned)n_pairs), bl(block);
  const bool ok = bf16 ? simt::launch(softmax_dots_bf16, g, bl, (const unsigned short*)logits,
                                      n_rows, n_cols, ld, pairs, n_pairs, m, s, out)
                       : simt::launch(softmax_dots_f32, g, bl, (const float*)logits, n_rows,
                                      n_cols, ld, pairs, n_pairs, m, s, out);
  return ok ? 0 : 1;
}

int simt_selftest(int which, const int* in, int* out, int block, int grid) {
  return simt::launch(harness_selftest, dim3(grid), dim3(block), which, in, out) ? 0 : 1;
}

int simt_indices(int gx, int gy, int gz, int bx, int by, int bz, int* out) {
  return simt::launch(harness_indices, dim3(gx, gy, gz), dim3(bx, by, bz), out) ? 0 : 1;
}

}  // extern "C"
