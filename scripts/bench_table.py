#!/usr/bin/env python3
"""Formats tierkv-bench JSON results into the results table of BENCHMARKS.md.

Usage: bench_table.py RESULTS_DIR BENCHMARKS.md
Rewrites the text between the '<!-- RESULTS -->' and '<!-- /RESULTS -->' markers.
"""
import json
import pathlib
import re
import sys


def load(path):
    value = json.loads(path.read_text())
    return value if isinstance(value, list) else [value]


def row(name, runs):
    base = runs[0]
    lines = []
    for r in runs:
        ratio = r["throughput_ops_per_sec"] / base["throughput_ops_per_sec"]
        lat = r["latency_us"]["all"]
        group = r.get("avg_group_size")
        lines.append(
            f"| {name} | {r['engine']} | {r['threads']} | {r['ops']} "
            f"| {r['throughput_ops_per_sec']:.0f} | **{ratio:.2f}x** "
            f"| {lat['p50']:.1f} / {lat['p99']:.1f} / {lat['max']:.0f} "
            f"| {r['write_amplification']:.2f} "
            f"| {(r['cpu_seconds']['user'] + r['cpu_seconds']['sys']) * 1e6 / max(r['ops'], 1):.1f} "
            f"| {'-' if group is None else f'{group:.2f}'} |"
        )
    return lines


def db_bench_rates(text):
    rates = {}
    for m in re.finditer(r"^(\w+)\s*:\s*[\d.]+ micros/op (\d+) ops/sec", text, re.M):
        rates[m.group(1)] = int(m.group(2))
    return rates


def main():
    out, doc = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    lines = [
        "| experiment | engine | threads | ops | ops/s | vs RocksDB | latency us p50 / p99 / max "
        "| write amp. | cpu us/op | WAL group |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, file in [
        ("fillrandom, 4x memory", "fillrandom.json"),
        ("readrandom, 4x memory", "readrandom.json"),
        ("fillrandom sync, 8 threads", "fillrandom-sync8.json"),
    ]:
        if (out / file).exists():
            lines += row(name, load(out / file))
    xfill, xread = out / "xcheck-fill.json", out / "xcheck-read.json"
    dbb = out / "db_bench.txt"
    if xfill.exists() and xread.exists() and dbb.exists():
        rates = db_bench_rates(dbb.read_text())
        ours = {
            "fillrandom": load(xfill)[0]["throughput_ops_per_sec"],
            "readrandom": load(xread)[0]["throughput_ops_per_sec"],
        }
        lines += ["", "Cross-check (one path on the fast tier): in-process RocksDB vs db_bench", "",
                  "| workload | in-process ops/s | db_bench ops/s | ratio |", "|---|---|---|---|"]
        for w, v in ours.items():
            d = rates.get(w)
            lines.append(f"| {w} | {v:.0f} | {d or '-'} | {v / d:.2f} |" if d else f"| {w} | {v:.0f} | - | - |")
    text = doc.read_text()
    new = "<!-- RESULTS -->\n" + "\n".join(lines) + "\n<!-- /RESULTS -->"
    text = re.sub(r"<!-- RESULTS -->.*?<!-- /RESULTS -->", new, text, flags=re.S)
    doc.write_text(text)


if __name__ == "__main__":
    main()
