// cluster_bench.cu - lab (session 22): what a thread-block cluster costs a decode-like launch
// on this GPU. 128 CTAs (x = 16 "splits", y = 8 "heads"), each spinning ~`spin_ns` on the
// global timer (a loop's stand-in), then, in cluster mode, two cluster barriers (the
// merge's). Per (shared memory, threads, cluster size 0/8/16): the max active clusters
// (cudaOccupancyMaxActiveClusters) and us per launch in a graph of 100 programmatic
// dependent launches (the bench's graph replay). Build: nvcc -O2 -arch=sm_90a -o cb cluster_bench.cu
#include <cstdio>
#include <cuda_runtime.h>

__global__ void work(int cl, long long spin_ns, int *sink)
{
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n");
    extern __shared__ int sm[];
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while ((long long)(t - t0) < spin_ns);
    sm[threadIdx.x] = (int)t;
    if (cl) {
        asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
        asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    }
    if (sm[threadIdx.x] == 1234567)
        *sink = 1;
}

static cudaError_t launch(int cl, int smem, int threads, long long spin, int *sink, cudaStream_t s)
{
    cudaLaunchConfig_t c = {};
    cudaLaunchAttribute a[2];
    c.gridDim = dim3(16, 8, 1);
    c.blockDim = dim3(threads, 1, 1);
    c.dynamicSmemBytes = smem;
    c.stream = s;
    int n = 0;
    a[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a[n++].val.programmaticStreamSerializationAllowed = 1;
    if (cl) {
        a[n].id = cudaLaunchAttributeClusterDimension;
        a[n].val.clusterDim.x = cl, a[n].val.clusterDim.y = 1, a[n].val.clusterDim.z = 1;
        n++;
    }
    c.attrs = a, c.numAttrs = n;
    return cudaLaunchKernelEx(&c, work, cl, spin, sink);
}

int main()
{
    int *sink;
    cudaMalloc(&sink, 4);
    cudaFuncSetAttribute(work, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
    cudaFuncSetAttribute(work, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    const int smems[] = {135168, 102400, 73728, 16384};
    const int threads[] = {256, 128, 128, 128};
    const long long spins[] = {0, 2000};
    printf("smem threads spin_ns | cl0 us | cl8 us (active) | cl16 us (active)\n");
    for (int i = 0; i < 4; i++)
        for (int sp = 0; sp < 2; sp++) {
            printf("%6d %3d %5lld |", smems[i], threads[i], spins[sp]);
            for (int cl = 0; cl <= 16; cl += 8) {
                int active = -1;
                if (cl) {
                    cudaLaunchConfig_t c = {};
                    cudaLaunchAttribute a;
                    c.gridDim = dim3(16, 8, 1);
                    c.blockDim = dim3(threads[i], 1, 1);
                    c.dynamicSmemBytes = smems[i];
                    a.id = cudaLaunchAttributeClusterDimension;
                    a.val.clusterDim.x = cl, a.val.clusterDim.y = 1, a.val.clusterDim.z = 1;
                    c.attrs = &a, c.numAttrs = 1;
                    cudaOccupancyMaxActiveClusters(&active, work, &c);
                }
                cudaGraph_t g;
                cudaGraphExec_t ge;
                for (int w = 0; w < 3; w++)
                    launch(cl, smems[i], threads[i], spins[sp], sink, s);
                cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
                for (int k = 0; k < 100; k++)
                    launch(cl, smems[i], threads[i], spins[sp], sink, s);
                cudaError_t e = cudaStreamEndCapture(s, &g);
                if (e) { printf(" capture %s |", cudaGetErrorString(e)); continue; }
                cudaGraphInstantiate(&ge, g, 0);
                cudaGraphLaunch(ge, s);
                cudaStreamSynchronize(s);
                cudaEvent_t e0, e1;
                cudaEventCreate(&e0), cudaEventCreate(&e1);
                float best = 1e9;
                for (int r = 0; r < 5; r++) {
                    cudaEventRecord(e0, s);
                    cudaGraphLaunch(ge, s);
                    cudaEventRecord(e1, s);
                    cudaEventSynchronize(e1);
                    float ms;
                    cudaEventElapsedTime(&ms, e0, e1);
                    best = ms < best ? ms : best;
                }
                e = cudaGetLastError();
                printf(" %6.2f (%d)%s |", best * 10.f, active, e ? cudaGetErrorString(e) : "");
                cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
            }
            printf("\n");
        }
    return 0;
}
