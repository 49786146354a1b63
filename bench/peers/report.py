#!/usr/bin/env python3
"""Helper of bench/peers.sh: scenario preparation, fluid oracle, faultnet accounting, report.

  report.py prepare SCENARIO.toml LIVE.toml ORIGIN_BASE_PORT PROXY_BASE_PORT
      writes LIVE.toml (the scenario with listen/upstream per link) and prints shell
      assignments: SIZE (bytes), NLINKS, ORIGIN_RATE (serve's RATE arg or empty), ORACLE (s),
      DESCRIPTION, PROTOCOL (http, ftp or sftp: `# bench: protocol=ftp`; default http).
  report.py wire STATS.json
      prints "WIRE CONNS" (sum over links of bytes_down and connections_opened) then one
      "link name bytes_down connections_opened" per link.
  report.py report RESULTS_DIR
      prints the markdown tables (scenarios, wire, memory) from RESULTS_DIR.

Only the standard library (Python >= 3.11 for tomllib).
"""
import json
import os
import re
import shlex
import statistics
import sys
import tomllib

UNITS = {
    "": 1, "B": 1,
    "k": 1e3, "kB": 1e3, "K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9,
    "Ki": 1024, "KiB": 1024, "Mi": 1024**2, "MiB": 1024**2, "Gi": 1024**3, "GiB": 1024**3,
}


def size(s):
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", str(s))
    if not m or m.group(2) not in UNITS:
        raise ValueError(f"bad size {s!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def rate(s):
    return size(str(s).split("/")[0])  # "4MB/s" -> bytes per second


def dur(s):
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ms|s|us)\s*", str(s))
    if not m:
        raise ValueError(f"bad duration {s!r}")
    return float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "us": 1e-6}[m.group(2)]


def bench_meta(path):
    """`# bench: key=value ...` comment lines (the scenario model rejects unknown keys)."""
    meta = {}
    with open(path) as f:
        for line in f:
            if line.startswith("# bench:"):
                for kv in line[len("# bench:"):].split():
                    k, _, v = kv.partition("=")
                    meta[k] = v
    return meta


def oracle(sc):
    """Fluid oracle: one round trip (the smallest link's) plus the time to deliver the object
    at the sum of link capacities, following the capacity trajectory the events script."""
    S = size(sc["object_size"])
    links = {l["name"]: rate(l["capacity"]) for l in sc["link"]}
    nominal = dict(links)
    rtt = min(2 * dur(l.get("delay", "0ms")) for l in sc["link"])
    pending = []
    for e in sc.get("event", []):
        pending.append(e)
    t, done = 0.0, 0.0
    for _ in range(1000):
        total = sum(links.values())
        # next event: time until it fires at the current trajectory
        best, best_dt = None, float("inf")
        for e in pending:
            if "at_time" in e:
                dt = max(0.0, dur(e["at_time"]) - t)
            elif "at_progress" in e:
                dt = max(0.0, e["at_progress"] * S - done) / total if total > 0 else float("inf")
            elif "at_bytes" in e:
                # fluid: the link runs at its capacity; bytes on it so far ~ its share of done
                c = links[e["link"]]
                got = done * c / total if total > 0 else 0.0
                dt = max(0.0, size(e["at_bytes"]) - got) / c if c > 0 else float("inf")
            else:
                dt = float("inf")
            if dt < best_dt:
                best, best_dt = e, dt
        finish_dt = (S - done) / total if total > 0 else float("inf")
        if best is None or finish_dt <= best_dt:
            return rtt + t + finish_dt
        t += best_dt
        done += best_dt * total
        pending.remove(best)
        kind = best["kind"]
        if kind == "collapse" and best.get("target", "link") == "link":
            links[best["link"]] = nominal[best["link"]] * best["fraction"]
        elif kind == "restore":
            links[best["link"]] = nominal[best["link"]]
        elif kind in ("die", "refuse_new"):
            if kind == "die":
                links[best["link"]] = 0.0
        elif kind == "stall":
            # nothing on that link for the duration: approximate as lost capacity
            done -= links[best["link"]] * dur(best["duration"])
    raise SystemExit("oracle: no convergence")


def prepare(scen, live, obase, pbase):
    with open(scen, "rb") as f:
        sc = tomllib.load(f)
    meta = bench_meta(scen)
    obase, pbase = int(obase), int(pbase)
    out = []
    with open(scen) as f:
        text = f.read()
    # add listen/upstream to every [[link]] table, in order
    i = 0
    for line in text.splitlines():
        out.append(line)
        if line.strip() == "[[link]]":
            out.append(f'listen = "127.0.0.1:{pbase + i}"')
            out.append(f'upstream = "127.0.0.1:{obase + i}"')
            i += 1
    with open(live, "w") as f:
        f.write("\n".join(out) + "\n")
    S = int(size(sc["object_size"]))
    print(f"SIZE={S}")
    print(f"NLINKS={len(sc['link'])}")
    print(f"ORIGIN_RATE={shlex.quote(meta.get('origin_rate', ''))}")
    print(f"ORACLE={oracle(sc):.4f}")
    print(f"DESCRIPTION={shlex.quote(sc.get('description', ''))}")
    proto = meta.get("protocol", "http")
    if proto not in ("http", "ftp", "sftp"):
        raise SystemExit(f"{scen}: protocol {proto!r} is not http, ftp or sftp")
    if proto != "http" and meta.get("origin_rate"):
        raise SystemExit(f"{scen}: origin_rate is HTTP only (use a bandwidth toxic)")
    print(f"PROTOCOL={proto}")


def wire(stats):
    with open(stats) as f:
        d = json.load(f)
    links = d["links"] if isinstance(d, dict) and "links" in d else d
    if isinstance(links, dict):
        links = [dict(v, name=k) for k, v in links.items()]
    tot, conns, rows = 0, 0, []
    for l in links:
        b = int(l.get("bytes_down", 0))
        c = int(l.get("connections_opened", l.get("connections", 0)))
        tot += b
        conns += c
        rows.append(f"link {l.get('name', '?')} {b} {c}")
    print(tot, conns)
    print("\n".join(rows))


def fmt_s(x):
    return f"{x:.2f}"


def fmt_mb(b):
    return f"{b / 1e6:.2f}"


def read_tsv(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            rows.append(line.rstrip("\n").split("\t"))
    return rows


def report(d):
    meta = {r[0]: r[1:] for r in read_tsv(os.path.join(d, "scenarios.tsv"))}
    runs = read_tsv(os.path.join(d, "runs.tsv"))
    cmds = read_tsv(os.path.join(d, "commands.tsv"))
    order_s, order_t = [], []
    for r in runs:
        if r[0] not in order_s:
            order_s.append(r[0])
        if r[1] not in order_t:
            order_t.append(r[1])
    print("## Wall time (median over repetitions) against the fluid oracle\n")
    print("Cells: median wall s (min–max) · ratio to hydra's median. `dnf` = killed by the"
          " timeout; `fail` = non-zero exit; `bad` = wrong sha256. A median is given only"
          " when every repetition ended byte-exact.\n")
    head = "| scenario | oracle s | " + " | ".join(order_t) + " |"
    print(head)
    print("|" + "---|" * (2 + len(order_t)))
    med = {}
    for s in order_s:
        size_b, oracle_s = int(meta[s][0]), float(meta[s][1])
        cells = []
        for t in order_t:
            rs = [r for r in runs if r[0] == s and r[1] == t]
            ok = [float(r[4]) for r in rs if r[3] == "ok"]
            if rs and len(ok) == len(rs):
                med[(s, t)] = statistics.median(ok)
        h = med.get((s, "hydra"))
        for t in order_t:
            rs = [r for r in runs if r[0] == s and r[1] == t]
            if not rs:
                cells.append("—")
                continue
            ok = [float(r[4]) for r in rs if r[3] == "ok"]
            bad = [r[3] for r in rs if r[3] != "ok"]
            if (s, t) in med:
                m = med[(s, t)]
                c = f"{fmt_s(m)} ({fmt_s(min(ok))}–{fmt_s(max(ok))})"
                c += f" · {m / oracle_s:.3f}× oracle"
                if h and t != "hydra":
                    c += f" · {m / h:.2f}× hydra"
                cells.append(c)
            else:
                tag = ", ".join(sorted(set(bad)))
                c = f"{tag} {len(bad)}/{len(rs)}"
                if ok:
                    c += f" (ok runs: {', '.join(fmt_s(x) for x in ok)} s)"
                cells.append(c)
        print(f"| {s} | {fmt_s(oracle_s)} | " + " | ".join(cells) + " |")
    print()
    print("## Wire bytes (sum of bytes_down over faultnet links, median) and waste\n")
    print("Waste = wire bytes − object size (response headers, bytes past a lowered bound,"
          " duplicated ranges, probes). Connections = connections opened across the links"
          " (median).\n")
    print("| scenario | object bytes | " + " | ".join(order_t) + " |")
    print("|" + "---|" * (2 + len(order_t)))
    for s in order_s:
        size_b = int(meta[s][0])
        cells = []
        for t in order_t:
            rs = [r for r in runs if r[0] == s and r[1] == t and r[3] == "ok"]
            if not rs:
                cells.append("—")
                continue
            w = statistics.median(int(r[5]) for r in rs)
            c = statistics.median(int(r[6]) for r in rs)
            cells.append(f"{int(w):,} (+{int(w - size_b):,}) · {c:g} conn".replace(",", " "))
        print(f"| {s} | {size_b:,} | ".replace(",", " ") + " | ".join(cells) + " |")
    print()
    print("## hydra's own account (`--summary-json`), per repetition\n")
    print("| scenario | rep | elapsed s | requests | repairs | admissions | waste B |"
          " bytes per source | limit_reason per source |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s, tool in [(s, t) for s in order_s for t in ("hydra", "hydra-warm")]:
        raw = os.path.join(d, "raw", s)
        label = s if tool == "hydra" else f"{s} (warm)"
        for rep in range(1, 100):
            p = os.path.join(raw, f"{tool}-{rep}.summary.json")
            if not os.path.exists(p):
                if rep > 1:
                    break
                continue
            with open(p) as f:
                j = json.load(f)
            srcs = j.get("sources", [])
            by = " / ".join(f"{x['bytes']:,}".replace(",", " ") for x in srcs)
            why = " / ".join(x.get("limit_reason", "") + (f" ({x['failures']} failures)" if x.get("failures") else "") for x in srcs)
            print(f"| {label} | {rep} | {j.get('elapsed_s', 0):.2f} | {j.get('requests')} |"
                  f" {j.get('repairs')} | {j.get('admissions')} | {j.get('waste_bytes')} |"
                  f" {by} | {why} |")
    print()
    mem = read_tsv(os.path.join(d, "memory.tsv"))
    if mem:
        sizes = []
        for r in mem:
            if r[0] not in sizes:
                sizes.append(r[0])
        tools = []
        for r in mem:
            if r[1] not in tools:
                tools.append(r[1])
        print("## Peak RSS, unshaped loopback (`/usr/bin/time -v`), one run each\n")
        print("Cells: peak RSS MB · wall s.\n")
        print("| object | " + " | ".join(tools) + " |")
        print("|" + "---|" * (1 + len(tools)))
        for sz in sizes:
            cells = []
            for t in tools:
                rs = [r for r in mem if r[0] == sz and r[1] == t]
                if not rs:
                    cells.append("—")
                    continue
                r = rs[0]
                if r[2] != "ok":
                    cells.append(r[2])
                else:
                    cells.append(f"{int(r[3]) / 1024:.1f} MB · {float(r[4]):.2f} s")
            print(f"| {sz} | " + " | ".join(cells) + " |")
        print()
    if cmds:
        print("## Command lines\n")
        seen = set()
        for r in cmds:
            key = (r[0], r[1])
            if key in seen:
                continue
            seen.add(key)
            print(f"- {r[0]}, {r[1]}: `{r[2]}`")
        print()
    notes = read_tsv(os.path.join(d, "notes.tsv"))
    if notes:
        print("## Notes from the run\n")
        for r in notes:
            print("- " + " ".join(r))
        print()


def main():
    a = sys.argv[1:]
    if a[:1] == ["prepare"] and len(a) == 5:
        prepare(*a[1:])
    elif a[:1] == ["wire"] and len(a) == 2:
        wire(a[1])
    elif a[:1] == ["report"] and len(a) == 2:
        report(a[1])
    elif a[:1] == ["oracle"] and len(a) == 2:
        with open(a[1], "rb") as f:
            print(f"{oracle(tomllib.load(f)):.4f}")
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
