/* cfgtool.c - dev tool: prints fa2_config.c's answers so scripts can use them.
 *   cfgtool default SM HD MASK      -> "BM BN WARPS STAGES SMEM"
 *   cfgtool cands SM HD MASK        -> one "BM BN WARPS STAGES SMEM" line per candidate
 *   cfgtool check SM HD BM BN W S   -> "ok" or the reason
 * Build: cc -O2 -I../../src/autotune -o cfgtool cfgtool.c ../../src/autotune/fa2_config.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fa2_config.h"

int main(int argc, char **argv)
{
    if (argc < 5) return 2;
    int sm = atoi(argv[2]), hd = atoi(argv[3]);
    if (!strcmp(argv[1], "default")) {
        fj_fa2_config c = fj_fa2_default(sm, hd, atoi(argv[4]));
        printf("%d %d %d %d %zu\n", c.block_m, c.block_n, c.warps, c.stages, fj_fa2_smem_bytes(&c, hd));
    } else if (!strcmp(argv[1], "cands")) {
        fj_fa2_config c[32];
        int n = fj_fa2_candidates(sm, hd, atoi(argv[4]), c, 32);
        for (int i = 0; i < n; i++)
            printf("%d %d %d %d %zu\n", c[i].block_m, c[i].block_n, c[i].warps, c[i].stages, fj_fa2_smem_bytes(&c[i], hd));
    } else if (!strcmp(argv[1], "check") && argc >= 8) {
        fj_fa2_config c = {atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7])};
        char why[256];
        printf("%s\n", fj_fa2_check(&c, hd, sm, why, sizeof why) ? why : "ok");
    }
    return 0;
}
