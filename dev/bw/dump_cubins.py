#!/usr/bin/env python3
"""dev/bw/dump_cubins.py - write the cubins of a fajit cache file (kernels.db, or a bundle from
`fajit-tune cache export`) to a directory, one file per kernel, for dev/bw/sass_check.sh.

  fajit-tune warm --arch sm_100a            # or: FAJIT_CACHE_DIR=/tmp/c fajit-tune warm ...
  python3 dev/bw/dump_cubins.py ~/.cache/fajit/kernels.db /tmp/fa4-cubins --arch sm_100a --prefix 'fa4 '

(The nvrtc-sm100 test writes every fa4 variant's cubin with FAJIT_DUMP_CUBINS=DIR as well.)"""
import argparse, os, re, sqlite3

ap = argparse.ArgumentParser()
ap.add_argument('db')
ap.add_argument('out')
ap.add_argument('--arch', default=None)
ap.add_argument('--prefix', default='fa4 ', help="kernel-name prefix ('' = all)")
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
con = sqlite3.connect('file:%s?mode=ro' % a.db, uri=True)
n = 0
for arch, name, blob in con.execute('SELECT arch, name, blob FROM kernels ORDER BY name'):
    if (a.arch and arch != a.arch) or not name.startswith(a.prefix):
        continue
    fn = '%s_%s.cubin' % (arch, re.sub(r'[^A-Za-z0-9_.-]', '_', name))
    with open(os.path.join(a.out, fn), 'wb') as f:
        f.write(blob)
    n += 1
print('%d cubins written to %s' % (n, a.out))
