"""Every ok candidate of every tuning row of a fajit cache (kernels.db), in us, fastest first."""
import json
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
for sig, b, cfg, t, tab in db.execute("select signature, bucket, config, time_ms, table_json from tuning"):
    rows = sorted([r for r in json.loads(tab or "[]") if r.get("ok")], key=lambda r: r["median_ms"])
    print(f"{sig} {b}: winner {cfg} {t * 1000:.1f} us")
    print("  " + ", ".join(f"{r['config']} {r['median_ms'] * 1000:.1f}" for r in rows))
