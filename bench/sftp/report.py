#!/usr/bin/env python3
"""Helper of bench/sftp-openssh.sh.

  report.py object SIZE_BYTES PATH
      writes SIZE_BYTES of deterministic, incompressible content (SHAKE-128 of a fixed seed).
  report.py wire STATS.json
      prints "BYTES_DOWN BYTES_UP CONNECTIONS" summed over the proxy's links.
  report.py calib SFTP_VVV_LOG
      prints "READ_LEN MAX_OUTSTANDING" seen in OpenSSH sftp's debug3 "Request range" lines.
  report.py report RESULTS_DIR
      prints the markdown table and ratios from RESULTS_DIR/runs.tsv and meta.tsv.

Only the standard library.
"""
import hashlib
import json
import re
import statistics
import sys

MIB = 1024 * 1024


def obj(size, path):
    with open(path, "wb") as f:
        f.write(hashlib.shake_128(b"hydra sftp bench object").digest(size))


def wire(path):
    with open(path) as f:
        d = json.load(f)
    links = d["links"] if isinstance(d, dict) and "links" in d else d
    if isinstance(links, dict):
        links = list(links.values())
    down = sum(int(l.get("bytes_down", 0)) for l in links)
    up = sum(int(l.get("bytes_up", 0)) for l in links)
    conns = sum(int(l.get("connections_opened", 0)) for l in links)
    print(down, up, conns)


def calib(path):
    pat = re.compile(r"Request range (\d+) -> (\d+) \((\d+)/(\d+)\)")
    lens, outstanding = [], 0
    with open(path, errors="replace") as f:
        for line in f:
            m = pat.search(line)
            if m:
                lens.append(int(m.group(2)) - int(m.group(1)) + 1)
                outstanding = max(outstanding, int(m.group(3)) + 1)
    print(max(lens) if lens else 0, outstanding)


def read_tsv(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            rows.append(line.rstrip("\n").split("\t"))
    return rows


def report(d):
    meta = dict((r[0], r[1]) for r in read_tsv(f"{d}/meta.tsv"))
    arms = [(r[0], r[1]) for r in read_tsv(f"{d}/arms.tsv")]
    size = int(meta["size"])
    runs = {}
    for arm, rep, status, wall, down, up, conns, cipher in read_tsv(f"{d}/runs.tsv"):
        runs.setdefault(arm, []).append(
            dict(status=status, wall=float(wall), down=int(down), up=int(up),
                 conns=int(conns), cipher=cipher))
    med = {}
    for arm, _ in arms:
        ok = [r["wall"] for r in runs.get(arm, []) if r["status"] == "ok"]
        if ok:
            med[arm] = statistics.median(ok)
    base = med.get("sftp")
    print(f"Object {size / MIB:.0f} MiB; link {meta['rate']} each way (one bottleneck per "
          f"direction, shared by all connections), {meta['latency']} one-way delay "
          f"(RTT {2 * float(meta['latency_ms']):.0f} ms); fluid oracle (one RTT + size / "
          f"capacity) {float(meta['oracle']):.2f} s = {size / MIB / float(meta['oracle']):.2f} "
          f"MiB/s. Median of {meta['reps']} runs, arms rotated every repetition.")
    print()
    print("| arm | command | ok | wall s, median (min–max) | MiB/s | × `sftp` default | "
          "× oracle | wire down MB | conns |")
    print("|---|---|---|---|---|---|---|---|---|")
    for arm, what in arms:
        rs = runs.get(arm, [])
        ok = [r for r in rs if r["status"] == "ok"]
        if not ok:
            bad = ",".join(sorted({r["status"] for r in rs})) or "not run"
            print(f"| {arm} | {what} | 0/{len(rs)} ({bad}) | – | – | – | – | – | – |")
            continue
        walls = [r["wall"] for r in ok]
        m = med[arm]
        downs = statistics.median(r["down"] for r in ok)
        conns = "/".join(str(c) for c in sorted({r["conns"] for r in ok}))
        rel = f"{base / m:.2f}" if base else "–"
        print(f"| {arm} | {what} | {len(ok)}/{len(rs)} | {m:.2f} ({min(walls):.2f}–"
              f"{max(walls):.2f}) | {size / MIB / m:.2f} | {rel} | "
              f"{m / float(meta['oracle']):.2f} | {downs / 1e6:.1f} | {conns} |")
    print()
    pairs = [
        ("sftp", "sftp-R1", "OpenSSH sftp: pipelining gain (64 requests over 1)"),
        ("lib-default", "lib-w1", "hydra's SFTP scheme, one session: pipelining gain "
         "(adaptive 16..64 over 1)"),
        ("hydra", "sftp", "`hydra get` over OpenSSH `sftp`"),
        ("hydra-1conn", "sftp", "`hydra get --fixed-connections 1` over OpenSSH `sftp`"),
        ("lib-w1", "sftp-R1", "one read at a time: hydra's scheme over OpenSSH `sftp -R 1`"),
    ]
    print("| ratio of throughputs | |")
    print("|---|---|")
    for a, b, what in pairs:
        if a in med and b in med:
            print(f"| {what} | {med[b] / med[a]:.2f}× |")
    ciphers = sorted({r["cipher"] for rs in runs.values() for r in rs if r["cipher"]})
    print()
    print(f"Negotiated (sshd log): {'; '.join(ciphers) if ciphers else 'unknown'}. "
          f"OpenSSH `sftp` as measured unshaped with -vvv: reads of {meta.get('sftp_read', '?')} "
          f"bytes, up to {meta.get('sftp_outstanding', '?')} outstanding.")


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "object":
        obj(int(sys.argv[2]), sys.argv[3])
    elif cmd == "wire":
        wire(sys.argv[2])
    elif cmd == "calib":
        calib(sys.argv[2])
    elif cmd == "report":
        report(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
