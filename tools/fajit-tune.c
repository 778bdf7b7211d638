/* fajit-tune - fajit's command line: system information, offline warm-up of the kernel
 * cache for any GPU target (no GPU needed), and cache maintenance. Uses only fajit.h.
 *
 *   fajit-tune info
 *   fajit-tune warm --arch sm_80,sm_90a,sm_100a [--spec SPEC] [-j N]
 *   fajit-tune tune --spec SPEC [--reps N] [--pin] [--force]
 *   fajit-tune bench [--spec SPEC] [--json FILE] [--reps N]
 *   fajit-tune validate [--family NAME] [--features LIST] [--kv-dtype T]
 *   fajit-tune plan [--arch sm_90a] [--op fwd] [--hdim 128] [--dtype bf16] [--mask causal]
 *                   [--seqlen 4096]
 *   fajit-tune cache ls|stats|verify [--recompile [--allow-skipped]]|clear | prune --max-mb N
 *   fajit-tune cache export FILE [--arch A] [--force] | import FILE... | merge OUT IN... [--force]
 *   fajit-tune cache explain [--arch A] [--op O] [--hdim D] [--dtype T] [--mask M] [--seqlen S]
 *   fajit-tune help [COMMAND] | --help | --version;  fajit-tune COMMAND --help
 * Global options, before the command: --cache-dir DIR, -v (debug log), -q (no progress).
 * Each command has its own getopt_long table (k_cmds): --opt VALUE and --opt=VALUE both
 * work, and an option of another command, an unknown one or a stray word is refused (exit 2)
 * with that command's usage.
 * SPEC is a spec file (docs/spec-format.md) or a preset: llama-3-8b, llama-3-70b,
 * qwen2.5-7b, mistral-7b, llama-3-8b-paged, llama-3.2-1b-paged.
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <fajit.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static int g_verbose, g_quiet, g_tty;
static const char *g_cache_dir;   /* --cache-dir, for the second context of warm/info/plan */

/* Option ids: a long option's getopt value (short options use their letter). */
enum {
    O_ARCH = 256, O_SPEC, O_DTYPE, O_MASK, O_OP, O_JSON, O_FAMILY, O_PIN, O_FORCE, O_RECOMPILE,
    O_ALLOW_SKIPPED,
    O_MAX_MB, O_SEQLEN_Q, O_SEQLEN_K, O_BATCH, O_HEADS_Q, O_HEADS_KV, O_PAGE_SIZE, O_HDIM,
    O_SEQLEN, O_REPS, O_CACHE_DIR, O_VERSION, O_FEATURES, O_KV_DTYPE, O_HDIM_V, O_JOBS = 'j',
    O_HELP = 'h',
};
#define OPT(name, arg, id) {name, arg, NULL, id}
#define HELP_OPT OPT("help", no_argument, O_HELP)
#define SHAPE_OPTS                                                                            \
    OPT("arch", required_argument, O_ARCH), OPT("op", required_argument, O_OP),                \
    OPT("hdim", required_argument, O_HDIM), OPT("dtype", required_argument, O_DTYPE),          \
    OPT("mask", required_argument, O_MASK), OPT("seqlen", required_argument, O_SEQLEN),        \
    OPT("seqlen-q", required_argument, O_SEQLEN_Q),                                            \
    OPT("seqlen-k", required_argument, O_SEQLEN_K), OPT("batch", required_argument, O_BATCH),  \
    OPT("heads-q", required_argument, O_HEADS_Q), OPT("heads-kv", required_argument, O_HEADS_KV), \
    OPT("page-size", required_argument, O_PAGE_SIZE),                                      \
    OPT("features", required_argument, O_FEATURES),                                        \
    OPT("kv-dtype", required_argument, O_KV_DTYPE), OPT("hdim-v", required_argument, O_HDIM_V)

static const struct option o_none[] = {HELP_OPT, {0}};
static const struct option o_warm[] = {OPT("arch", required_argument, O_ARCH),
                                       OPT("spec", required_argument, O_SPEC), HELP_OPT, {0}};
static const struct option o_tune[] = {OPT("spec", required_argument, O_SPEC),
                                       OPT("reps", required_argument, O_REPS),
                                       OPT("pin", no_argument, O_PIN),
                                       OPT("force", no_argument, O_FORCE), HELP_OPT, {0}};
static const struct option o_bench[] = {OPT("spec", required_argument, O_SPEC),
                                        OPT("json", required_argument, O_JSON),
                                        OPT("reps", required_argument, O_REPS), HELP_OPT, {0}};
static const struct option o_validate[] = {OPT("family", required_argument, O_FAMILY),
                                           OPT("features", required_argument, O_FEATURES),
                                           OPT("kv-dtype", required_argument, O_KV_DTYPE),
                                           HELP_OPT, {0}};
static const struct option o_shape[] = {SHAPE_OPTS, HELP_OPT, {0}};
static const struct option o_verify[] = {OPT("recompile", no_argument, O_RECOMPILE),
                                         OPT("allow-skipped", no_argument, O_ALLOW_SKIPPED), HELP_OPT,
                                         {0}};
static const struct option o_prune[] = {OPT("max-mb", required_argument, O_MAX_MB), HELP_OPT,
                                        {0}};
static const struct option o_export[] = {OPT("arch", required_argument, O_ARCH),
                                         OPT("force", no_argument, O_FORCE), HELP_OPT, {0}};
static const struct option o_merge[] = {OPT("force", no_argument, O_FORCE), HELP_OPT, {0}};

/* One command ("cache ls" for cache's): its lines of the usage, its options (getopt_long's
 * table and short letters), how many words may follow it and what it needs when too few. */
typedef struct subcmd {
    const char *name, *text;
    const struct option *opts;
    const char *shorts;
    int min_pos, max_pos;
    const char *needs;
} subcmd;

static const subcmd k_cmds[] = {
    {"info", "  info                      versions, devices, cache location and size\n",
     o_none, ":h", 0, 0, NULL},
    {"warm",
     "  warm --arch LIST [--spec SPEC] [-j N]\n"
     "                            compile every kernel (or every kernel SPEC needs) for\n"
     "                            the targets in LIST (e.g. sm_80,sm_90a,sm_100a); no\n"
     "                            GPU needed; N compile threads (default: one per CPU)\n",
     o_warm, ":hj:", 0, 0, NULL},
    {"tune",
     "  tune --spec SPEC [--reps N] [--pin] [--force]\n"
     "                            time every candidate configuration of SPEC's shapes on\n"
     "                            GPU 0 and store the winners (kept rows are reused\n"
     "                            unless --force; --pin protects the new winners)\n",
     o_tune, ":h", 0, 0, NULL},
    {"bench",
     "  bench [--spec SPEC] [--json FILE] [--reps N]\n"
     "                            time fajit's kernels on GPU 0 on SPEC's shapes (default:\n"
     "                            prefill hdim 64/128/256 1k-16k, decode 32/8 heads): TFLOP/s,\n"
     "                            TB/s of K+V for decode; FILE gets every sample as JSON\n",
     o_bench, ":h", 0, 0, NULL},
    {"validate",
     "  validate [--family NAME] [--features softcap,sinks,alibi,head_dim_v]\n"
     "           [--kv-dtype e4m3|e5m2]\n"
     "                            check each kernel family (or NAME: fa2, fa3, decode,\n"
     "                            fa4, mixed) against the reference kernel on GPU 0 and\n"
     "                            store the verdicts; a family that fails is quarantined\n"
     "                            on this GPU class (exit 1); with --features, for\n"
     "                            problems with those model features (a verdict per\n"
     "                            feature set). warm and tune validate (no features) too\n"
     "                            where there is a GPU (FAJIT_VALIDATE=off: not)\n",
     o_validate, ":h", 0, 0, NULL},
    {"plan",
     "  plan [--arch A] [--op fwd] [--hdim D] [--dtype f16|bf16] [--mask none|causal|window]\n"
     "       [--seqlen S | --seqlen-q Q --seqlen-k K] [--batch B] [--heads-q H]\n"
     "       [--heads-kv H] [--page-size P] [--features softcap,sinks,alibi]\n"
     "       [--kv-dtype e4m3|e5m2] [--hdim-v DV]\n"
     "                            which kernel serves that problem (default: device 0,\n"
     "                            hdim 128, bf16, causal, 4096 tokens; model features\n"
     "                            off, K/V as Q, V of hdim columns)\n",
     o_shape, ":h", 0, 0, NULL},
    {"cache ls", "  cache ls                  one line per cached kernel\n", o_none, ":h", 0, 0,
     NULL},
    {"cache stats", "  cache stats               entry count and sizes\n", o_none, ":h", 0, 0,
     NULL},
    {"cache verify",
     "  cache verify [--recompile [--allow-skipped]]\n"
     "                            re-check every entry's checksum and every verdict row\n"
     "                            (family, arch, features, status, date), drop bad ones;\n"
     "                            --recompile: also recompile the kernels the local\n"
     "                            NVRTC made and compare the bytes (slow); a kernel it\n"
     "                            cannot compare is an error unless --allow-skipped\n",
     o_verify, ":h", 0, 0, NULL},
    {"cache clear", "  cache clear               remove every entry\n", o_none, ":h", 0, 0, NULL},
    {"cache prune",
     "  cache prune --max-mb N    remove the least recently loaded kernels until the\n"
     "                            rest take at most N MiB (tuning rows stay)\n",
     o_prune, ":h", 0, 0, NULL},
    {"cache export",
     "  cache export FILE [--arch A] [--force]\n"
     "                            one bundle file with kernels, tuning rows and verdicts;\n"
     "                            an existing FILE is replaced only when it is a bundle\n"
     "                            (or empty; any regular file with --force)\n",
     o_export, ":h", 1, 1, "FILE"},
    {"cache import",
     "  cache import FILE...      add bundles into the cache (counts of kernels, tuning\n"
     "                            rows and verdicts: imported, replaced, kept, refused)\n",
     o_none, ":h", 1, 64, "at least one FILE"},
    {"cache merge",
     "  cache merge OUT IN... [--force]\n"
     "                            merge bundles IN into a new bundle OUT (OUT replaced\n"
     "                            as by export); works in a directory under $TMPDIR\n",
     o_merge, ":h", 2, 64, "OUT and at least one IN bundle"},
    {"cache explain",
     "  cache explain [--arch A] [--op O] [--hdim D] [--dtype T] [--mask M] [--seqlen S]\n"
     "        [--seqlen-q Q --seqlen-k K] [--batch B] [--heads-q H] [--heads-kv H]\n"
     "        [--page-size P] [--features softcap,sinks,alibi] [--kv-dtype e4m3|e5m2]\n"
     "        [--hdim-v DV]\n"
     "                            the key of the kernel that problem needs; for a miss,\n"
     "                            the nearest entry and what differs\n",
     o_shape, ":h", 0, 0, NULL},
};
#define N_CMDS (sizeof k_cmds / sizeof k_cmds[0])

static const char k_usage_head[] =
    "usage: fajit-tune [--cache-dir DIR] [-v] [-q] COMMAND [OPTIONS]\n"
    "       fajit-tune --help | --version | help [COMMAND]\n";
static const char k_usage_opts[] =
    "Options take their value as --opt VALUE or --opt=VALUE; COMMAND --help prints its usage.\n";
static const char k_usage_spec[] =
    "SPEC: a spec file (docs/spec-format.md) or a preset: llama-3-8b, llama-3-70b,\n"
    "qwen2.5-7b, mistral-7b, llama-3-8b-paged, llama-3.2-1b-paged\n";

/* The usage of the commands whose name starts with `prefix` ("": all of them). */
static void usage_of(FILE *f, const char *prefix)
{
    int spec = 0;
    fputs(k_usage_head, f);
    fputs(*prefix ? "" : "commands:\n", f);
    for (size_t k = 0; k < N_CMDS; k++)
        if (strncmp(k_cmds[k].name, prefix, strlen(prefix)) == 0) {
            fputs(k_cmds[k].text, f);
            spec |= strstr(k_cmds[k].text, "SPEC") != NULL;
        }
    fputs(k_usage_opts, f);
    fputs(spec ? k_usage_spec : "", f);
}

static void usage(FILE *f)
{
    usage_of(f, "");
}

/* The command named by `word` and, for cache, `sub` (NULL: none there); NULL if none. */
static const subcmd *find_cmd(const char *word, const char *sub)
{
    char name[64];
    if (strcmp(word, "cache") == 0)
        snprintf(name, sizeof name, "cache %s", sub ? sub : "");
    else
        snprintf(name, sizeof name, "%s", word);
    for (size_t k = 0; k < N_CMDS; k++)
        if (strcmp(k_cmds[k].name, name) == 0)
            return &k_cmds[k];
    return NULL;
}

/* `s` with control characters (and DEL) written as \xNN, into buf: text that may come
 * from a bundle (kernel names, targets, verdict cases and errors) must not reach the
 * terminal as escape sequences. Returns buf, cut to fit. */
static const char *esc_text(char *buf, size_t n, const char *s, int keep_newlines)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && o + 5 < n; p++) {
        if ((*p < 0x20 && !(keep_newlines && *p == '\n')) || *p == 0x7f)
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", *p);
        else
            buf[o++] = (char)*p;
    }
    buf[n ? o : 0] = '\0';
    return buf;
}
static const char *esc(char *buf, size_t n, const char *s)
{
    return esc_text(buf, n, s, 0);
}
#define ESC_LEN(field) (4 * sizeof(field) + 1)

static void on_log(void *user, fajit_log_level level, const char *msg)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    char e[4096];
    (void)user;
    fprintf(stderr, "%sfajit %s: %s\n", g_tty ? "\r\033[K" : "", names[level],
            esc(e, sizeof e, msg));
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
    char e[4096];
    fprintf(stderr, "fajit-tune: %s failed: %s\n  %s\n", what, fajit_strerror(st),
            esc_text(e, sizeof e, ctx ? fajit_errmsg(ctx) : "", 1));
    return 1;
}

/*------ the validation gate ------*/

typedef struct verdicts {
    fajit_verdict_info v[256];
    int n;
} verdicts;

static int keep_verdict(void *user, const fajit_verdict_info *v)
{
    verdicts *vs = user;
    if (vs->n < (int)(sizeof vs->v / sizeof vs->v[0]))
        vs->v[vs->n++] = *v;
    return 0;
}

/* One verdict: family, status, date; its model-feature set where it has one ("for
 * softcap,sinks": a verdict of one set says nothing of another). */
static void print_verdict(const char *indent, const fajit_verdict_info *v)
{
    char when[32] = "", fam[ESC_LEN(v->family_name)], fc[ESC_LEN(v->failed_case)];
    char err[ESC_LEN(v->error)], set[ESC_LEN(v->features_name) + 8] = "";
    time_t t = (time_t)v->created;
    if (v->created)
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&t));
    esc(fam, sizeof fam, v->family_name);
    if (v->features_name[0]) {
        char e[ESC_LEN(v->features_name)];
        snprintf(set, sizeof set, " for %s", esc(e, sizeof e, v->features_name));
    }
    if (v->verdict == FAJIT_VERDICT_FAIL)
        printf("%s%-8s FAIL  %s  at %s: %s -> QUARANTINED on this GPU class%s\n", indent, fam,
               when, esc(fc, sizeof fc, v->failed_case), esc(err, sizeof err, v->error), set);
    else
        printf("%s%-8s %s  %s%s%s\n", indent, fam,
               v->verdict == FAJIT_VERDICT_PASS ? "PASS" : "none", when, set[0] ? " " : "", set);
}

/* info: the verdicts of this machine's GPU classes (name, target, SMs, driver, fajit). */
static void print_verdicts(fajit_ctx *ctx, const fajit_sysinfo *si)
{
    verdicts *vs = calloc(1, sizeof *vs);
    if (!vs || fajit_verdict_list(ctx, keep_verdict, vs) != FAJIT_OK) {
        printf("validation   cannot list verdicts: %s\n", fajit_errmsg(ctx));
        free(vs);
        return;
    }
    int mine = 0;
    if (si->device_count == 0)
        printf("validation   no GPU here: nothing validated on this machine\n");
    else
        printf("validation   verdicts of this machine's GPUs (fajit %s, driver %d)\n",
               fajit_version_string(), si->driver_version);
    for (int i = 0; i < si->device_count; i++) {
        fajit_device_info di;
        int shown = 0;
        if (fajit_device_info_get(ctx, i, &di) != FAJIT_OK)
            continue;
        for (int k = 0; k < vs->n; k++) {
            const fajit_verdict_info *v = &vs->v[k];
            if (strcmp(v->gpu_name, di.name) || strcmp(v->arch, di.arch) ||
                v->sm_count != di.sm_count || v->driver_version != si->driver_version ||
                strcmp(v->fajit_version, fajit_version_string()))
                continue;
            if (!shown++)
                printf("  [%d] %s\n", i, di.name);
            print_verdict("       ", v);
        }
        if (!shown)
            printf("  [%d] %s: not validated (fajit-tune validate)\n", i, di.name);
        mine += shown;
    }
    if (vs->n > mine)
        printf("  (%d verdicts of other GPU classes in the cache)\n", vs->n - mine);
    free(vs);
}

/* The family named `name` ("fa3"), or -1 (listing the names). */
static int family_of(const char *name)
{
    for (int f = 1; f < 64; f++)
        if (fajit_family_name((fajit_family)f) && strcmp(name, "ref") != 0 &&
            strcmp(fajit_family_name((fajit_family)f), name) == 0)
            return f;
    fprintf(stderr, "fajit-tune: --family must be one of:");
    for (int f = 2; f < 64; f++)
        if (fajit_family_name((fajit_family)f))
            fprintf(stderr, " %s", fajit_family_name((fajit_family)f));
    fprintf(stderr, "; got '%s'\n", name);
    return -1;
}

/* Validates `family` (AUTO: all) on ctx's device for the model-feature set `features`
 * (FAJIT_FEATURE_*) and `kv`, and prints a line per verdict. 0 when every family passed,
 * 1 otherwise. */
static int run_validation(fajit_ctx *ctx, int family, unsigned features, fajit_kv_dtype kv)
{
    fajit_device_info di;
    fajit_sysinfo si;
    if (fajit_device_info_get(ctx, 0, &di) == FAJIT_OK && fajit_sysinfo_get(ctx, &si) == FAJIT_OK)
        printf("validate: %s (%s, %d SMs, driver %d, fajit %s)\n", di.name, di.arch,
               di.sm_count, si.driver_version, fajit_version_string());
    fajit_validation_report rep;
    fajit_validation_report_init(&rep);
    rep.features = features, rep.kv_dtype = kv;
    fajit_status st = fajit_validate(ctx, (fajit_family)family, &rep);
    for (int f = 2; f < 64 && (st == FAJIT_OK || st == FAJIT_VALIDATION_FAILED); f++) {
        fajit_verdict_info v;
        fajit_verdict_info_init(&v);
        v.features = features, v.kv_dtype = kv;
        if ((family == FAJIT_FAMILY_AUTO || f == family) && fajit_family_name((fajit_family)f) &&
            fajit_family_verdict(ctx, (fajit_family)f, &v) == FAJIT_OK &&
            v.verdict != FAJIT_VERDICT_NONE)
            print_verdict("  ", &v);
    }
    if (st == FAJIT_OK || st == FAJIT_VALIDATION_FAILED)
        printf("validate: %d families, %d failed%s, %d cases\n", rep.families, rep.failed,
               rep.failed ? " (quarantined: dispatch falls back to the next family)" : "",
               rep.cases);
    return st ? fail(ctx, st, "validate") : 0;
}

/* A context on GPU 0 with the same cache, or NULL (why in `why`). */
static fajit_ctx *device_ctx(char *why, size_t n)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = 0;
    o.cache_dir = g_cache_dir;
    o.log = on_log;
    o.log_level = g_verbose ? FAJIT_LOG_DEBUG : FAJIT_LOG_WARN;
    o.progress = on_progress;
    fajit_ctx *ctx = NULL;
    fajit_status st = fajit_ctx_create(&ctx, &o);
    if (st == FAJIT_OK)
        return ctx;
    snprintf(why, n, "%s", ctx ? fajit_errmsg(ctx) : fajit_strerror(st));
    fajit_ctx_destroy(ctx);
    return NULL;
}

/* warm and tune end with validation where there is a GPU (unless FAJIT_VALIDATE=off). */
static int validate_after(fajit_ctx *ctx, const char *what)
{
    const char *e = getenv("FAJIT_VALIDATE");
    fajit_sysinfo si;
    if ((e && strcmp(e, "off") == 0) || fajit_sysinfo_get(ctx, &si) != FAJIT_OK ||
        si.device_count == 0) {
        printf("%s: no validation here (%s)\n", what, e && strcmp(e, "off") == 0 ?
               "FAJIT_VALIDATE=off" : "no GPU: run fajit-tune validate where the kernels serve");
        return 0;
    }
    char why[512];
    fajit_ctx *dev = device_ctx(why, sizeof why);
    if (!dev) {
        fprintf(stderr, "fajit-tune: %s: cannot validate on GPU 0: %s\n", what, why);
        return 1;
    }
    int rc = run_validation(dev, FAJIT_FAMILY_AUTO, 0, FAJIT_KV_AS_Q);
    fajit_ctx_destroy(dev);
    return rc;
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
        printf("nvrtc        %s\n", fajit_nvrtc_describe());
    else
        printf("nvrtc        not loaded (FAJIT_NVRTC_PATH names it; 'none' disables it): "
               "nothing compiles, kernels already in the cache are still served\n");
    printf("devices      %d\n", si.device_count);
    for (int i = 0; i < si.device_count; i++) {
        fajit_device_info di;
        if (fajit_device_info_get(ctx, i, &di) == FAJIT_OK)
            printf("  [%d] %s  cc %d.%d  target %s  %d SMs  %.1f GiB\n", i, di.name,
                   di.cc_major, di.cc_minor, di.arch, di.sm_count,
                   di.total_mem / (1024.0 * 1024 * 1024));
    }
    /* families with something to say about their standing (FA4: never run on hardware) */
    for (int f = 1; fajit_family_name((fajit_family)f); f++) {
        const char *note = fajit_family_status_note((fajit_family)f);
        if (note)
            printf("family %-5s %s\n", fajit_family_name((fajit_family)f), note);
    }
    int64_t entries = 0, bytes = 0, file_bytes = 0;
    fajit_cache_stats(ctx, &entries, &bytes, &file_bytes);
    printf("cache        %s%s\n", si.cache_path ? si.cache_path : "memory only",
           si.cache_readonly ? " (read-only)" : "");
    printf("  entries    %lld, %.1f MiB of kernels, file %.1f MiB\n", (long long)entries,
           bytes / 1048576.0, file_bytes / 1048576.0);
    print_verdicts(ctx, &si);
    return 0;
}

/* What follows the command on the line. */
typedef struct args {
    const char *arch, *spec, *dtype, *mask, *op, *json, *family;
    const char *features, *kv_dtype;   /* plan, cache explain: NULL = none, as Q */
    int jobs, hdim, hdim_v, reps, pin, force, seqlen, recompile, allow_skipped;
    long long seqlen_q, seqlen_k, batch, heads_q, heads_kv, page_size;   /* plan; -1: unset */
    long long max_mb;      /* cache prune --max-mb; -1 = not given */
    const char *sub;       /* cache's command: ls, stats, ... */
    const char *pos[64];   /* the words after the command (after cache's command) */
    int n_pos;
} args;

static int cmd_warm(fajit_ctx *ctx, const args *a)
{
    if (!a->arch) {
        fprintf(stderr, "fajit-tune: warm needs --arch LIST (e.g. sm_80,sm_90a,sm_100a)\n");
        return 2;
    }
    /* Warm exists to fill the cache: one that cannot keep what it compiles is an error. */
    fajit_sysinfo si;
    if (fajit_sysinfo_get(ctx, &si) == FAJIT_OK && (!si.cache_path || si.cache_readonly)) {
        fprintf(stderr, "fajit-tune: warm: the cache %s%s: nothing compiled now would be kept "
                "(see the warning above; set --cache-dir or FAJIT_CACHE_DIR)\n",
                si.cache_path ? si.cache_path : "is memory only",
                si.cache_path ? " is read-only" : "");
        return 1;
    }
    char *list = strdup(a->arch), *save = NULL;
    int rc = 0, targets = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save), targets++) {
        int compiled = 0, cached = 0;
        fajit_status st = a->spec ? fajit_warm_spec(ctx, a->spec, t, a->jobs, &compiled, &cached)
                                  : fajit_warm(ctx, t, a->jobs, &compiled, &cached);
        if (st) {
            rc = fail(ctx, st, "warm");
            break;
        }
        printf("%-8s %d compiled, %d already cached\n", t, compiled, cached);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    printf("warm: %.1f s wall, %llu compiles, %.1f s compiling\n",
           (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
           (unsigned long long)c.compiles, c.compile_seconds);
    free(list);
    if (!rc && targets == 0) {
        fprintf(stderr, "fajit-tune: warm: --arch '%s' names no target (e.g. sm_80,sm_90a)\n",
                a->arch);
        return 2;
    }
    return rc ? rc : validate_after(ctx, "warm");
}

typedef struct tune_table {
    fajit_tune_result rows[512];
    int n;
} tune_table;

static void on_tuned(void *user, const fajit_tune_result *r)
{
    tune_table *t = user;
    if (t->n < (int)(sizeof t->rows / sizeof t->rows[0]))
        t->rows[t->n++] = *r;
}

static int cmd_tune(fajit_ctx *ctx, const args *a)
{
    if (!a->spec) {
        fprintf(stderr, "fajit-tune: tune needs --spec FILE or a preset name\n");
        return 2;
    }
    fajit_tune_opts o;
    fajit_tune_opts_init(&o);
    if (a->reps)
        o.reps = a->reps;
    o.pin = a->pin;
    o.force = a->force;
    tune_table *t = calloc(1, sizeof *t);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fajit_status st = fajit_tune_spec(ctx, a->spec, &o, on_tuned, t);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%-28s %-12s %5s %5s %5s  %-12s %9s  %-12s %9s  %7s %s\n", "signature", "bucket", "sq",
           "sk", "batch", "default", "ms", "winner", "ms", "speedup", "");
    for (int i = 0; i < t->n; i++) {
        const fajit_tune_result *r = &t->rows[i];
        char speed[16] = "-";
        if (r->default_ms > 0 && r->winner_ms > 0)
            snprintf(speed, sizeof speed, "%.2fx", r->default_ms / r->winner_ms);
        printf("%-28s %-12s %5d %5d %5d  %-12s %9.4f  %-12s %9.4f  %7s %s\n", r->signature,
               r->bucket, r->seqlen_q, r->seqlen_k, r->batch, r->default_config, r->default_ms,
               r->winner, r->winner_ms, speed,
               r->from_cache ? "(stored row kept)" : r->pruned ? "" : "");
    }
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    printf("tune: %d shapes in %.1f s, %llu compiles (%.1f s compiling)\n", t->n,
           (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
           (unsigned long long)c.compiles, c.compile_seconds);
    free(t);
    if (st)
        return fail(ctx, st, "tune");
    const char *e = getenv("FAJIT_VALIDATE");
    if (e && strcmp(e, "off") == 0) {
        printf("tune: no validation (FAJIT_VALIDATE=off)\n");
        return 0;
    }
    return run_validation(ctx, FAJIT_FAMILY_AUTO, 0, FAJIT_KV_AS_Q);
}

/* The model features of --features LIST and --kv-dtype T, with stand-in pointers; with
 * set_only (validate: a feature set, no problem), head_dim_v may be listed too. */
static int feature_fields(const args *a, fajit_attn_desc *d, int set_only)
{
    const float *stand_in = (const float *)(uintptr_t)0x300000;
    for (const char *s = a->features; s && *s;) {
        size_t n = strcspn(s, ",");
        if (n == 7 && strncmp(s, "softcap", 7) == 0)
            d->softcap = 30.f;
        else if (n == 5 && strncmp(s, "sinks", 5) == 0)
            d->sinks = stand_in;
        else if (n == 5 && strncmp(s, "alibi", 5) == 0)
            d->alibi_slopes = stand_in;
        else if (set_only && n == 10 && strncmp(s, "head_dim_v", 10) == 0)
            d->head_dim_v = d->head_dim / 2;
        else {
            fprintf(stderr, "fajit-tune: --features takes softcap, sinks and alibi%s, "
                    "comma-separated; got '%.*s'\n", set_only ? " (and head_dim_v)" : "",
                    (int)n, s);
            return -1;
        }
        s += n + (s[n] == ',');
    }
    if (a->kv_dtype) {
        if (strcmp(a->kv_dtype, "e4m3") != 0 && strcmp(a->kv_dtype, "e5m2") != 0) {
            fprintf(stderr, "fajit-tune: --kv-dtype must be e4m3 or e5m2, got '%s'\n",
                    a->kv_dtype);
            return -1;
        }
        d->kv_dtype = a->kv_dtype[1] == '4' ? FAJIT_KV_E4M3 : FAJIT_KV_E5M2;
        d->k_descale = d->v_descale = stand_in;
    }
    return 0;
}

/* validate [--family NAME] [--features LIST] [--kv-dtype T]. */
static int cmd_validate(fajit_ctx *ctx, const args *a)
{
    fajit_attn_desc d;
    const void *p = (const void *)(uintptr_t)0x100000;
    int family = a->family ? family_of(a->family) : FAJIT_FAMILY_AUTO;
    if (family < 0)
        return 2;
    fajit_attn_desc_init(&d, p, p, p, (void *)(uintptr_t)0x100000, 1, 1, 1, 1, 1, 128,
                         FAJIT_BF16);
    if (feature_fields(a, &d, 1) != 0)
        return 2;
    unsigned features = (d.head_dim_v ? FAJIT_FEATURE_HEAD_DIM_V : 0u) |
                        (d.softcap > 0.f ? FAJIT_FEATURE_SOFTCAP : 0u) |
                        (d.sinks ? FAJIT_FEATURE_SINKS : 0u) |
                        (d.alibi_slopes ? FAJIT_FEATURE_ALIBI : 0u) |
                        (d.kv_dtype != FAJIT_KV_AS_Q ? FAJIT_FEATURE_KV_FP8 : 0u);
    return run_validation(ctx, family, features, d.kv_dtype);
}

/* A descriptor for the shape options (nothing runs: the pointers are never used). */
static int shape_desc(const args *a, fajit_attn_desc *d)
{
    static const char *const masks[] = {"none", "causal", "window"};
    void *p = (void *)(uintptr_t)0x100000;
    if (strcmp(a->dtype, "f16") != 0 && strcmp(a->dtype, "bf16") != 0) {
        fprintf(stderr, "fajit-tune: --dtype must be f16 or bf16, got '%s'\n", a->dtype);
        return -1;
    }
    if (a->seqlen < 1 || a->seqlen > (1 << 24)) {
        fprintf(stderr, "fajit-tune: --seqlen must be in 1..16777216, got %d\n", a->seqlen);
        return -1;
    }
    const long long sq = a->seqlen_q >= 0 ? a->seqlen_q : a->seqlen;
    const long long sk = a->seqlen_k >= 0 ? a->seqlen_k : a->seqlen;
    const long long hq = a->heads_q >= 0 ? a->heads_q : 16;
    const long long hkv = a->heads_kv >= 0 ? a->heads_kv : hq;
    fajit_attn_desc_init(d, p, p, p, p, a->batch >= 0 ? (int)a->batch : 1, (int)hq, (int)hkv,
                         (int)sq, (int)sk, a->hdim,
                         strcmp(a->dtype, "f16") == 0 ? FAJIT_F16 : FAJIT_BF16);
    if (a->page_size > 0) {   /* a paged K/V cache, as large as the shape needs */
        d->block_table = (const int32_t *)(uintptr_t)0x200000;
        d->page_size = (int)a->page_size;
        d->block_table_stride = (sk + a->page_size - 1) / a->page_size;
        d->num_pages = (int)(d->block_table_stride * d->batch);
    }
    d->head_dim_v = a->hdim_v;   /* 0: hdim */
    if (feature_fields(a, d, 0) != 0)
        return -1;
    d->mask = (fajit_mask)-1;
    for (int i = 0; i < 3; i++)
        if (strcmp(a->mask, masks[i]) == 0)
            d->mask = (fajit_mask)i;
    d->window_left = d->window_right = d->mask == FAJIT_MASK_WINDOW ? 256 : -1;
    d->op = (fajit_op)-1;
    for (int i = 0; fajit_op_name((fajit_op)i); i++)
        if (strcmp(a->op, fajit_op_name((fajit_op)i)) == 0)
            d->op = (fajit_op)i;
    if ((int)d->op < 0) {
        fprintf(stderr, "fajit-tune: --op must be one of:");
        for (int i = 0; fajit_op_name((fajit_op)i); i++)
            fprintf(stderr, " %s", fajit_op_name((fajit_op)i));
        fprintf(stderr, "; got '%s'\n", a->op);
        return -1;
    }
    return 0;
}

static const char *default_arch(fajit_ctx *ctx, const args *a, fajit_device_info *di)
{
    if (a->arch)
        return a->arch;
    if (fajit_device_info_get(ctx, 0, di) != FAJIT_OK) {
        fprintf(stderr, "fajit-tune: no GPU here (%s); name a target with --arch\n",
                fajit_errmsg(ctx));
        return NULL;
    }
    return di->arch;
}

static int cmd_plan(fajit_ctx *ctx, const args *a)
{
    fajit_device_info di;
    fajit_attn_desc d;
    const char *arch = default_arch(ctx, a, &di);
    if (!arch || shape_desc(a, &d) != 0)
        return 2;
    /* On GPU 0's own target the plan is the device's: its tuning rows and verdicts. */
    char line[1024], why[512];
    fajit_ctx *dev = NULL;
    if (fajit_device_info_get(ctx, 0, &di) == FAJIT_OK && strcmp(arch, di.arch) == 0)
        dev = device_ctx(why, sizeof why);
    fajit_status st = dev ? fajit_dispatch_describe(dev, NULL, &d, line, sizeof line)
                          : fajit_dispatch_describe(ctx, arch, &d, line, sizeof line);
    if (dev && st) {
        fail(dev, st, "plan");
        fajit_ctx_destroy(dev);
        return 1;
    }
    fajit_ctx_destroy(dev);
    if (st)
        return fail(ctx, st, "plan");
    char el[4 * sizeof line + 1];
    printf("%s %s hdim %d %s %s -> %s\n", arch, a->op, a->hdim, a->dtype, a->mask,
           esc(el, sizeof el, line));
    return 0;
}

static int print_entry(void *user, const fajit_cache_entry *e)
{
    (void)user;
    char when[32];
    time_t t = (time_t)e->last_used;
    char arch[64], name[1024];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&t));
    printf("%s  %-8s %7zu B  %4d regs  %5.0f ms  %3lld hits  %s  %s\n", e->key_hex,
           esc(arch, sizeof arch, e->arch), e->cubin_bytes, e->regs, e->compile_ms,
           (long long)e->hits, when, esc(name, sizeof name, e->name));
    return 0;
}

/*------ bundles ------*/

/* SIGINT, SIGTERM and SIGHUP are held while a bundle is written or a merge directory
 * exists, so that nothing is left behind: export removes its temp file or renames it before
 * the signal acts, merge removes its directory first. */
static void hold_signals(sigset_t *old)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    sigprocmask(SIG_BLOCK, &s, old);
}

static int signal_held(void)
{
    sigset_t p;
    return sigpending(&p) == 0 && (sigismember(&p, SIGINT) == 1 || sigismember(&p, SIGTERM) == 1
                                   || sigismember(&p, SIGHUP) == 1);
}

static int remove_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* Removes directory `dir` and everything under it (links not followed). */
static void remove_tree(const char *dir)
{
    if (nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "fajit-tune: could not remove %s: %s\n", dir, strerror(errno));
}

/* One import's counts: kernels, tuning rows, verdicts (imported: none of the class and
 * family was here; replaced; kept: the cache's won; refused: a PASS of a family that must
 * be validated on its own GPU class). */
static void print_import(const char *path, const fajit_bundle_report *r)
{
    char e[8192];
    printf("%s: %d kernels added, %d tuning rows, %d corrupt skipped; verdicts %d imported, "
           "%d replaced, %d kept, %d refused\n", esc(e, sizeof e, path), r->kernels, r->rows,
           r->corrupt, r->verdicts, r->verdicts_replaced, r->verdicts_kept, r->verdicts_refused);
    if (r->verdicts_refused)
        fprintf(stderr, "fajit-tune: %s: %d PASS verdicts not taken: their families are "
                "validated on first use on each GPU class\n", esc(e, sizeof e, path),
                r->verdicts_refused);
}

static int cmd_export(fajit_ctx *ctx, const args *a)
{
    fajit_bundle_report r;
    sigset_t old;
    char e[8192];
    fajit_bundle_report_init(&r);
    hold_signals(&old);
    fajit_status st = fajit_cache_export_bundle(ctx, a->pos[0], a->arch,
                                                a->force ? FAJIT_EXPORT_FORCE : 0, &r);
    sigprocmask(SIG_SETMASK, &old, NULL);   /* a signal held meanwhile acts now */
    if (st)
        return fail(ctx, st, "export");
    printf("%s: %d kernels, %d tuning rows, %d verdicts\n", esc(e, sizeof e, a->pos[0]),
           r.kernels, r.rows, r.verdicts);
    return 0;
}

/* merge: a fresh cache in a new directory under $TMPDIR, each IN imported, one export. */
static int cmd_merge(const args *a)
{
    const char *tmpdir = getenv("TMPDIR");
    char dir[4096], e[8192];
    sigset_t old;
    snprintf(dir, sizeof dir, "%s/fajit-merge-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    hold_signals(&old);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "fajit-tune: merge: cannot make %s: %s\n", dir, strerror(errno));
        sigprocmask(SIG_SETMASK, &old, NULL);
        return 1;
    }
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = dir;
    o.log = on_log;
    fajit_ctx *m = NULL;
    fajit_bundle_report r;
    fajit_status st = fajit_ctx_create(&m, &o);
    int rc = st ? fail(m, st, "merge") : 0, dropped = 0;
    for (int i = 1; i < a->n_pos && !rc && !signal_held(); i++) {
        fajit_bundle_report_init(&r);
        st = fajit_cache_import_bundle(m, a->pos[i], &r);
        rc = st ? fail(m, st, "merge") : 0;
        if (!rc)
            print_import(a->pos[i], &r);
        dropped += r.corrupt;
    }
    fajit_bundle_report_init(&r);
    if (!rc && !signal_held()
        && (st = fajit_cache_export_bundle(m, a->pos[0], NULL,
                                           a->force ? FAJIT_EXPORT_FORCE : 0, &r)))
        rc = fail(m, st, "merge");
    else if (!rc && !signal_held())
        printf("%s: %d kernels, %d tuning rows, %d verdicts\n", esc(e, sizeof e, a->pos[0]),
               r.kernels, r.rows, r.verdicts);
    if (!rc && dropped) {
        fprintf(stderr, "fajit-tune: merge: %d corrupt kernels were skipped\n", dropped);
        rc = 1;
    }
    fajit_ctx_destroy(m);
    remove_tree(dir);
    if (signal_held())
        rc = 1;   /* (the signal acts below; with none acting, still an error) */
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static int print_differ(void *user, const fajit_cache_entry *e)
{
    (void)user;
    char arch[64], name[1024];
    printf("DIFFERS  %s  %-8s %7zu B  %s\n", e->key_hex, esc(arch, sizeof arch, e->arch),
           e->cubin_bytes, esc(name, sizeof name, e->name));
    return 0;
}

static int print_bad_verdict(void *user, const fajit_verdict_info *v, const char *why)
{
    (void)user;
    char fam[64], arch[64], gpu[512], set[ESC_LEN(v->features_name)];
    printf("BAD VERDICT  %s %s on %s (%d SMs, driver %d)%s%s: %s\n",
           esc(fam, sizeof fam, v->family_name), esc(arch, sizeof arch, v->arch),
           esc(gpu, sizeof gpu, v->gpu_name), v->sm_count, v->driver_version,
           v->features_name[0] ? " for " : "", esc(set, sizeof set, v->features_name), why);
    return 0;
}

/* cache verify --recompile, after the checksums (`bad` of them failed). A kernel that
 * could not be compared (made by another NVRTC, by its key, or no variant of this fajit)
 * is an error unless allowed: nothing vouches for its bytes. */
static int verify_recompile(fajit_ctx *ctx, int bad, int allow_skipped)
{
    int same = 0, differ = 0, skipped = 0;
    fajit_status st = fajit_cache_verify_recompile(ctx, print_differ, NULL, &same, &differ,
                                                   &skipped);
    if (st)
        return fail(ctx, st, "verify --recompile");
    printf("%d kernels recompiled: %d identical, %d differ; %d skipped (another NVRTC "
           "version, or not a variant this fajit builds)\n", same + differ, same, differ,
           skipped);
    if (skipped && !allow_skipped)
        fprintf(stderr, "fajit-tune: verify --recompile: %d kernels could not be compared "
                "and are not vouched for (--allow-skipped accepts that)\n", skipped);
    return bad || differ || (skipped && !allow_skipped) ? 1 : 0;
}

static int cmd_cache(fajit_ctx *ctx, const args *a)
{
    fajit_status st;
    const char *sub = a->sub;   /* parse_command checked its options and words */
    if (strcmp(sub, "ls") == 0) {
        st = fajit_cache_list(ctx, print_entry, NULL);
    } else if (strcmp(sub, "stats") == 0) {
        int64_t entries, bytes, file_bytes;
        st = fajit_cache_stats(ctx, &entries, &bytes, &file_bytes);
        if (!st)
            printf("entries %lld\nkernel_bytes %lld\nfile_bytes %lld\n", (long long)entries,
                   (long long)bytes, (long long)file_bytes);
    } else if (strcmp(sub, "verify") == 0) {
        int checked = 0, bad = 0, vchecked = 0, vbad = 0;
        st = fajit_cache_verify(ctx, &checked, &bad);
        if (!st)
            printf("%d entries checked, %d bad (removed)\n", checked, bad);
        if (!st && (st = fajit_cache_verify_verdicts(ctx, print_bad_verdict, NULL, &vchecked,
                                                     &vbad)) == FAJIT_OK)
            printf("%d verdicts checked, %d bad (removed)\n", vchecked, vbad);
        bad += vbad;
        if (!st && a->recompile)
            return verify_recompile(ctx, bad, a->allow_skipped);
        if (!st && bad)
            return 1;
    } else if (strcmp(sub, "clear") == 0) {
        st = fajit_cache_clear(ctx);
        if (!st)
            printf("cache cleared\n");
    } else if (strcmp(sub, "prune") == 0) {
        int64_t removed = 0, freed = 0;
        st = fajit_cache_prune(ctx, a->max_mb << 20, &removed, &freed);
        if (!st)
            printf("%lld kernels removed (%lld bytes)\n", (long long)removed, (long long)freed);
    } else if (strcmp(sub, "export") == 0) {
        return cmd_export(ctx, a);
    } else if (strcmp(sub, "import") == 0) {
        st = FAJIT_OK;
        int dropped = 0;
        for (int i = 0; i < a->n_pos && !st; i++) {
            fajit_bundle_report r;
            fajit_bundle_report_init(&r);
            st = fajit_cache_import_bundle(ctx, a->pos[i], &r);
            if (!st)
                print_import(a->pos[i], &r);
            dropped += st ? 0 : r.corrupt;
        }
        if (!st && dropped) {   /* every dropped input is an error, if a late one */
            fprintf(stderr, "fajit-tune: import: %d corrupt kernels were skipped\n", dropped);
            return 1;
        }
    } else if (strcmp(sub, "merge") == 0) {
        return cmd_merge(a);
    } else {   /* explain */
        fajit_device_info di;
        fajit_attn_desc d;
        const char *arch = default_arch(ctx, a, &di);
        if (!arch || shape_desc(a, &d) != 0)
            return 2;
        char text[4096], e[4 * sizeof text + 1];
        st = fajit_cache_explain(ctx, arch, &d, text, sizeof text);
        if (!st)
            printf("%s\n", esc_text(e, sizeof e, text, 1));
    }
    return st ? fail(ctx, st, sub) : 0;
}

/* A whole-number option of k_nums: 1 matched (value stored), -1 matched but bad (said so),
 * 0 not one of them. */
typedef struct num_opt { int id; const char *opt; size_t off; long long lo, hi; int is_int; } num_opt;
static const num_opt k_nums[] = {
    {O_SEQLEN_Q, "--seqlen-q", offsetof(args, seqlen_q), 1, 1 << 24, 0},
    {O_SEQLEN_K, "--seqlen-k", offsetof(args, seqlen_k), 1, 1 << 24, 0},
    {O_BATCH, "--batch", offsetof(args, batch), 1, 1 << 20, 0},
    {O_HEADS_Q, "--heads-q", offsetof(args, heads_q), 1, 1024, 0},
    {O_HEADS_KV, "--heads-kv", offsetof(args, heads_kv), 1, 1024, 0},
    {O_PAGE_SIZE, "--page-size", offsetof(args, page_size), 1, 1 << 20, 0},
    {O_MAX_MB, "--max-mb", offsetof(args, max_mb), 0, 1ll << 40, 0},
    {O_JOBS, "-j", offsetof(args, jobs), 1, 1024, 1},
    {O_HDIM, "--hdim", offsetof(args, hdim), 8, 256, 1},
    {O_HDIM_V, "--hdim-v", offsetof(args, hdim_v), 8, 256, 1},
    {O_SEQLEN, "--seqlen", offsetof(args, seqlen), 1, 1 << 24, 1},
    {O_REPS, "--reps", offsetof(args, reps), 1, 1000, 1},
};
static int num_option(int id, const char *val, args *a)
{
    for (size_t k = 0; k < sizeof k_nums / sizeof k_nums[0]; k++) {
        const num_opt *t = &k_nums[k];
        if (id != t->id)
            continue;
        char *end;
        errno = 0;
        long long v = strtoll(val, &end, 10);
        if (errno || end == val || *end || v < t->lo || v > t->hi) {
            fprintf(stderr, "fajit-tune: %s needs a whole number in %lld..%lld, got '%s'\n",
                    t->opt, t->lo, t->hi, val);
            return -1;
        }
        if (t->is_int) {
            int iv = (int)v;
            memcpy((char *)a + t->off, &iv, sizeof iv);
        } else {
            memcpy((char *)a + t->off, &v, sizeof v);
        }
        return 1;
    }
    return 0;
}

/* Stores option `id`'s value; 0, or 2 when the value is refused (said so). */
static int set_option(int id, const char *val, args *a)
{
    switch (id) {
    case O_ARCH: a->arch = val; return 0;
    case O_SPEC: a->spec = val; return 0;
    case O_DTYPE: a->dtype = val; return 0;
    case O_MASK: a->mask = val; return 0;
    case O_OP: a->op = val; return 0;
    case O_JSON: a->json = val; return 0;
    case O_FEATURES: a->features = val; return 0;
    case O_KV_DTYPE: a->kv_dtype = val; return 0;
    case O_FAMILY: a->family = val; return family_of(val) < 0 ? 2 : 0;
    case O_PIN: a->pin = 1; return 0;
    case O_FORCE: a->force = 1; return 0;
    case O_RECOMPILE: a->recompile = 1; return 0;
    case O_ALLOW_SKIPPED: a->allow_skipped = 1; return 0;
    default: return num_option(id, val, a) < 0 ? 2 : 0;
    }
}

/* "--name" of option `id` in `opts` (or "-j"), for messages. */
static void option_name(const subcmd *sc, int id, char *out, size_t n)
{
    for (const struct option *o = sc->opts; o->name; o++)
        if (o->val == id) {
            snprintf(out, n, "--%s", o->name);
            return;
        }
    snprintf(out, n, "-%c", id);
}

/* Why `word`, refused by getopt_long for `sc`, is wrong: a flag given a value, an option of
 * other commands (naming them), or unknown. */
static void say_refused(const subcmd *sc, const char *word)
{
    char name[64];
    snprintf(name, sizeof name, "%s", word);
    name[strcspn(name, "=")] = 0;
    if (strcmp(name, "-v") == 0 || strcmp(name, "-q") == 0 || strcmp(name, "--cache-dir") == 0) {
        fprintf(stderr, "fajit-tune: %s is a global option: put it before the command\n", name);
        return;
    }
    const char *sep = NULL, *bare = strncmp(name, "--", 2) == 0 ? name + 2 : NULL;
    for (const struct option *o = sc->opts; bare && o->name; o++)
        if (strcmp(bare, o->name) == 0) {
            fprintf(stderr, "fajit-tune: %s takes no value, got '%s'\n", name, word);
            return;
        }
    for (size_t k = 0; k < N_CMDS && bare; k++)
        for (const struct option *o = k_cmds[k].opts; o->name; o++)
            if (strcmp(bare, o->name) == 0) {
                if (!sep)
                    fprintf(stderr, "fajit-tune: %s is an option of", name);
                fprintf(stderr, "%s %s", sep ? sep : "", k_cmds[k].name);
                sep = ",";
                break;
            }
    if (sep)
        fprintf(stderr, ", not %s\n", sc->name);
    else
        fprintf(stderr, "fajit-tune: unknown option '%s' for %s\n", word, sc->name);
}

/* Parses the words after command `sc` (argv[0] is its last word) into `a`: 0, 2 (refused,
 * said so with the command's usage) or -1 (--help printed: exit 0). */
static int parse_command(const subcmd *sc, int argc, char **argv, args *a)
{
    int c, rc = 0;
    char name[64];
    optind = 0;   /* glibc and musl: start afresh */
    opterr = 0;
    while (!rc && (c = getopt_long(argc, argv, sc->shorts, sc->opts, NULL)) != -1) {
        if (c == O_HELP) {
            usage_of(stdout, sc->name);
            return -1;
        } else if (c == ':') {
            option_name(sc, optopt, name, sizeof name);
            fprintf(stderr, "fajit-tune: %s needs a value\n", name);
            rc = 2;
        } else if (c == '?') {
            say_refused(sc, optopt && optopt < 256 && !strchr(argv[optind - 1], '=')
                                ? (snprintf(name, sizeof name, "-%c", optopt), name)
                                : argv[optind - 1]);
            rc = 2;
        } else {
            rc = set_option(c, optarg, a);
        }
    }
    a->n_pos = argc - optind;
    if (!rc && a->n_pos > sc->max_pos) {
        if (sc->max_pos == (int)(sizeof a->pos / sizeof a->pos[0]))
            fprintf(stderr, "fajit-tune: too many arguments (at most %d files), at '%s'\n",
                    sc->max_pos, argv[optind + sc->max_pos]);
        else
            fprintf(stderr, "fajit-tune: %s takes no argument '%s' (options start with -)\n",
                    sc->name, argv[optind + sc->max_pos]);
        rc = 2;
    } else if (!rc && a->n_pos < sc->min_pos) {
        fprintf(stderr, "fajit-tune: %s needs %s\n", sc->name, sc->needs);
        rc = 2;
    } else if (!rc && strcmp(sc->name, "cache prune") == 0 && a->max_mb < 0) {
        fprintf(stderr, "fajit-tune: cache prune needs --max-mb N\n");
        rc = 2;
    }
    for (int k = 0; !rc && k < a->n_pos; k++)
        a->pos[k] = argv[optind + k];
    if (rc == 2)
        usage_of(stderr, sc->name);
    return rc;
}

/* `help [COMMAND [SUB]]`: that usage on stdout (0), or 2 for an unknown command. */
static int cmd_help(int argc, char **argv)
{
    if (argc == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[0], "cache") == 0 && argc == 1) {
        usage_of(stdout, "cache ");
        return 0;
    }
    const subcmd *sc = find_cmd(argv[0], argc > 1 ? argv[1] : NULL);
    if (!sc) {
        fprintf(stderr, "fajit-tune: help: no command '%s'\n", argv[0]);
        return 2;
    }
    usage_of(stdout, sc->name);
    return 0;
}

/* The options before the command (--cache-dir, -v, -q, --help, --version): the index of the
 * command word, or -1 - the exit code when there is nothing more to do. */
static int parse_global(int argc, char **argv)
{
    static const struct option opts[] = {OPT("cache-dir", required_argument, O_CACHE_DIR),
                                         OPT("version", no_argument, O_VERSION), HELP_OPT,
                                         {0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hvq", opts, NULL)) != -1) {
        if (c == O_CACHE_DIR) {
            g_cache_dir = optarg;
        } else if (c == 'v') {
            g_verbose = 1;
        } else if (c == 'q') {
            g_quiet = 1;
        } else if (c == O_HELP || c == O_VERSION) {
            if (c == O_HELP)
                usage(stdout);
            else
                printf("fajit-tune %s\n", fajit_version_string());
            return -1;   /* exit 0 */
        } else {
            fprintf(stderr, "fajit-tune: %s '%s'\n", c == ':' ? "missing value for option"
                    : "unknown option", argv[optind - 1]);
            usage(stderr);
            return -3;   /* exit 2 */
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return -3;
    }
    return optind;
}

/* The command line into `a` and `*cmd`: -1 to go on, else the exit code. */
static int parse_line(int argc, char **argv, args *a, const char **cmd)
{
    int i = parse_global(argc, argv);
    if (i < 0)
        return -1 - i;
    *cmd = argv[i];
    if (strcmp(*cmd, "help") == 0)
        return cmd_help(argc - i - 1, argv + i + 1);
    const int is_cache = strcmp(*cmd, "cache") == 0;
    if (is_cache && (i + 1 >= argc || argv[i + 1][0] == '-')) {
        int help = i + 1 < argc && (strcmp(argv[i + 1], "--help") == 0 ||
                                    strcmp(argv[i + 1], "-h") == 0);
        if (!help)
            fprintf(stderr, "fajit-tune: cache needs a command: ls, stats, verify, clear, "
                    "prune, export, import, merge, explain\n");
        usage_of(help ? stdout : stderr, "cache ");
        return help ? 0 : 2;
    }
    if (is_cache)
        a->sub = argv[++i];
    const subcmd *sc = find_cmd(*cmd, a->sub);
    if (!sc) {
        if (is_cache)
            fprintf(stderr, "fajit-tune: unknown cache command '%s'\n", a->sub);
        else
            fprintf(stderr, "fajit-tune: unknown command '%s'\n", *cmd);
        usage_of(stderr, is_cache ? "cache " : "");
        return 2;
    }
    int rc = parse_command(sc, argc - i, argv + i, a);
    return rc < 0 ? 0 : rc > 0 ? rc : -1;
}

/* The context a command works in: on GPU 0 for tune, bench and validate, else without a
 * device. NULL with the exit code in *rc when there is none. */
static fajit_ctx *open_ctx(const char *cmd, int on_gpu, int *rc)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = on_gpu ? 0 : FAJIT_DEVICE_NONE;
    o.cache_dir = g_cache_dir;
    o.log = on_log;
    o.log_level = g_verbose ? FAJIT_LOG_DEBUG : FAJIT_LOG_WARN;
    o.progress = on_progress;
    fajit_ctx *ctx = NULL;
    fajit_status st = fajit_ctx_create(&ctx, &o);
    if (!st)
        return ctx;
    if (on_gpu && (st == FAJIT_NO_DRIVER || st == FAJIT_NO_DEVICE)) {
        fprintf(stderr, "fajit-tune: %s runs kernels on GPU 0, and there is none here: %s\n",
                cmd, fajit_errmsg(ctx));
        *rc = 1;
    } else {
        if (on_gpu)
            fprintf(stderr, "fajit-tune: %s needs a GPU (device 0)\n", cmd);
        *rc = fail(ctx, st, "creating a context");
    }
    fajit_ctx_destroy(ctx);
    return NULL;
}

int main(int argc, char **argv)
{
    args a = {.dtype = "bf16", .mask = "causal", .op = "fwd", .hdim = 128, .seqlen = 4096,
              .max_mb = -1, .seqlen_q = -1, .seqlen_k = -1, .batch = -1, .heads_q = -1,
              .heads_kv = -1, .page_size = -1};
    const char *cmd = NULL;
    int rc = parse_line(argc, argv, &a, &cmd);
    if (rc >= 0)
        return rc;
    g_tty = isatty(2);
    /* Only tuning, bench and validation run kernels; everything else works on a machine
     * without a GPU (and opens a second context on GPU 0 where there is one: warm, info,
     * plan). */
    const int on_gpu = strcmp(cmd, "tune") == 0 || strcmp(cmd, "bench") == 0 ||
                       strcmp(cmd, "validate") == 0;
    fajit_ctx *ctx = open_ctx(cmd, on_gpu, &rc);
    if (!ctx)
        return rc;
    if (strcmp(cmd, "info") == 0)
        rc = cmd_info(ctx);
    else if (strcmp(cmd, "warm") == 0)
        rc = cmd_warm(ctx, &a);
    else if (strcmp(cmd, "tune") == 0)
        rc = cmd_tune(ctx, &a);
    else if (strcmp(cmd, "bench") == 0)
        rc = cli_bench(ctx, a.spec, a.reps ? a.reps : 30, a.json);
    else if (strcmp(cmd, "plan") == 0)
        rc = cmd_plan(ctx, &a);
    else if (strcmp(cmd, "validate") == 0)
        rc = cmd_validate(ctx, &a);
    else
        rc = cmd_cache(ctx, &a);
    fajit_ctx_destroy(ctx);
    return rc;
}
