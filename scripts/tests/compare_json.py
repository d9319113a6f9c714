"""The tests' shared way to call a `compare KERNEL.json LOWTIDE.json --json OUT`
subcommand (scripts/packetdrill-mutate, scripts/packetdrill-scenarios) on made-up
runner results and read what it wrote."""
import json
import os
import tempfile


def compare_runs(compare, kernel, lowtide):
    """Writes `kernel` and `lowtide` (lists of runner results) as the runner's JSON,
    runs `compare([k, l, "--json", out])` and returns the parsed `out`."""
    d = tempfile.mkdtemp()
    kf, lf, out = (os.path.join(d, n) for n in ("k.json", "l.json", "c.json"))
    for f, rs in ((kf, kernel), (lf, lowtide)):
        with open(f, "w") as fh:
            json.dump({"scripts": rs}, fh)
    compare([kf, lf, "--json", out])
    with open(out) as f:
        return json.load(f)
