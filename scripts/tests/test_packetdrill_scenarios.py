#!/usr/bin/env python3
"""Tests of scripts/packetdrill-scenarios. The last class runs two scenarios on lowtide
through scripts/packetdrill (it builds packetdrill and the shared object when needed);
it is skipped when ../shared/tools/packetdrill is missing and PACKETDRILL is unset.

Run: python3 scripts/tests/test_packetdrill_scenarios.py
"""

import importlib.machinery
import importlib.util
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest

from compare_json import compare_runs

HERE = os.path.dirname(os.path.realpath(__file__))
PATH = os.path.join(os.path.dirname(HERE), "packetdrill-scenarios")
REPO = os.path.dirname(os.path.dirname(HERE))
loader = importlib.machinery.SourceFileLoader("packetdrill_scenarios", PATH)
spec = importlib.util.spec_from_loader("packetdrill_scenarios", loader)
ps = importlib.util.module_from_spec(spec)
loader.exec_module(ps)


def make(seed, count):
    out = tempfile.mkdtemp()
    r = subprocess.run([sys.executable, PATH, "make", "--out", out, "--count", str(count), "--seed", str(seed)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def files(folder):
    out = {}
    for n in sorted(os.listdir(folder)):
        with open(os.path.join(folder, n)) as f:
            out[n] = f.read()
    return out


class Make(unittest.TestCase):
    def test_a_seed_gives_the_same_scenarios(self):
        a, b = files(make(7, 5)), files(make(7, 5))
        self.assertEqual(a, b)
        self.assertEqual(sorted(n for n in a if n.endswith(".pkt")), [f"s{s}.pkt" for s in (10, 11, 7, 8, 9)])
        self.assertIn("defaults.sh", a)
        m = json.loads(a["manifest.json"])
        self.assertEqual(m["mode"], "ipv4")
        self.assertEqual(m["scenarios"]["s9.pkt"]["seed"], 9)

    def test_a_scenario_is_its_seeds_alone(self):
        # s8 is the same whether made from seed 7 or seed 8
        self.assertEqual(files(make(7, 2))["s8.pkt"], files(make(8, 1))["s8.pkt"])
        texts = {ps.scenario(s)[0] for s in range(1, 30)}
        self.assertGreater(len(texts), 25)

    def test_scenarios_have_one_init_block_and_inbound_packets_only(self):
        for s in range(1, 40):
            text, what = ps.scenario(s)
            lines = text.split("\n")
            self.assertTrue(lines[1].startswith("`./defaults.sh") and lines[2].endswith("`"), lines[:3])
            self.assertIn(ps.FIRST_EVENT, lines)
            out = [l for l in lines if l.split()[1:2] == [">"]]
            self.assertEqual(len(out), 1, out)  # the SYN-ACK
            ts = "ts=1" in what
            for l in lines:
                if l.split()[1:2] == ["<"] and " S " not in l:
                    self.assertEqual("TS val" in l, ts, l)
                    self.assertEqual("sack" in l, "sack=1" in what and "sack" in l)
            for tag in "ACDEF":
                self.assertIn(f'print("{tag}", ', text)

    def test_knobs_fix_what_the_seed_would_draw(self):
        for s in range(1, 30):
            self.assertEqual(ps.scenario(s), ps.scenario(s, {}))
            text, what = ps.scenario(s, {"sack": False, "ts": True, "cc": "reno"})
            self.assertTrue(what.startswith("sack=0 ts=1 cc=reno "), what)
            self.assertIn("tcp_congestion_control=reno", text)
            self.assertNotIn("sackOK", text)
            self.assertIn("(--cc reno --sack off --ts on)", text.split("\n")[0])
            _, what = ps.scenario(s, {"sack": True, "ts": False, "cc": "cubic"})
            self.assertTrue(what.startswith("sack=1 ts=0 cc=cubic "), what)
            _, what = ps.scenario(s, {"reorder": True})
            total, lost = re.search(r"total=(\d+) lost=\[([^]]*)\]", what).groups()
            delivered = min(int(total), 30) - 10 - len(lost.split(","))
            self.assertEqual("swaps=0" in what, delivered < 2, what)

    def test_skew_moves_the_first_late_ack_and_the_last(self):
        for s in range(1, 30):
            def lines(knobs):  # TS values follow the clock: left out
                return [re.sub(r"TS val \d+", "TS", l) for l in ps.scenario(s, knobs)[0].split("\n")[1:]]
            plain, skewed = lines({}), lines({"skew_us": 1500})
            self.assertEqual(len(plain), len(skewed))
            moved = [(a, b) for a, b in zip(plain, skewed) if a != b]
            self.assertIn(len(moved), (1, 2), moved)  # 1: every late segment stays lost
            for a, b in moved:
                self.assertTrue(a.startswith("  +0.1 <") and b.startswith("  +0.1015 <"), (a, b))
                self.assertEqual(a.split("<", 1)[1], b.split("<", 1)[1])
            self.assertRegex(moved[-1][1], r"ack (2|3)0001 win 2000( <nop,nop,TS ecr 100>)?$")

    def test_bad_knobs_are_usage_errors(self):
        for bad in (["--sack", "yes"], ["--cc", "bbr"], ["--skew-us", "-3"], ["--skew-us", "50000"], ["--ts"]):
            r = subprocess.run([sys.executable, PATH, "make", "--out", tempfile.mkdtemp()] + bad,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, bad)
        d = tempfile.mkdtemp()
        r = subprocess.run([sys.executable, PATH, "make", "--out", d, "--count", "2", "--sack", "off", "--reorder"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(d, "manifest.json")) as f:
            self.assertEqual(json.load(f)["knobs"], {"sack": False, "reorder": True})

    def test_a_folder_inside_the_repository_is_refused(self):
        r = subprocess.run([sys.executable, PATH, "make", "--out", os.path.join(REPO, "target", "x")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("inside the repository", r.stderr)

    def test_the_kernel_copy_records_tun0_around_the_events(self):
        d = make(3, 1)
        k = os.path.join(d, "kernel")
        os.makedirs(k)
        ps.kernel_copy(os.path.join(d, "s3.pkt"), k, "s3.pkt")
        with open(os.path.join(k, "s3.pkt")) as f:
            lines = f.read().splitlines()
        first = [l for l in lines if l.startswith("    0 ")]
        self.assertEqual(len(first), 1)
        self.assertIn("tcpdump", first[0])
        self.assertIn(os.path.join(k, "s3.pcap"), first[0])
        self.assertTrue(first[0].endswith("nstat -n`"))
        self.assertIn("kill -INT", lines[-1])


def tcp4(src, seq, fl, payload):
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40 + payload, 0, 0, 64, 6, 0, bytes(src), bytes([192, 0, 2, 1]))
    return ip + struct.pack(">HHIIBBHHH", 8080, 1234, seq, 1, 0x50, fl, 1000, 0, 0) + bytes(payload)


def write_pcap(pkts):
    """A pcap file (LINKTYPE_RAW) of pkts, 1 ms apart from 100 s on."""
    d = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 101)
    for i, p in enumerate(pkts):
        d += struct.pack("<IIII", 100, i * 1000, len(p), len(p)) + p
    f = os.path.join(tempfile.mkdtemp(), "k.pcap")
    with open(f, "wb") as fh:
        fh.write(d)
    return f


class Packets(unittest.TestCase):
    ME, PEER = [192, 168, 0, 1], [192, 0, 2, 1]

    def test_pcap_keeps_what_the_syn_acks_sender_sent_after_it(self):
        pkts = [tcp4(self.PEER, 5, 0x02, 0), tcp4(self.ME, 0xfffffff0, 0x12, 0),
                tcp4(self.PEER, 6, 0x10, 0), tcp4(self.ME, 0xfffffff1, 0x18, 1000), tcp4(self.ME, 1001 - 16, 0x11, 0)]
        f = write_pcap(pkts)
        self.assertEqual(ps.pcap_packets(f), [["P.", 1, 1000, 0.002], ["F.", 1001, 0, 0.003]])

    def test_packets_other_than_tcp_are_skipped(self):
        # the kernel's own IPv6 router solicitation on tun0 (ICMPv6, next header 58),
        # an IPv4 ICMP packet and a TCP packet cut short
        rs = bytes([0x60, 0, 0, 0, 0, 8, 58, 255]) + bytes(32) + bytes([133, 0, 0, 0, 0, 0, 0, 0])
        icmp = bytearray(tcp4(self.ME, 1, 0x10, 0))
        icmp[9] = 1
        self.assertIsNone(ps.parse_ip(rs))
        self.assertIsNone(ps.parse_ip(bytes(icmp)))
        self.assertIsNone(ps.parse_ip(tcp4(self.ME, 1, 0x10, 0)[:30]))
        pkts = [tcp4(self.ME, 0xfffffff0, 0x12, 0), rs, bytes(icmp), tcp4(self.ME, 0xfffffff1, 0x18, 100)]
        f = write_pcap(pkts)
        self.assertEqual(ps.pcap_packets(f), [["P.", 1, 100, 0.003]])

    def test_lowtide_packets_stop_at_the_last_event(self):
        text, _ = ps.scenario(4)
        gaps = [l.split()[0] for l in text.splitlines() if l.lstrip().startswith("+")]
        end = ps.script_end(text)
        self.assertAlmostEqual(end, sum(float(g[1:]) for g in gaps), places=9)
        self.assertGreater(end, 0.9)  # three RTTs, the acks between, and the 0.6 s wait
        self.assertAlmostEqual(ps.script_end("    0 `nstat -n`\n   +0 x\n  +0.1 y\n  +.6 `true`\n   +0 z\n"), 0.7)
        pkts = [[".", 1, 1000, 0.5], [".", 1001, 1000, 0.6999], [".", 2001, 1000, 0.7], [".", 3001, 1000, 0.7001]]
        # the script's end closes the socket, which pushes out held data at (or just after) it
        self.assertEqual(ps.before_end(pkts, 0.7), pkts[:2])

    def test_trace_lines(self):
        def line(t, b):
            return f"lowtide: tx at {t} us, {len(b)} bytes, gso 0: [{','.join(f'{x:02x}' for x in b)}]"
        text = "\n".join([line(0, tcp4(self.ME, 100, 0x12, 0)), "noise", line(250000, tcp4(self.ME, 101, 0x10, 1000))])
        self.assertEqual(ps.trace_packets(text), [[".", 1, 1000, 0.25]])


class Receive(unittest.TestCase):
    def test_receive_scenarios_are_their_seeds_and_stay_in_the_window(self):
        self.assertEqual(ps.scenario_recv(3), ps.scenario_recv(3))
        for seed in range(1, 60):
            text, what = ps.scenario_recv(seed)
            self.assertTrue(what.startswith("recv "), what)
            data = [tuple(map(int, m)) for m in re.findall(r"< P\. (\d+):(\d+)\((\d+)\)", text)]
            got, reads = set(), 0
            for a, b, n in data:
                self.assertEqual(b - a, n)
                cum = 0
                while cum in got:
                    cum += 1
                x = (b - 1) // ps.MSS - 1  # the segment this one ends
                # never more than RECV_AHEAD segments past what is in order
                self.assertLess(x, cum + ps.RECV_AHEAD, (seed, a, b))
                got.add(x)
            # every segment arrives in the end, so the reads add up to what is in order
            total = int(re.search(r"total=(\d+)", what).group(1))
            self.assertEqual(max(b for _, b, _ in data), total * ps.MSS + 1)
            for m in re.findall(r"read\(4, \.\.\., (\d+)\) = (\d+)", text):
                self.assertEqual(m[0], m[1])
                reads += int(m[0])
            self.assertLessEqual(reads, total * ps.MSS)
            if "rcvbuf=0" not in what:
                self.assertEqual(reads, 0, "a small SO_RCVBUF may drop data: no read can know its size")

    def test_knobs_and_kind(self):
        self.assertIn("sack=0 ts=1", ps.scenario_recv(5, {"sack": False, "ts": True})[1])
        out = tempfile.mkdtemp()
        r = subprocess.run([sys.executable, PATH, "make", "--kind", "recv", "--out", out, "--count", "2"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertEqual(json.load(f)["kind"], "recv")
        for bad in (["--kind", "both"], ["--kind", "recv", "--cc", "reno"], ["--kind", "recv", "--reorder"]):
            r = subprocess.run([sys.executable, PATH, "make", "--out", out] + bad, capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, bad)

    def test_acks_keep_their_ack_window_and_sack_blocks(self):
        def tcp4(seq, ack, fl, win, sacks=()):
            opts = b""
            if sacks:
                opts = b"\x01\x01\x05" + bytes([2 + 8 * len(sacks)]) + b"".join(struct.pack(">II", *x) for x in sacks)
            hl = 20 + len(opts)
            ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + hl, 0, 0, 64, 6, 0, bytes([192, 168, 0, 1]),
                             bytes([192, 0, 2, 1]))
            return ip + struct.pack(">HHIIBBHHH", 8080, 1234, seq, ack, (hl // 4) << 4, fl, win, 0, 0) + opts
        peer = 0x7ffffff0
        pk = [(0.0, ps.parse_ip(tcp4(100, peer + 1, 0x12, 1000))),
              (0.1, ps.parse_ip(tcp4(101, peer + 1001, 0x10, 1046))),
              (0.2, ps.parse_ip(tcp4(101, peer + 1001, 0x10, 1043, [(peer + 2001, peer + 3001)])))]
        self.assertEqual(ps.relative(pk, True), [[".", 1, 0, 0.1, 1001, 1046, []],
                                                 [".", 1, 0, 0.2, 1001, 1043, [[2001, 3001]]]])
        self.assertEqual(ps.relative(pk), [[".", 1, 0, 0.1], [".", 1, 0, 0.2]])
        k = {"path": "/x/s1.pkt", "name": "s1.pkt", "result": "pass", "prints": [],
             "packets": ps.relative(pk, True)}
        l = dict(k, packets=[p[:5] + [1040] + p[6:] for p in k["packets"]])
        c = compare_runs(ps.compare, [k], [l])
        self.assertEqual(c["differing"], 1)
        self.assertEqual(c["rows"][0]["packets"][0], 0)


class Application(unittest.TestCase):
    def test_application_scenarios_are_their_seeds_and_ack_only_forward(self):
        self.assertEqual(ps.scenario_app(7), ps.scenario_app(7))
        self.assertNotEqual(ps.scenario_app(7), ps.scenario_app(8))
        for seed in range(1, 80):
            text, what = ps.scenario_app(seed)
            self.assertTrue(what.startswith("app "), what)
            self.assertIn("tcp_early_retrans=0 net.ipv4.tcp_retrans_collapse=0", text)
            self.assertNotIn("retrans_collapse", what)  # the drawn sysctls only
            written = sum(int(n) for n in re.findall(r"(?:write|send)\(4, \.\.\., (\d+)", text))
            self.assertEqual(written, int(re.search(r"written=(\d+)", what).group(1)))
            for call in re.findall(r"(?:write|send)\(4, \.\.\., (\d+)(?:, MSG_MORE)?\) = (\d+)", text):
                self.assertEqual(call[0], call[1])
            acks = [(int(a), int(w)) for a, w in re.findall(r"< \. \d+:\d+\(0\) ack (\d+) win (\d+)", text)]
            self.assertEqual(acks[0], (1, 2000))  # the handshake's
            for (a, w), (b, v) in zip(acks, acks[1:]):
                self.assertLessEqual(a, b, (seed, acks))
                if w == 0:  # a zero window always opens again, at the same point
                    self.assertEqual((b, v), (a, 2000), (seed, acks))
            self.assertLessEqual(acks[-1][0], written + 1)
            self.assertEqual(len(re.findall(r'print\("A\d+"', text)), len(acks) - 1)
            # the peer's data runs on from its ISN, each ACK and segment at its next byte
            nxt = 1
            for a, b, n in re.findall(r"< P?\.? ?(\d+):(\d+)\((\d+)\) ack", text)[1:]:
                self.assertEqual((int(a), int(b) - int(a)), (nxt, int(n)), seed)
                nxt = int(b)
            self.assertEqual(len(re.findall(r"< P\. ", text)), int(re.search(r"peer-data=(\d+)", what).group(1)))

    def test_the_model_holds_what_cork_more_and_nagle_hold(self):
        m = ps.AppModel()
        m.queued = 1500
        m.xmit()
        self.assertEqual((m.nxt, m.queued), (1500, 0))  # a small segment goes when nothing small is out
        m.queued = 300
        m.xmit()
        self.assertEqual((m.nxt, m.queued), (1500, 300))  # Nagle: 500 bytes still in flight
        m.ack(1500, 2000)
        self.assertEqual((m.nxt, m.queued), (1800, 0))
        m.cork, m.queued = True, 2500
        m.xmit()
        self.assertEqual((m.nxt, m.queued), (3800, 500))
        m.cork = False
        m.ack(3800, 2000)  # uncorked: the 500 go with the ACK
        self.assertEqual((m.nxt, m.queued), (4300, 0))
        m.queued = 100
        m.xmit(more=True)
        self.assertEqual((m.nxt, m.queued), (4300, 100))  # MSG_MORE holds it for this write only
        m.ack(4300, 0)  # ... but a zero window holds it at the ACK
        self.assertEqual((m.nxt, m.queued), (4300, 100))
        m.ack(4300, 2000)
        self.assertEqual((m.nxt, m.queued), (4400, 0))

    def test_kind_app(self):
        out = tempfile.mkdtemp()
        r = subprocess.run([sys.executable, PATH, "make", "--kind", "app", "--out", out, "--count", "2"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("application scenarios", r.stdout)
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertEqual(json.load(f)["kind"], "app")
        for bad in (["--kind", "app", "--cc", "reno"], ["--kind", "app", "--skew-us", "5"]):
            r = subprocess.run([sys.executable, PATH, "make", "--out", out] + bad, capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, bad)


class Compare(unittest.TestCase):
    def compare(self, k, l):
        return compare_runs(ps.compare, k, l)

    def run_(self, prints, packets, result="pass", name="s1.pkt"):
        return {"path": "/x/" + name, "name": name, "mode": "ipv4", "result": result, "reason": None,
                "prints": prints, "packets": packets}

    def test_same_ignores_times_and_fins(self):
        k = self.run_(["A 0 10"], [[".", 1, 1000, 0.1], ["F.", 2001, 0, 0.9]])
        l = self.run_(["A 0 10"], [[".", 1, 1000, 0.2]])
        self.assertEqual(self.compare([k], [l])["same"], 1)

    def test_packets_compare_as_mss_segments_without_psh(self):
        k = self.run_(["A"], [["P.", 1, 2000, 0.1], [".", 2001, 1000, 0.1]])
        l = self.run_(["A"], [[".", 1, 1000, 0.1], [".", 1001, 1000, 0.1], ["P.", 2001, 1000, 0.1]])
        self.assertEqual(self.compare([k], [l])["same"], 1)

    def test_a_differing_print_or_packet(self):
        k = [self.run_(["A 0 10", "B 1 7"], [[".", 1, 1000, 0]]),
             self.run_(["A"], [[".", 1, 1000, 0], [".", 1001, 1000, 0]], name="s2.pkt")]
        l = [self.run_(["A 0 10", "B 1 5"], [[".", 1, 1000, 0]]),
             self.run_(["A"], [[".", 1, 1000, 0]], name="s2.pkt")]
        c = self.compare(k, l)
        self.assertEqual((c["same"], c["differing"]), (0, 2))
        self.assertEqual(c["rows"][0]["prints"], [["B", "1 7", "1 5"]])
        self.assertEqual(c["rows"][1]["packets"], [1, [".", 1001, 1000], None])

    def test_prints_compare_by_tag_and_counter_name(self):
        k = self.run_(["N TcpExtA 1", "N TcpExtB 2", "A 0 10"], [])
        l = self.run_(["N TcpExtB 3", "A 0 10", "N TcpExtC 1"], [])
        c = self.compare([k], [l])
        self.assertEqual(c["rows"][0]["prints"], [["N TcpExtA", "1", None], ["N TcpExtB", "2", "3"],
                                                  ["N TcpExtC", None, "1"]])

    def test_a_failed_run_is_counted_apart(self):
        c = self.compare([self.run_([], [], result="fail")], [self.run_([], [])])
        self.assertEqual((c["same"], c["differing"], c["failed"]), (0, 0, 1))


@unittest.skipUnless(os.environ.get("PACKETDRILL") or
                     os.path.isdir(os.path.join(os.path.dirname(REPO), "shared", "tools", "packetdrill")),
                     "no packetdrill source (../shared/tools/packetdrill) and PACKETDRILL unset")
class OnLowtide(unittest.TestCase):
    def test_two_scenarios_parse_and_run(self):
        d = make(1, 2)
        out = os.path.join(d, "l.json")
        r = subprocess.run([sys.executable, PATH, "run", d, "--lowtide", "--json", out], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        with open(out) as f:
            doc = json.load(f)
        self.assertEqual([s["result"] for s in doc["scripts"]], ["pass", "pass"], doc["scripts"])
        for s in doc["scripts"]:
            self.assertEqual([p.split()[0] for p in s["prints"] if p[0] in "ACDEF"], list("ACDEF"), s["prints"])
            self.assertTrue(s["packets"])


if __name__ == "__main__":
    unittest.main()
