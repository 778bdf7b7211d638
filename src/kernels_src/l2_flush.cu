/* l2_flush.cu - the timing harnesses' L2 flush (src/api/bench.c fj_l2_flush): reads a
 * buffer larger than the L2, so that before a timed call the L2 holds clean lines of the
 * buffer and nothing of the timed kernel's inputs. A flush that writes (cuMemsetD8) leaves
 * ~50 MB of dirty lines that the timed kernel then pays to write back (+7% on a 132 us
 * bandwidth-bound decode on the H200, +19% on a 42 us one). Any target; no macros. */
extern "C" __global__ void __launch_bounds__(256)
fj_l2_flush(const uint4 *__restrict__ buf, unsigned long long n16, unsigned *sink)
{
    unsigned x = 0;
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < n16; i += step) {
        const uint4 v = buf[i];
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x9e3779b9u && sink)   /* (almost never: keeps the loads) */
        *sink = x;
}
