#!/usr/bin/env python3
"""The "no behaviour change" guard (issue 14): a fixed set of simulator runs whose
results must not change when a commit only makes lowtide faster.

Each run's JSON is normalized (wall-clock fields, output paths and results.json's
provenance removed, keys
sorted, long lists replaced by their length and SHA-256) and compared field by field
with a reference: the committed files in tests/determinism/ (default), or the same
runs of another binary (--against-bin, which scripts/check-determinism.sh --against
COMMIT builds). A field present on one side only is reported but is no failure
(another branch may add output fields); a different value is. A pcap of one run is
compared by digest: every byte on the simulated wire, checksums included.

With --payload pattern every run is made in the simulator's pattern payload mode
(the sockets store no payload bytes) and compared with the same references, made in
the stored mode: every figure, the pcap's bytes included, must be the same (issue 26).

Usage: determinism.py --bin LOWTIDE [--update | --against-bin OTHER] [--refs DIR]
                      [--payload stored|pattern]
Exit 0: identical; 1: a difference (printed); 2: bad usage or a run failed to start.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

# (name, arguments). Short runs (about 6 s in all, release build) covering loss,
# bursty loss, reorder, jitter, duplication, corruption, several flows, GRO on/off,
# the three congestion controls, fixed-size transfers, the CPU model, the soak's
# randomized configurations and two seed experiments.
SIM = [
    ("loss", "--rate 1gbit --rtt 20ms --loss 1% --duration 3s"),
    ("impair", "--rate 1gbit --rtt 10ms --loss 0.5% --reorder 2% --jitter 200us "
               "--duplicate 0.5% --corrupt 0.3% --duration 1s"),
    ("flows8", "--flows 8 --rate 2gbit --rtt 5ms --loss 0.2% --loss-burst 3 --duration 1s"),
    ("10g", "--rate 10gbit --rtt 1ms --duration 0.3s"),
    ("bbr20", "--flows 20 --rate 10gbit --rtt 1ms --duration 0.2s --gro off --cc bbr"),
    ("bytes", "--bytes 2000000 --rtt 40ms --gro off --cc reno --loss 2% --loss-reverse 1%"),
    ("cpu", "--flows 4 --rate 1gbit --rtt 10ms --duration 1s --cpu-model --cc bbr --loss 1%"),
    ("lowat", "--flows 10 --rate 1gbit --rtt 5ms --duration 0.5s --notsent-lowat 128KiB "
              "--sysctl experimental.tsq=false"),
]
PCAP = ("pcap", "--rate 100mbit --rtt 5ms --loss 1% --reorder 1% --corrupt 0.5% "
                "--duplicate 0.5% --duration 0.5s")
SOAK = ("soak", "--runs 60 --seed 1")
EXPERIMENTS = ["e5", "e3"]

LONG_LIST = 50


def normalize(v):
    """Drops wall-clock fields, paths and provenance (machine, load, commit), sorts
    keys, digests long lists."""
    if isinstance(v, dict):
        return {k: normalize(x) for k, x in sorted(v.items())
                if "wall" not in k and k not in ("out", "provenance", "real_provenance")}
    if isinstance(v, list):
        items = [normalize(x) for x in v]
        if len(items) > LONG_LIST:
            text = json.dumps(items, sort_keys=True, separators=(",", ":"))
            return {"list_len": len(items),
                    "list_sha256": hashlib.sha256(text.encode()).hexdigest()}
        return items
    return v


def run(binary, args, what):
    p = subprocess.run([binary] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if p.returncode not in (0, 1) or not p.stdout.strip():
        sys.stderr.write(f"determinism: {what}: exit {p.returncode}: {p.stderr.strip()}\n")
        sys.exit(2)
    return json.loads(p.stdout)


def results(binary, tmp, payload=None):
    """Every run's normalized result, by name; `payload`: the runs' --payload."""
    os.makedirs(tmp, exist_ok=True)
    mode = ["--payload", payload] if payload else []
    out = {}
    for name, args in SIM:
        out[f"sim-{name}"] = normalize(run(binary, ["sim", "stream"] + args.split()
                                           + mode + ["--json"], name))
    name, args = PCAP
    pcap = os.path.join(tmp, "run.pcap")
    r = normalize(run(binary, ["sim", "stream"] + args.split() + mode
                      + ["--json", "--pcap", pcap], name))
    with open(pcap, "rb") as f:
        r["pcap_sha256"] = hashlib.sha256(f.read()).hexdigest()
    out[f"sim-{name}"] = r
    name, args = SOAK
    out["soak"] = normalize(run(binary, ["sim", "soak"] + args.split() + mode + ["--json"],
                                name))
    for e in EXPERIMENTS:
        d = os.path.join(tmp, e)
        summary = run(binary, ["experiment", e, "--quick", "--json", "--out", d] + mode, e)
        with open(os.path.join(d, "results.json")) as f:
            out[f"experiment-{e}"] = normalize({"summary": summary, "results": json.load(f)})
    return out


def diff(ref, now, path, errors, notes):
    if isinstance(ref, dict) and isinstance(now, dict):
        for k in sorted(set(ref) | set(now)):
            if k not in now:
                notes.append(f"{path}.{k}: only in the reference")
            elif k not in ref:
                notes.append(f"{path}.{k}: new field")
            else:
                diff(ref[k], now[k], f"{path}.{k}", errors, notes)
    elif isinstance(ref, list) and isinstance(now, list) and len(ref) == len(now):
        for i, (a, b) in enumerate(zip(ref, now)):
            diff(a, b, f"{path}[{i}]", errors, notes)
    elif ref != now:
        errors.append(f"{path}: {json.dumps(ref)[:200]} -> {json.dumps(now)[:200]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="the lowtide binary under test")
    ap.add_argument("--refs", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                   "determinism"))
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--update", action="store_true", help="rewrite the committed references")
    g.add_argument("--against-bin", help="compare with this binary's runs instead")
    ap.add_argument("--payload", choices=["stored", "pattern"],
                    help="the simulator's payload mode of the runs under test (the "
                         "references are the stored mode's)")
    a = ap.parse_args()
    if a.update and a.payload == "pattern":
        ap.error("the references are made in the stored mode")
    with tempfile.TemporaryDirectory() as tmp:
        now = results(a.bin, os.path.join(tmp, "now"), a.payload)
        if a.update:
            os.makedirs(a.refs, exist_ok=True)
            for name, r in now.items():
                with open(os.path.join(a.refs, name + ".json"), "w") as f:
                    json.dump(r, f, indent=1, sort_keys=True)
                    f.write("\n")
            print(f"determinism: {len(now)} references written to {a.refs}")
            return 0
        if a.against_bin:
            ref = results(a.against_bin, os.path.join(tmp, "ref"))
        else:
            ref = {}
            for name in now:
                try:
                    with open(os.path.join(a.refs, name + ".json")) as f:
                        ref[name] = json.load(f)
                except FileNotFoundError:
                    ref[name] = None
    errors, notes = [], []
    for name in now:
        if ref[name] is None:
            errors.append(f"{name}: no reference (run with --update)")
        else:
            diff(ref[name], now[name], name, errors, notes)
    for n in notes:
        print(f"note: {n}")
    for e in errors:
        print(f"DIFFERENT: {e}")
    if errors:
        print(f"determinism: {len(errors)} difference(s) in {len(now)} runs. If the change "
              "is meant to alter behaviour, say so in the commit and rewrite the references "
              "with scripts/check-determinism.sh --update.")
        return 1
    mode = f" in the {a.payload} payload mode" if a.payload else ""
    print(f"determinism: {len(now)} runs{mode} identical to the reference "
          f"({'binary ' + a.against_bin if a.against_bin else a.refs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
