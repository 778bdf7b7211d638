"""Prints the fastest candidates of every tuning row of a fajit cache (kernels.db)."""
import json
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
for sig, bucket, cfg, t, tab in db.execute("select signature, bucket, config, time_ms, table_json from tuning"):
    rows = json.loads(tab) if tab else []
    ok = sorted([r for r in rows if r.get("ok")], key=lambda r: r.get("median_ms", 1e9))
    top = ", ".join(f"{r['config']} {r['median_ms']:.4f}" for r in ok[:6])
    print(f"{sig} {bucket}: winner {cfg} {t:.4f} ms | {top}")
