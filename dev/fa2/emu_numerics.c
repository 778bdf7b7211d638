/* dev/fa2/emu_numerics.c - cc -O2 -o /tmp/emu emu_numerics.c -lm && /tmp/emu HDIM SEQ TRIALS SLACK
 * (no GPU). */
/* Emulates the FA2 kernel's numerics (64-key blocks last-to-first, conditional rescale with
 * slack 8 in log2 units, bf16 P relative to the running max, fp32 row sum of unrounded P,
 * fp32 O, bf16 output) against float64 and the gpu suite's same-precision reference. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static uint64_t g;
static uint32_t rnd(void) { g = g * 6364136223846793005ull + 1442695040888963407ull; return (uint32_t)(g >> 33); }
static float frand(void) { return (float)(rnd() % 2000001) / 1000000.f - 1.f; }
static float bf(float x) { uint32_t u; memcpy(&u, &x, 4); u += 0x7fff + ((u >> 16) & 1); u &= 0xffff0000u; memcpy(&x, &u, 4); return x; }
int main(int argc, char **argv)
{
    int d = argc > 1 ? atoi(argv[1]) : 216, n = argc > 2 ? atoi(argv[2]) : 129, trials = argc > 3 ? atoi(argv[3]) : 200;
    float slack = argc > 4 ? atof(argv[4]) : 8.f;
    int BN = 64, fails = 0;
    double worst_ratio = 0;
    float *q = malloc(sizeof(float) * n * d), *k = malloc(sizeof(float) * n * d), *v = malloc(sizeof(float) * n * d);
    double *s = malloc(sizeof(double) * n);
    for (int t = 0; t < trials; t++) {
        g = 1000 + t;
        for (int i = 0; i < n * d; i++) q[i] = bf(frand() * 2), k[i] = bf(frand() * 2), v[i] = bf(frand());
        double scale = 1.0 / sqrt(d), e_sp = 0, e_k = 0;
        float sl2 = (float)(scale * 1.4426950408889634);
        for (int i = 0; i < n; i++) {
            float sf[4096];
            double m = -INFINITY;
            for (int j = 0; j < n; j++) {
                float dot = 0;
                for (int x = 0; x < d; x++) dot += q[i * d + x] * k[j * d + x];
                sf[j] = dot; s[j] = (double)dot * scale; if (s[j] > m) m = s[j];
            }
            /* float64 and same-precision references */
            double l = 0, lsp = 0, o64[256] = {0}, osp[256] = {0};
            for (int j = 0; j < n; j++) {
                double p = exp(s[j] - m); l += p;
                float pj = (float)exp(s[j] - m); lsp += pj; double pr = bf(pj);
                for (int x = 0; x < d; x++) o64[x] += p * v[j * d + x], osp[x] += pr * v[j * d + x];
            }
            /* kernel emulation */
            float rm = -INFINITY, rs = 0, ok[256] = {0};
            int nb = (n + BN - 1) / BN;
            for (int b = nb - 1; b >= 0; b--) {
                float mx = -INFINITY;
                for (int j = b * BN; j < n && j < (b + 1) * BN; j++) mx = fmaxf(mx, sf[j]);
                float mnew = fmaxf(rm, mx);
                if ((mnew - rm) * sl2 > slack) {
                    float alpha = exp2f(rm * sl2 - mnew * sl2);
                    if (rm == -INFINITY) alpha = 0;
                    rs *= alpha; for (int x = 0; x < d; x++) ok[x] *= alpha;
                    rm = mnew;
                }
                for (int j = b * BN; j < n && j < (b + 1) * BN; j++) {
                    float p = exp2f(fmaf(sf[j], sl2, -rm * sl2));
                    rs += p; float pr = bf(p);
                    for (int x = 0; x < d; x++) ok[x] += pr * v[j * d + x];
                }
            }
            for (int x = 0; x < d; x++) {
                double ref = o64[x] / l;
                double a = fabs(bf((float)(osp[x] / lsp)) - ref), b2 = fabs(bf(ok[x] * (1.f / rs)) - ref);
                if (a > e_sp) e_sp = a;
                if (b2 > e_k) e_k = b2;
            }
        }
        double r = e_k / e_sp;
        if (r > worst_ratio) worst_ratio = r;
        if (e_k > 2 * e_sp + 1e-6) { fails++; printf("trial %d: kernel %.5f sp %.5f ratio %.2f\n", t, e_k, e_sp, r); }
    }
    printf("d %d n %d slack %.1f: %d/%d trials over 2x same-precision, worst ratio %.2f\n", d, n, slack, fails, trials, worst_ratio);
    return 0;
}
