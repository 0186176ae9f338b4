#!/usr/bin/env python3
"""Summarises scripts/bench-prismdb.sh's JSON reports (named PREFIX<share>-<workload>...) as the Markdown table in BENCHMARKS.md:
per budget and workload, each engine's throughput, p99, capacity-tier bytes written per user
byte, write stalls, and the ratios the PrismDB targets name.

    scripts/prismdb-table.py OUT_DIR

PREFIX (the reports' name prefix) and SPANDB_FAST (as given to bench-prismdb.sh, for the
SpanDB row's label) come from the environment.
"""
import json
import re
import os
import sys


def records(path):
    with open(path) as f:
        data = json.load(f)
    data = data if isinstance(data, list) else [data]
    # Reports written before the JSON carried the run phase's figure: read it from the text.
    text = path[: -len(".json")] + ".txt"
    if os.path.exists(text):
        alone = re.findall(r"run phase alone: ([^)]*)\)", open(text).read())
        for r, line in zip(data, alone):
            for name, value in re.findall(r"(\w+) ([0-9.]+)", line):
                r["tiers"][name].setdefault("run_written_per_user_byte", float(value))
    return data


def capacity_per_user_byte(r, key="written_per_user_byte"):
    # A run phase without writes (ycsb-c) has no user bytes to divide by.
    writes = set(r["latency_us"]) - {"all", "read", "scan"}
    if key == "run_written_per_user_byte" and not writes:
        return "-"
    # A one-tier run on the fast tier writes nothing to the capacity tier.
    cap = r["tiers"].get("capacity")
    if not cap:
        return "0.00"
    return f"{cap[key]:.2f}" if key in cap else "-"


def label(r, suffix):
    if suffix == "spandb":
        cap = os.environ.get("SPANDB_FAST")
        fast = f"fast tier capped at {cap} B" if cap else "fast tier uncapped"
        return f"tierkv:parallel (SpanDB, {fast})"
    if suffix:
        return f"rocksdb wholly on {suffix}"
    return {"rocksdb": "rocksdb spread (LAD-2)"}.get(r["engine"], r["engine"])


# Each report kind's label suffix and file-name tail (see bench-prismdb.sh).
SUFFIXES = (
    ("", ""),
    ("spandb", "-spandb"),
    ("fast", "-rocksdb-fast"),
    ("capacity", "-rocksdb-capacity"),
)


def share_workload_names(out):
    """(share, workload, suffix, report path) of every report present, in table order."""
    for share in ("20", "10"):
        for w in ("ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-f"):
            for suffix, tail in SUFFIXES:
                name = f"{share}-{w}{tail}"
                path = os.path.join(out, os.environ.get("PREFIX", "") + name + ".json")
                if os.path.exists(path):
                    yield share, w, suffix, path


def main(out):
    print(
        "| budget | workload | engine | ops/s | p99 us | capacity B/user B, load+run "
        "| capacity B/user B, run | stalls s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for share, w, suffix, path in share_workload_names(out):
        for r in records(path):
            print(
                f"| {share}% | {w} | {label(r, suffix)} "
                f"| {r['throughput_ops_per_sec']:.0f} "
                f"| {r['latency_us']['all']['p99']:.0f} "
                f"| {capacity_per_user_byte(r)} "
                f"| {capacity_per_user_byte(r, 'run_written_per_user_byte')} "
                f"| {r.get('stall_seconds') or 0:.1f} |"
            )


if __name__ == "__main__":
    main(sys.argv[1])
