/* fajit-tune - fajit's command line: system information, offline warm-up of the kernel
 * cache for any GPU target (no GPU needed), and cache maintenance. Uses only fajit.h.
 *
 *   fajit-tune info
 *   fajit-tune warm --arch sm_80,sm_90a,sm_100a [-j N]
 *   fajit-tune plan [--arch sm_90a] [--hdim 128] [--dtype bf16] [--mask causal]
 *   fajit-tune cache ls|stats|verify|clear
 * Global options: --cache-dir DIR, -v (debug log), -q (no progress).
 */
#include <fajit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_verbose, g_quiet, g_tty;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fajit-tune [--cache-dir DIR] [-v] [-q] COMMAND\n"
            "commands:\n"
            "  info                      versions, devices, cache location and size\n"
            "  warm --arch LIST [-j N]   compile every kernel for targets in LIST\n"
            "                            (comma-separated, e.g. sm_80,sm_90a,sm_100a); no GPU\n"
            "                            needed; N compile threads (default: one per CPU)\n"
            "  plan [--arch A] [--hdim D] [--dtype f16|bf16] [--mask none|causal|window]\n"
            "                            which kernel serves that problem (default: device 0,\n"
            "                            hdim 128, bf16, causal)\n"
            "  cache ls                  one line per cached kernel\n"
            "  cache stats               entry count and sizes\n"
            "  cache verify              re-check every entry's checksum, drop bad ones\n"
            "  cache clear               remove every entry\n");
}

static void on_log(void *user, fajit_log_level level, const char *msg)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    (void)user;
    fprintf(stderr, "%sfajit %s: %s\n", g_tty ? "\r\033[K" : "", names[level], msg);
}

static void on_progress(void *user, int done, int total, double eta, const char *what)
{
    (void)user;
    if (g_quiet)
        return;
    if (g_tty) {
        int width = 30, filled = total ? done * width / total : width;
        fprintf(stderr, "\r\033[K[%.*s%*s] %d/%d ETA %3.0fs  %s", filled,
                "##############################", width - filled, "", done, total,
                eta < 0 ? 0 : eta, what);
        if (done == total)
            fputc('\n', stderr);
    } else {
        fprintf(stderr, "[%d/%d] %s (ETA %.0fs)\n", done, total, what, eta < 0 ? 0 : eta);
    }
    fflush(stderr);
}

static int fail(fajit_ctx *ctx, fajit_status st, const char *what)
{
    fprintf(stderr, "fajit-tune: %s failed: %s\n  %s\n", what, fajit_strerror(st),
            ctx ? fajit_errmsg(ctx) : "");
    return 1;
}

static int cmd_info(fajit_ctx *ctx)
{
    fajit_sysinfo si;
    fajit_status st = fajit_sysinfo_get(ctx, &si);
    if (st)
        return fail(ctx, st, "info");
    printf("fajit        %s\n", fajit_version_string());
    if (si.driver_loaded)
        printf("driver       CUDA %d.%d\n", si.driver_version / 1000,
               si.driver_version % 1000 / 10);
    else
        printf("driver       not found (no libcuda.so.1): compile-only machine\n");
    if (si.nvrtc_loaded)
        printf("nvrtc        %d.%d\n", si.nvrtc_major, si.nvrtc_minor);
    else
        printf("nvrtc        not found (set FAJIT_NVRTC_PATH): can only serve cached kernels\n");
    printf("devices      %d\n", si.device_count);
    for (int i = 0; i < si.device_count; i++) {
        fajit_device_info di;
        if (fajit_device_info_get(ctx, i, &di) == FAJIT_OK)
            printf("  [%d] %s  cc %d.%d  target %s  %d SMs  %.1f GiB\n", i, di.name,
                   di.cc_major, di.cc_minor, di.arch, di.sm_count,
                   di.total_mem / (1024.0 * 1024 * 1024));
    }
    int64_t entries = 0, bytes = 0, file_bytes = 0;
    fajit_cache_stats(ctx, &entries, &bytes, &file_bytes);
    printf("cache        %s%s\n", si.cache_path ? si.cache_path : "memory only",
           si.cache_readonly ? " (read-only)" : "");
    printf("  entries    %lld, %.1f MiB of kernels, file %.1f MiB\n", (long long)entries,
           bytes / 1048576.0, file_bytes / 1048576.0);
    return 0;
}

static int cmd_warm(fajit_ctx *ctx, const char *archs, int jobs)
{
    if (!archs) {
        fprintf(stderr, "fajit-tune: warm needs --arch LIST (e.g. sm_80,sm_90a,sm_100a)\n");
        return 2;
    }
    char *list = strdup(archs), *save = NULL;
    int rc = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (char *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        int compiled = 0, cached = 0;
        fajit_status st = fajit_warm(ctx, a, jobs, &compiled, &cached);
        if (st) {
            rc = fail(ctx, st, "warm");
            break;
        }
        printf("%-8s %d compiled, %d already cached\n", a, compiled, cached);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    printf("warm: %.1f s wall, %llu compiles, %.1f s compiling\n",
           (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
           (unsigned long long)c.compiles, c.compile_seconds);
    free(list);
    return rc;
}

static int cmd_plan(fajit_ctx *ctx, const char *arch, int hdim, const char *dtype,
                    const char *mask)
{
    static const char *const masks[] = {"none", "causal", "window"};
    fajit_device_info di;
    if (!arch) {
        if (fajit_device_info_get(ctx, 0, &di) != FAJIT_OK) {
            fprintf(stderr, "fajit-tune: no GPU here (%s); name a target with --arch\n",
                    fajit_errmsg(ctx));
            return 2;
        }
        arch = di.arch;
    }
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;   /* never dereferenced: nothing runs */
    fajit_attn_desc_init(&d, p, p, p, p, 1, 16, 16, 4096, 4096, hdim,
                         strcmp(dtype, "f16") == 0 ? FAJIT_F16 : FAJIT_BF16);
    if (strcmp(dtype, "f16") != 0 && strcmp(dtype, "bf16") != 0) {
        fprintf(stderr, "fajit-tune: --dtype must be f16 or bf16, got '%s'\n", dtype);
        return 2;
    }
    d.mask = (fajit_mask)-1;
    for (int i = 0; i < 3; i++)
        if (strcmp(mask, masks[i]) == 0)
            d.mask = (fajit_mask)i;
    d.window_left = d.window_right = d.mask == FAJIT_MASK_WINDOW ? 256 : -1;
    char line[512];
    fajit_status st = fajit_dispatch_describe(ctx, arch, &d, line, sizeof line);
    if (st)
        return fail(ctx, st, "plan");
    printf("%s hdim %d %s %s -> %s\n", arch, hdim, dtype, mask, line);
    return 0;
}

static int print_entry(void *user, const fajit_cache_entry *e)
{
    (void)user;
    char when[32];
    time_t t = (time_t)e->last_used;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&t));
    printf("%s  %-8s %7zu B  %4d regs  %5.0f ms  %3lld hits  %s  %s\n", e->key_hex, e->arch,
           e->cubin_bytes, e->regs, e->compile_ms, (long long)e->hits, when, e->name);
    return 0;
}

static int cmd_cache(fajit_ctx *ctx, const char *sub)
{
    fajit_status st;
    if (!sub) {
        usage(stderr);
        return 2;
    }
    if (strcmp(sub, "ls") == 0) {
        st = fajit_cache_list(ctx, print_entry, NULL);
    } else if (strcmp(sub, "stats") == 0) {
        int64_t entries, bytes, file_bytes;
        st = fajit_cache_stats(ctx, &entries, &bytes, &file_bytes);
        if (!st)
            printf("entries %lld\nkernel_bytes %lld\nfile_bytes %lld\n", (long long)entries,
                   (long long)bytes, (long long)file_bytes);
    } else if (strcmp(sub, "verify") == 0) {
        int checked = 0, bad = 0;
        st = fajit_cache_verify(ctx, &checked, &bad);
        if (!st)
            printf("%d entries checked, %d bad (removed)\n", checked, bad);
        if (!st && bad)
            return 1;
    } else if (strcmp(sub, "clear") == 0) {
        st = fajit_cache_clear(ctx);
        if (!st)
            printf("cache cleared\n");
    } else {
        fprintf(stderr, "fajit-tune: unknown cache command '%s'\n", sub);
        usage(stderr);
        return 2;
    }
    return st ? fail(ctx, st, sub) : 0;
}

int main(int argc, char **argv)
{
    const char *cache_dir = NULL, *archs = NULL, *dtype = "bf16", *mask = "causal";
    int jobs = 0, hdim = 128, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--cache-dir") == 0 && i + 1 < argc)
            cache_dir = argv[++i];
        else if (strcmp(argv[i], "-v") == 0)
            g_verbose = 1;
        else if (strcmp(argv[i], "-q") == 0)
            g_quiet = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "fajit-tune: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[i++];
    for (int j = i; j < argc; j++) {
        if (strcmp(argv[j], "--arch") == 0 && j + 1 < argc)
            archs = argv[++j];
        else if (strcmp(argv[j], "-j") == 0 && j + 1 < argc)
            jobs = atoi(argv[++j]);
        else if (strcmp(argv[j], "--hdim") == 0 && j + 1 < argc)
            hdim = atoi(argv[++j]);
        else if (strcmp(argv[j], "--dtype") == 0 && j + 1 < argc)
            dtype = argv[++j];
        else if (strcmp(argv[j], "--mask") == 0 && j + 1 < argc)
            mask = argv[++j];
    }
    g_tty = isatty(2);

    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;  /* the tool itself launches nothing */
    o.cache_dir = cache_dir;
    o.log = on_log;
    o.log_level = g_verbose ? FAJIT_LOG_DEBUG : FAJIT_LOG_WARN;
    o.progress = on_progress;
    fajit_ctx *ctx = NULL;
    fajit_status st = fajit_ctx_create(&ctx, &o);
    if (st) {
        int rc = fail(ctx, st, "creating a context");
        fajit_ctx_destroy(ctx);
        return rc;
    }
    int rc;
    if (strcmp(cmd, "info") == 0)
        rc = cmd_info(ctx);
    else if (strcmp(cmd, "warm") == 0)
        rc = cmd_warm(ctx, archs, jobs);
    else if (strcmp(cmd, "plan") == 0)
        rc = cmd_plan(ctx, archs, hdim, dtype, mask);
    else if (strcmp(cmd, "cache") == 0)
        rc = cmd_cache(ctx, i < argc ? argv[i] : NULL);
    else {
        fprintf(stderr, "fajit-tune: unknown command '%s'\n", cmd);
        usage(stderr);
        rc = 2;
    }
    fajit_ctx_destroy(ctx);
    return rc;
}
