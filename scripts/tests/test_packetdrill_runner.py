#!/usr/bin/env python3
"""Tests of scripts/packetdrill (the runner), with a fake packetdrill and no shared object.

The fake packetdrill does what the real one does with a script's backtick blocks (the
first runs with /bin/sh before the script, the last after it, with PACKETDRILL_PID set,
from the current folder) and then obeys `// fake:` lines: `fail N MESSAGE` prints
packetdrill's error format for line N and exits 1 (`failin MODE N MESSAGE` only in
that IP mode), `hang` sleeps, `expect PATH=VALUE` checks the sysctl mirror
(`sysctl_dir=` of --so_flags), `device FILE=VALUE` the device directory (`device_dir=`;
VALUE `-` for no file) and `report LINE` appends to the report file as lowtide's
shared object does. It checks that its arguments are one IP mode's, as upstream's
run_all.py passes them. So these tests check the runner's own work: discovery, IP
modes, folders, namespaces and shims, reasons, JSON, exit codes.

Run: python3 scripts/tests/test_packetdrill_runner.py. Needs root or unprivileged user
namespaces; skips otherwise, and fails instead with LOWTIDE_REQUIRE_PRIVILEGED_TESTS=1.
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.realpath(__file__))
RUNNER = os.path.join(os.path.dirname(HERE), "packetdrill")
RATCHET = os.path.join(os.path.dirname(HERE), "packetdrill-ratchet")

FAKE_PACKETDRILL = r'''#!/usr/bin/env python3
import os, re, subprocess, sys, time
args = sys.argv[1:]
script = args[-1]
flags = dict(kv.split("=", 1) for a in args if a.startswith("--so_flags=")
             for kv in a[len("--so_flags="):].split())
mode = next(a.split("=", 1)[1] for a in args if a.startswith("--ip_version="))
v6 = mode == "ipv6"
want = {
    "--local_ip=" + ("fd3d:0a0b:17d6::1" if v6 else "192.168.0.1"),
    "--remote_ip=" + ("fd3d:fa7b:d17d::1" if v6 else "192.0.2.1"),
    "TFO_COOKIE=" + ("c1d1e9742a47a9bc" if v6 else "3021b9d889017eeb"),
    "TFO_COOKIE_ZERO=" + ("82af1a8f9a205c34" if v6 else "b7c12350a90dc8f5"),
    "CMSG_LEVEL_IP=" + ("SOL_IP" if mode == "ipv4" else "SOL_IPV6"),
    "CMSG_TYPE_RECVERR=" + ("IP_RECVERR" if mode == "ipv4" else "IPV6_RECVERR"),
    "--send_omit_free",
}
if v6:
    want.add("--mtu=1520")
missing = want - set(args)
assert not missing, (mode, missing, args)
assert flags["local_ip"] == ("fd3d:0a0b:17d6::1" if v6 else "192.168.0.1"), flags
assert open(os.path.join(flags["device_dir"], "mtu")).read().strip() == ("1520" if v6 else "1500")
assert os.path.isfile(args[[a.startswith("--so_filename=") for a in args].index(True)].split("=", 1)[1])
text = open(script).read()
blocks = re.findall(r"`([^`]*)`", text)
env = dict(os.environ, PACKETDRILL_PID=str(os.getpid()))
def sh(cmd, what):
    r = subprocess.run(["/bin/sh", "-c", cmd], env=env)
    if r.returncode != 0:
        print(f"{script}: error executing {what} command: non-zero status {r.returncode}", file=sys.stderr)
        sys.exit(1)
if blocks:
    sh(blocks[0], "init")
status = 0
for n, line in enumerate(text.splitlines(), 1):
    m = re.match(r"\s*// fake: (\w+) ?(.*)", line)
    if not m:
        continue
    verb, rest = m.groups()
    if verb == "fail":
        num, msg = rest.split(" ", 1)
        print(f"{script}:{num}: warning handling packet: a warning first", file=sys.stderr)
        print(f"{script}:{num}: {msg}", file=sys.stderr)
        print("script packet:  0.100 . 1:1(0) ack 1", file=sys.stderr)
        status = 1
        break
    if verb == "pyfail":
        print(f"{script}:{n}: error in Python code", file=sys.stderr)
        print("Traceback (most recent call last):", file=sys.stderr)
        print('  File "/tmp/code_x", line 3, in <module>', file=sys.stderr)
        print("AssertionError: 36", file=sys.stderr)
        print(f"{script}: error executing code: 'python3' returned non-zero status 1", file=sys.stderr)
        status = 1
        break
    if verb == "failin":
        m, num, msg = rest.split(" ", 2)
        if m == mode:
            print(f"{script}:{num}: {msg}", file=sys.stderr)
            status = 1
            break
    if verb == "device":
        name, want = rest.split("=", 1)
        path = os.path.join(flags["device_dir"], name)
        got = open(path).read().strip() if os.path.exists(path) else "-"
        if got != want:
            print(f"{script}:{n}: device {name}: expected {want!r} got {got!r}", file=sys.stderr)
            status = 1
            break
    if verb == "hang":
        time.sleep(600)
    if verb == "expect":
        name, want = rest.split("=", 1)
        got = open(os.path.join(flags["sysctl_dir"], name)).read().strip()
        if got != want:
            print(f"{script}:{n}: sysctl {name}: expected {want!r} got {got!r}", file=sys.stderr)
            status = 1
            break
    if verb == "report":
        with open(flags["report"], "a") as f:
            f.write(rest + "\n" + rest + "\n")
if len(blocks) > 1:
    sh(blocks[-1], "cleanup")
sys.exit(status)
'''

DEFAULTS_SH = """#!/bin/sh
ip tcp_metrics flush all > /dev/null 2>&1
sysctl -q net.ipv4.tcp_rmem="4096 540000 $((15*1024*1024))"
sysctl -q net.ipv4.tcp_early_retrans=4 net.ipv4.tcp_recovery=1
sysctl -q net/ipv4/tcp_pacing_ss_ratio=250
sysctl -w net.ipv4.tcp_fack=0
sysctl -e -q net.ipv4.lowtide_no_such_name
test "$(sysctl -n net.ipv4.tcp_recovery)" = 1
test "$(sysctl net.ipv4.tcp_early_retrans)" = "net.ipv4.tcp_early_retrans = 4"
! sysctl net.ipv4.lowtide_no_such_name 2>/dev/null
tc qdisc add dev tun0 root pfifo
"""

# What Linux's tcp/common/set_sysctls.py does: read the value, write a restore file in
# /tmp named after PACKETDRILL_PID, then `echo > file`.
SET_SYSCTLS = """#!/bin/sh
r=/tmp/sysctl_restore_$PACKETDRILL_PID.sh
echo '#!/bin/sh' > $r
for a in "$@"; do
  f=${a%%=*}; v=${a#*=}
  echo "echo \\"$(cat $f)\\" > $f" >> $r || exit 1
  echo "$v" > $f
done
chmod u+x $r
"""


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    os.chmod(path, mode)


class RunnerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="lowtide-pd-test-")
        t = self.tmp.name
        self.fake = os.path.join(t, "bin", "packetdrill")
        write(self.fake, FAKE_PACKETDRILL, 0o755)
        self.so = os.path.join(t, "bin", "liblowtide_packetdrill.so")
        write(self.so, "not a real shared object\n")
        self.suite = os.path.join(t, "suite")
        write(os.path.join(self.suite, "common", "defaults.sh"), DEFAULTS_SH, 0o755)
        write(os.path.join(self.suite, "tcp", "common", "set_sysctls.sh"), SET_SYSCTLS, 0o755)
        self.probe = f"lowtide_probe_{uuid.uuid4().hex[:8]}"

    def tearDown(self):
        self.tmp.cleanup()

    def run_runner(self, *args, timeout="20"):
        env = dict(os.environ, PACKETDRILL=self.fake, LOWTIDE_PACKETDRILL_SO=self.so,
                   LOWTIDE_PACKETDRILL_TIMEOUT=timeout)
        r = subprocess.run([sys.executable, RUNNER, *args], capture_output=True, text=True, env=env)
        if "cannot make a private mount and network namespace" in r.stderr:
            if os.environ.get("LOWTIDE_REQUIRE_PRIVILEGED_TESTS") == "1":
                self.fail(r.stderr)
            self.skipTest("skipping: needs root or user namespaces: " + r.stderr.strip())
        return r

    def pkt(self, rel, body):
        write(os.path.join(self.suite, rel), body)
        return os.path.join(self.suite, rel)

    def test_backticks_act_on_the_mirror_and_results_are_reported(self):
        p = self.probe
        self.pkt("tcp/a/pass.pkt", f"""\
            `../../common/defaults.sh
            ../common/set_sysctls.sh /proc/sys/net/ipv4/tcp_wmem="4096 50000 4194304" /proc/sys/net/ipv4/tcp_min_tso_segs=10
            echo 7 > /proc/sys/net/ipv4/{p}
            echo 1 > /sys/module/tcp_cubic/parameters/{p}
            echo 3 > /sys/module/tcp_cubic/parameters/hystart_detect
            tc qdisc replace dev tun0 root handle 1: fq limit 100
            tc qdisc add dev eth0 root netem delay 10ms`
            // fake: expect net/ipv4/tcp_rmem=4096 540000 15728640
            // fake: expect net/ipv4/tcp_early_retrans=4
            // fake: expect net/ipv4/tcp_pacing_ss_ratio=250
            // fake: expect net/ipv4/tcp_fack=0
            // fake: expect net/ipv4/tcp_wmem=4096 50000 4194304
            // fake: expect net/ipv4/tcp_min_tso_segs=10
            // fake: expect net/ipv4/{p}=7
            // fake: expect module/tcp_cubic/parameters/hystart_detect=3
            // fake: expect net/core/default_qdisc=fq
            // fake: report unknown sysctl net.ipv4.tcp_fack=0
            `/tmp/sysctl_restore_${{PPID}}.sh`
            """)
        self.pkt("tcp/a/fail.pkt", """\
            `../../common/defaults.sh`
            0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
            +0 write(3, ..., 10) = 10
            // fake: fail 3 runtime error in write call: Expected result 10 but got -1 with errno 11
            """)
        self.pkt("tcp/b/hang.pkt", "// fake: hang\n")
        self.pkt("tcp/b/py.pkt", "+0 %{ assert tcpi_snd_cwnd == 40, tcpi_snd_cwnd }%\n// fake: pyfail\n")
        out = os.path.join(self.tmp.name, "out.json")
        started = time.time()
        r = self.run_runner("--json", out, "--jobs", "2", "--ip-mode", "ipv4", self.suite, timeout="3")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        with open(out) as f:
            doc = json.load(f)
        self.assertEqual((doc["total"], doc["passed"]), (4, 1))
        self.assertEqual(doc["modes"], {"ipv4": {"passed": 1, "total": 4}})
        self.assertEqual({s["mode"] for s in doc["scripts"]}, {"ipv4"})
        by = {os.path.basename(s["path"]): s for s in doc["scripts"]}
        ok = by["pass.pkt"]
        self.assertEqual(ok["result"], "pass", ok)
        self.assertIsNone(ok["reason"])
        self.assertEqual(ok["sysctl_notes"], ["unknown sysctl net.ipv4.tcp_fack=0"])
        self.assertIn("tc qdisc add dev tun0 root pfifo", ok["commands"])
        self.assertIn("ip tcp_metrics flush all", ok["commands"])
        bad = by["fail.pkt"]
        self.assertEqual(bad["result"], "fail")
        self.assertEqual(bad["line"], 3)
        self.assertEqual(
            bad["reason"],
            "line 3 `+0 write(3, ..., 10) = 10`: runtime error in write call: Expected result 10 "
            "but got -1 with errno 11 (script packet:  0.100 . 1:1(0) ack 1)",
        )
        self.assertIn("timed out after 3 s", by["hang.pkt"]["reason"])
        self.assertEqual(by["py.pkt"]["reason"], "line 2 `// fake: pyfail`: error in Python code (AssertionError: 36)")
        # The table says what the JSON says.
        for s in doc["scripts"]:
            row = next(l for l in r.stdout.splitlines() if l.startswith(s["path"] + " "))
            self.assertIn(s["result"], row.split())
            self.assertTrue(row.rstrip().endswith(s["reason"] or s["result"]), row)
        self.assertIn("sysctl: unknown sysctl net.ipv4.tcp_fack=0", r.stdout)
        self.assertIn("passed 1/4", r.stdout)
        self.assertIn("ipv4: passed 1/4", r.stdout)
        # Nothing reached the host.
        self.assertFalse(os.path.exists(f"/proc/sys/net/ipv4/{p}"))
        self.assertFalse(os.path.exists(f"/sys/module/tcp_cubic/parameters/{p}"))
        # set_sysctls' restore files of this run were removed.
        left = [f for f in os.listdir("/tmp") if f.startswith("sysctl_restore_")
                and os.path.getmtime(os.path.join("/tmp", f)) >= started]
        self.assertEqual(left, [])

    def test_single_file_all_pass_exit_0(self):
        f = self.pkt("tcp/one.pkt", "`../common/defaults.sh`\n// fake: expect net/core/default_qdisc=pfifo\n")
        r = self.run_runner(f)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for m in ("ipv4", "ipv4-mapped-ipv6", "ipv6"):
            self.assertIn(f"{m}: passed 1/1", r.stdout)
        self.assertIn("passed 3/3", r.stdout)

    def test_three_ip_modes_and_family_names(self):
        self.pkt("tcp/m/all.pkt", "// fake: failin ipv6 1 boom in ipv6\n")
        self.pkt("tcp/m/only-v4.pkt", "")
        self.pkt("tcp/m/only-v6.pkt", "")
        out = os.path.join(self.tmp.name, "out.json")
        r = self.run_runner("--json", out, "--jobs", "2", os.path.join(self.suite, "tcp", "m"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        with open(out) as f:
            doc = json.load(f)
        runs = sorted((os.path.basename(s["path"]), s["mode"], s["result"]) for s in doc["scripts"])
        self.assertEqual(runs, [
            ("all.pkt", "ipv4", "pass"), ("all.pkt", "ipv4-mapped-ipv6", "pass"), ("all.pkt", "ipv6", "fail"),
            ("only-v4.pkt", "ipv4", "pass"), ("only-v4.pkt", "ipv4-mapped-ipv6", "pass"),
            ("only-v6.pkt", "ipv6", "pass"),
        ])
        self.assertEqual(doc["modes"], {"ipv4": {"passed": 2, "total": 2},
                                        "ipv4-mapped-ipv6": {"passed": 2, "total": 2},
                                        "ipv6": {"passed": 1, "total": 2}})
        self.assertRegex(r.stdout, r"tcp/m/all.pkt\s+ipv6\s+fail\s+line 1 `// fake: failin ipv6 1 boom in ipv6`: boom in ipv6")
        self.assertIn("ipv6: passed 1/2", r.stdout)
        r = self.run_runner("--ip-mode", "ipv4-mapped-ipv6", os.path.join(self.suite, "tcp", "m"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ipv4-mapped-ipv6: passed 2/2", r.stdout)
        self.assertNotRegex(r.stdout, r"(?m)^ipv6:")

    def test_device_shims(self):
        self.pkt("tcp/d/on.pkt", """\
            `ip link set dev tun0 mtu 1400
            ip link set dev eth0 mtu 900
            tc qdisc add dev tun0 root pfifo limit 0
            ethtool -K tun0 gso off
            ethtool -K eth0 tso off`
            // fake: device mtu=1400
            // fake: device tx_queue_limit=0
            // fake: device features=gso off
            // fake: expect net/core/default_qdisc=pfifo
            """)
        self.pkt("tcp/d/off.pkt", """\
            `tc qdisc add dev tun0 root pfifo limit 0
            tc qdisc replace dev tun0 root fq`
            // fake: device tx_queue_limit=-
            // fake: device features=-
            """)
        self.pkt("tcp/d/badmtu.pkt", "`ip link set tun0 mtu 20`\n")
        out = os.path.join(self.tmp.name, "out.json")
        r = self.run_runner("--json", out, "--ip-mode", "ipv4", os.path.join(self.suite, "tcp", "d"))
        with open(out) as f:
            by = {os.path.basename(s["path"]): s for s in json.load(f)["scripts"]}
        self.assertEqual(by["on.pkt"]["result"], "pass", by["on.pkt"])
        self.assertIn("ethtool -K tun0 gso off", by["on.pkt"]["commands"])
        self.assertEqual(by["off.pkt"]["result"], "pass", by["off.pkt"])
        self.assertEqual(by["badmtu.pkt"]["result"], "fail")
        self.assertIn("error executing init command", by["badmtu.pkt"]["reason"])
        self.assertIn("mtu less than device minimum", by["badmtu.pkt"]["reason"])

    def test_failing_init_command_is_explained(self):
        f = self.pkt("tcp/x/init.pkt", "`cat /proc/sys/net/ipv4/lowtide_unknown_name`\n")
        r = self.run_runner(f)
        self.assertEqual(r.returncode, 1)
        self.assertIn("error executing init command: non-zero status 1", r.stdout)
        self.assertIn("lowtide_unknown_name: No such file or directory", r.stdout)

    def test_bad_usage_exits_2(self):
        empty = os.path.join(self.tmp.name, "empty")
        os.makedirs(empty)
        for args in ([], ["--jobs", "0", self.suite], ["--json"], ["--frobnicate", self.suite],
                     [os.path.join(self.tmp.name, "missing")], [empty], [self.fake],
                     ["--ip-mode", "ipv5", self.suite], ["--ip-mode"]):
            r = self.run_runner(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertRegex(r.stderr, r"^lowtide: [^:]+: ", args)
        self.pkt("tcp/one.pkt", "")
        only4 = self.pkt("tcp/x-v4.pkt", "")
        r = self.run_runner("--ip-mode", "ipv6", only4)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("no script runs in ipv6", r.stderr)
        env = dict(os.environ, PACKETDRILL="/nonexistent/packetdrill")
        r = subprocess.run([sys.executable, RUNNER, self.suite], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("lowtide: PACKETDRILL: /nonexistent/packetdrill: no such file", r.stderr)

    def test_no_namespace_means_no_run(self):
        fakebin = os.path.join(self.tmp.name, "nons")
        write(os.path.join(fakebin, "unshare"), "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n", 0o755)
        f = self.pkt("tcp/one.pkt", "")
        env = dict(os.environ, PACKETDRILL=self.fake, LOWTIDE_PACKETDRILL_SO=self.so,
                   PATH=fakebin + os.pathsep + os.environ["PATH"])
        r = subprocess.run([sys.executable, RUNNER, f], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"^lowtide: packetdrill: cannot make a private mount and network namespace as .*: "
                         r"unshare: unshare failed: Operation not permitted")
        self.assertEqual(r.stdout, "")


# A passive open the kernel answers the same way every time, with sysctls the script
# sets (no timestamps, wscale 7 in the SYN-ACK): in the namespace only.
KERNEL_PKT = """\
`sysctl -q net.ipv4.tcp_timestamps=0
sysctl -q net.ipv4.tcp_rmem="4096 131072 6291456"`
0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
+0 setsockopt(3, SOL_SOCKET, SO_REUSEADDR, [1], 4) = 0
+0 bind(3, ..., ...) = 0
+0 listen(3, 1) = 0
+0 < S 0:0(0) win 32792 <mss 1000,sackOK,nop,nop,nop,wscale 7>
+0 > S. 0:0(0) ack 1 <mss 1460,nop,nop,sackOK,nop,wscale 7>
+.1 < . 1:1(0) ack 1 win 257
+0 accept(3, ..., ...) = 4
+0 close(4) = 0
+0 > F. 1:1(0) ack 1
"""



class KernelModeTest(unittest.TestCase):
    """--kernel against this machine's kernel: root only (CI runs as root)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="lowtide-pd-kernel-")

    def tearDown(self):
        self.tmp.cleanup()

    def pkt(self, name, body):
        path = os.path.join(self.tmp.name, name)
        write(path, body)
        return path

    def test_not_root_says_why(self):
        f = self.pkt("k.pkt", KERNEL_PKT)
        if os.geteuid() == 0:
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, RUNNER, "--kernel", f]
        else:
            cmd = [sys.executable, RUNNER, "--kernel", f]
        os.chmod(self.tmp.name, 0o755)
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"^lowtide: packetdrill --kernel: needs root, running as uid \d+: ")
        self.assertEqual(r.stdout, "")

    def test_tolerance_needs_kernel(self):
        r = subprocess.run([sys.executable, RUNNER, "--tolerance-usecs", "1000", self.tmp.name],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("only with --kernel", r.stderr)

    def test_kernel_runs_in_a_private_namespace(self):
        if os.geteuid() != 0:
            if os.environ.get("LOWTIDE_REQUIRE_PRIVILEGED_TESTS") == "1":
                self.fail("--kernel needs root")
            self.skipTest("skipping: --kernel needs root")
        self.pkt("k.pkt", KERNEL_PKT)
        # A global setting: the write is refused, the script fails at its init block.
        self.pkt("global.pkt", KERNEL_PKT.replace('6291456"`', '6291456"\necho 1 > /sys/module/tcp_cubic/parameters/hystart_detect`'))
        self.pkt("v6only-v6.pkt", KERNEL_PKT)
        def host():
            with open("/proc/sys/net/ipv4/tcp_timestamps") as a, open("/proc/sys/net/ipv4/tcp_rmem") as b:
                return a.read() + b.read()
        before = host()
        out = os.path.join(self.tmp.name, "out.json")
        r = subprocess.run([sys.executable, RUNNER, "--kernel", "--tolerance-usecs", "50000", "--jobs", "2",
                            "--json", out, self.tmp.name], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        with open(out) as f:
            runs = {(os.path.basename(s["path"]), s["mode"]): s for s in json.load(f)["scripts"]}
        self.assertEqual(sorted(runs), [
            ("global.pkt", "ipv4"), ("global.pkt", "ipv4-mapped-ipv6"), ("global.pkt", "ipv6"),
            ("k.pkt", "ipv4"), ("k.pkt", "ipv4-mapped-ipv6"), ("k.pkt", "ipv6"), ("v6only-v6.pkt", "ipv6")])
        for m in ("ipv4", "ipv4-mapped-ipv6", "ipv6"):
            self.assertEqual(runs[("k.pkt", m)]["result"], "pass", runs[("k.pkt", m)])
            g = runs[("global.pkt", m)]
            self.assertEqual(g["result"], "fail", g)
            self.assertIn("Read-only file system", g["reason"])
        self.assertEqual(host(), before, "the host's sysctls changed")


class RatchetTest(unittest.TestCase):
    def ratchet(self, listed, results):
        """listed: "MODE script" lines; results: (script, result) in ipv4 or
        (script, result, mode)."""
        with tempfile.TemporaryDirectory() as t:
            root = os.path.join(t, "suite")
            os.makedirs(root)
            with open(os.path.join(t, "list.txt"), "w") as f:
                f.write("# passing\n" + "".join(n + "\n" for n in listed))
            doc = {"total": len(results), "passed": 0, "scripts": [
                {"path": os.path.join(root, r[0]), "mode": (r[2] if len(r) > 2 else "ipv4"),
                 "result": r[1], "reason": None if r[1] == "pass" else "why"}
                for r in results]}
            with open(os.path.join(t, "r.json"), "w") as f:
                json.dump(doc, f)
            return subprocess.run([sys.executable, RATCHET, os.path.join(t, "list.txt"), os.path.join(t, "r.json"), root],
                                  capture_output=True, text=True)

    def test_listed_pass_ok_and_new_passes_reported(self):
        r = self.ratchet(["ipv4 tcp/a.pkt"], [("tcp/a.pkt", "pass"), ("tcp/b.pkt", "pass"), ("tcp/c.pkt", "fail"),
                                              ("tcp/a.pkt", "pass", "ipv6")])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("3/4 pass, 1 listed", r.stdout)
        self.assertIn("ipv4: 2/3 pass", r.stdout)
        self.assertIn("ipv6: 1/1 pass", r.stdout)
        self.assertIn("new pass (add it to", r.stdout)
        self.assertIn(": ipv4 tcp/b.pkt", r.stdout)
        self.assertIn(": ipv6 tcp/a.pkt", r.stdout)

    def test_listed_failure_or_missing_fails(self):
        r = self.ratchet(["ipv4 tcp/a.pkt", "ipv4 tcp/gone.pkt", "ipv6 tcp/b.pkt"],
                         [("tcp/a.pkt", "fail"), ("tcp/b.pkt", "pass"), ("tcp/a.pkt", "pass", "ipv6"),
                          ("tcp/b.pkt", "fail", "ipv6")])
        self.assertEqual(r.returncode, 1)
        self.assertIn("REGRESSION: ipv4 tcp/a.pkt: passed before, fails now: why", r.stdout)
        self.assertIn("REGRESSION: ipv4 tcp/gone.pkt: listed as passing, but it did not run", r.stdout)
        self.assertIn("REGRESSION: ipv6 tcp/b.pkt: passed before, fails now: why", r.stdout)
        self.assertIn("lowtide: packetdrill-ratchet: 3 listed script(s) no longer pass", r.stderr)

    def test_list_lines_need_a_mode(self):
        r = self.ratchet(["tcp/a.pkt"], [("tcp/a.pkt", "pass")])
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected 'MODE SCRIPT'", r.stderr)

    def test_bad_usage(self):
        r = subprocess.run([sys.executable, RATCHET, "only-one"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertTrue(r.stderr.startswith("lowtide: packetdrill-ratchet: usage"))


def load_runner():
    """scripts/packetdrill as a module (its main() runs only as a program)."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("lowtide_packetdrill_runner", RUNNER)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class NstatShimTest(unittest.TestCase):
    """The nstat shim against iproute2's nstat (misc/nstat.c): getopt_long's option
    parsing, FNM_CASEFOLD patterns, the history's rules, the text and JSON formats."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="lowtide-nstat-test-")
        t = self.tmp.name
        load_runner().write_shims(os.path.join(t, "bin"))
        os.makedirs(os.path.join(t, "sys"))
        self.env = dict(os.environ, LOWTIDE_PD_SYSCTL_DIR=os.path.join(t, "sys"))
        self.env.pop("NSTAT_HISTORY", None)

    def tearDown(self):
        self.tmp.cleanup()

    def counters(self, **kv):
        with open(os.path.join(self.tmp.name, "counters"), "w") as f:
            f.write("".join(f"{k} {v}\n" for k, v in kv.items()))

    def nstat(self, *args):
        r = subprocess.run([os.path.join(self.tmp.name, "bin", "nstat"), *args], capture_output=True,
                           text=True, env=self.env)
        return r.returncode, r.stdout, r.stderr

    def rows(self, out):
        return [tuple(l.split()[:2]) for l in out.splitlines() if not l.startswith("#")]

    def test_combined_flags_patterns_and_history(self):
        self.counters(TcpExtTCPHPAcks=3, TcpExtDelayedACKs=0, IpInReceives=5, TcpActiveOpens=0)
        self.assertEqual(self.nstat("-n"), (0, "", ""))
        self.counters(TcpExtTCPHPAcks=4, TcpExtDelayedACKs=0, IpInReceives=7, TcpActiveOpens=1)
        # -sz is -s -z: zeros shown, the history kept; patterns fold case.
        for args in (["-sz", "tcpext*"], ["-s", "-z", "TCPEXT*"], ["tcpext*", "--noup", "--zeros"]):
            rc, out, _ = self.nstat(*args)
            self.assertEqual(rc, 0, args)
            self.assertEqual(self.rows(out), [("TcpExtTCPHPAcks", "1"), ("TcpExtDelayedACKs", "0")], args)
        # /proc/net/snmp's counters come first, netstat's last.
        rc, out, _ = self.nstat("-as")
        self.assertEqual(out.splitlines()[0], "#kernel")
        self.assertEqual([r[0] for r in self.rows(out)], ["IpInReceives", "TcpActiveOpens", "TcpExtTCPHPAcks"])
        # A pattern updates the history of what it shows only.
        self.assertEqual(self.rows(self.nstat("TcpActiveOpens")[1]), [("TcpActiveOpens", "1")])
        self.assertEqual(self.rows(self.nstat()[1]), [("IpInReceives", "2"), ("TcpExtTCPHPAcks", "1")])
        self.assertEqual(self.rows(self.nstat()[1]), [])
        # -r resets: absolute values again.
        self.assertEqual(self.rows(self.nstat("-rs", "IpIn*")[1]), [("IpInReceives", "7")])
        self.assertEqual(self.nstat("-asz", "IpInReceives")[1], "#kernel\nIpInReceives" + " " * 20 + "7" + " " * 15 + "   0.0\n")

    def test_json_version_and_bad_options(self):
        self.counters(IpInReceives=7, TcpActiveOpens=0)
        self.assertEqual(self.nstat("-asj")[1], '{"kernel":{"IpInReceives":7}}\n')
        self.assertEqual(self.nstat("-asjp", "nosuch")[1], '{\n    "kernel": {}\n}\n')
        self.assertEqual(self.nstat("-a", "-s", "-z", "--json", "--pretty")[1],
                         '{\n    "kernel": {\n        "IpInReceives": 7,\n        "TcpActiveOpens": 0\n    }\n}\n')
        self.assertEqual(self.nstat("-V")[:2], (0, "nstat utility, iproute2-6.18.0\n"))
        rc, out, err = self.nstat("-sx")
        self.assertEqual((rc, out), (255, ""))
        self.assertTrue(err.startswith("nstat: invalid option -- 'x'\nUsage: nstat"), err)
        self.assertEqual(self.nstat("--foo")[2].splitlines()[0], "nstat: unrecognized option '--foo'")
        self.assertEqual(self.nstat("-t", "0")[:1], (255,))


class KernelEnvTest(unittest.TestCase):
    def test_nstat_history_is_the_runs_own(self):
        # iproute2's nstat keeps one history file per user: two kernel runs side by side
        # would each read the other's counters as its own history.
        r = load_runner()
        run = type("Run", (), {"kernel_cc_so": None})()
        self.assertEqual(r.kernel_env(run, "/w/0001")["NSTAT_HISTORY"], "/w/0001/nstat.history")
        self.assertNotIn("LOWTIDE_KCC_SO", r.kernel_env(run, "/w/0001"))
        run.kernel_cc_so = "/w/kernel-cc.so"
        env = r.kernel_env(run, "/w/0002")
        self.assertEqual((env["LOWTIDE_KCC_SO"], env["LOWTIDE_KCC_FILE"]),
                         ("/w/kernel-cc.so", "/w/0002/tcp_congestion_control"))


class FailureReasonTest(unittest.TestCase):
    def test_a_packet_that_never_comes_is_a_timeout(self):
        r = load_runner()
        with tempfile.TemporaryDirectory() as t:
            script = os.path.join(t, "x.pkt")
            with open(script, "w") as f:
                f.write("0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n+0 > P. 1:11(10) ack 1\n")
            stderr = r.NOTHING_TO_SEND + "\nx.pkt:2: error handling packet: " + r.EMPTY_READ + "\n"
            self.assertEqual(r.failure_reason(script, stderr, 1, False, 60),
                             (2, "line 2 `+0 > P. 1:11(10) ack 1`: error handling packet: Timed out waiting for packet"))
            # Without lowtide's note (another shared object) the message stays.
            line, reason = r.failure_reason(script, stderr.split("\n", 1)[1], 1, False, 60)
            self.assertIn(r.EMPTY_READ, reason)


if __name__ == "__main__":
    unittest.main(verbosity=2)
