#!/usr/bin/env python3
"""Tests of scripts/packetdrill-mutate (no packetdrill, no kernel needed).

Run: python3 scripts/tests/test_packetdrill_mutate.py
"""

import importlib.machinery
import importlib.util
import json
import os
import tempfile
import unittest

from compare_json import compare_runs

HERE = os.path.dirname(os.path.realpath(__file__))
PATH = os.path.join(os.path.dirname(HERE), "packetdrill-mutate")
loader = importlib.machinery.SourceFileLoader("packetdrill_mutate", PATH)
spec = importlib.util.spec_from_loader("packetdrill_mutate", loader)
pm = importlib.util.module_from_spec(spec)
loader.exec_module(pm)

SCRIPT = """// a comment naming `scripts/packetdrill --kernel`
/* a block comment with `backticks` */
`../common/defaults.sh
sysctl -q net.ipv4.tcp_sack=1`

    0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
   +0 < S 0:0(0) win 32792 <mss 1000,sackOK,nop,nop,nop,wscale 7>
   +0 > S. 0:0(0) ack 1 <mss 1460,nop,nop,sackOK,nop,wscale 8>
  +.1 < . 1:1(0) ack 1 win 257
"""


def script(text, name="x.pkt"):
    d = tempfile.mkdtemp()
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write(text)
    return pm.Script(p)


class Sysctl(unittest.TestCase):
    def mutants(self, text):
        return [(line, what, lines) for kind, line, what, lines in script(text).mutants() if kind == "sysctl"]

    def test_the_flip_is_the_init_blocks_last_command(self):
        # packetdrill takes one backtick block before the first event: a second
        # top-level block is a parse error, so the flip goes inside the first one,
        # and backticks in comments are not that block
        ms = self.mutants(SCRIPT)
        self.assertTrue(ms)
        for line, what, lines in ms:
            self.assertEqual(lines[:3], SCRIPT.split("\n")[:3])
            self.assertEqual(lines[3], "sysctl -q net.ipv4.tcp_sack=1")
            self.assertTrue(lines[4].startswith("sysctl -q ") and lines[4].endswith("`"), lines[4])
            self.assertEqual(line, 5)
            self.assertEqual(lines[5], "")

    def test_a_value_the_script_sets_is_not_flipped_to_itself(self):
        whats = [w for _, w, _ in self.mutants(SCRIPT.replace("tcp_sack=1", "tcp_sack=0"))]
        self.assertFalse(any(w.startswith("net.ipv4.tcp_sack=0") for w in whats))

    def test_a_one_line_block(self):
        text = "`./defaults.sh`\n    0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n"
        line, _, lines = self.mutants(text)[0]
        self.assertEqual(lines[0], "`./defaults.sh")
        self.assertTrue(lines[1].startswith("sysctl -q ") and lines[1].endswith("`"))
        self.assertEqual(line, 2)


FLOW = """`../common/defaults.sh`
    0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
   +0 setsockopt(3, SOL_SOCKET, SO_SNDBUF, [20000], 4) = 0
   +0 bind(3, ..., ...) = 0
   +0 listen(3, 1) = 0
   +0 < S 0:0(0) win 32792 <mss 1000,sackOK,TS val 100 ecr 0,nop,wscale 7>
   +0 > S. 0:0(0) ack 1 <mss 1460,sackOK,TS val 100 ecr 100,nop,wscale 8>
  +.1 < . 1:1(0) ack 1 win 257 <nop,nop,TS val 200 ecr 100>
   +0 accept(3, ..., ...) = 4
   +0 setsockopt(4, SOL_TCP, TCP_CORK, [1], 4) = 0
   +0 write(4, ..., 3000) = 3000
   +0 > . 1:1001(1000) ack 1 <nop,nop,TS val 200 ecr 200>
   +0 > . 1001:3001(2000) ack 1 <nop,nop,TS val 200 ecr 200>
  +.1 < . 1:1(0) ack 3001 win 257 <nop,nop,TS val 300 ecr 200>
"""


class NewKinds(unittest.TestCase):
    def mutants(self, kind, text=FLOW):
        return [(line, what, lines) for k, line, what, lines in script(text).mutants() if k == kind]

    def test_delay_and_hurry_shift_one_inbound_relative_time(self):
        src = FLOW.split("\n")
        (line, _, lines), = [m for m in self.mutants("delay") if m[0] == 14]
        self.assertEqual(lines[13], "  +0.2 < . 1:1(0) ack 3001 win 257 <nop,nop,TS val 300 ecr 200>")
        self.assertEqual(lines[:13], src[:13])
        (_, _, lines), = [m for m in self.mutants("hurry") if m[0] == 14]
        self.assertEqual(lines[13], "  +0.05 < . 1:1(0) ack 3001 win 257 <nop,nop,TS val 300 ecr 200>")
        # a +0 line has no earlier time to take
        self.assertFalse([m for m in self.mutants("hurry") if m[0] not in (8, 14)])

    def test_dup_repeats_the_packet_at_once(self):
        (_, _, lines), = [m for m in self.mutants("dup") if m[0] == 14]
        self.assertEqual(lines[14], "  +0 < . 1:1(0) ack 3001 win 257 <nop,nop,TS val 300 ecr 200>")
        self.assertEqual(len(lines), len(FLOW.split("\n")) + 1)

    def test_ackpart_acknowledges_the_first_packet_sent_from_the_last_ack(self):
        (line, what, lines), = self.mutants("ackpart")
        self.assertEqual(line, 14)
        self.assertIn("ack 1001 win 257", lines[13])

    def test_tsdel_takes_the_option_and_its_padding(self):
        (_, _, lines), = [m for m in self.mutants("tsdel") if m[0] == 14]
        self.assertEqual(lines[13], "  +.1 < . 1:1(0) ack 3001 win 257")
        sack = FLOW.replace("<nop,nop,TS val 300 ecr 200>", "<nop,nop,TS val 300 ecr 200,nop,nop,sack 1:2>")
        (_, _, lines), = [m for m in self.mutants("tsdel", sack) if m[0] == 14]
        self.assertTrue(lines[13].endswith("win 257 <nop,nop,sack 1:2>"), lines[13])

    def test_tsold_goes_below_the_last_inbound_tsval(self):
        (line, _, lines), = self.mutants("tsold")
        self.assertEqual(line, 14)
        self.assertIn("TS val 199 ecr 200", lines[13])

    def test_sockopt_flips_booleans_and_halves_or_doubles_sizes(self):
        whats = sorted(w for _, w, _ in self.mutants("sockopt"))
        self.assertEqual(whats, ["line 10 TCP_CORK 1 -> 0", "line 3 SO_SNDBUF 20000 -> 10000",
                                 "line 3 SO_SNDBUF 20000 -> 40000"])

    def test_nodelay_follows_accept(self):
        (line, _, lines), = self.mutants("nodelay")
        self.assertEqual(lines[9], "   +0 setsockopt(4, SOL_TCP, TCP_NODELAY, [1], 4) = 0")
        self.assertEqual(line, 10)
        self.assertFalse(self.mutants("nodelay", FLOW.replace("TCP_CORK", "TCP_NODELAY")))


class Modes(unittest.TestCase):
    def test_runs_in_follows_the_runners_name_rule(self):
        self.assertTrue(pm.runs_in("a-v6.pkt", "ipv6"))
        self.assertFalse(pm.runs_in("a-v6.pkt", "ipv4-mapped-ipv6"))
        self.assertFalse(pm.runs_in("a-v4.pkt", "ipv6"))
        self.assertTrue(pm.runs_in("a-v4.pkt", "ipv4-mapped-ipv6"))
        self.assertTrue(all(pm.runs_in("a.pkt", m) for m in pm.MODES))

    def test_make_keeps_a_scripts_ending_and_the_passing_list(self):
        src = tempfile.mkdtemp()
        for name in ("a-v6.pkt", "b-v4.pkt", "c.pkt", "d.pkt"):
            with open(os.path.join(src, name), "w") as f:
                f.write(SCRIPT)
        lst = os.path.join(src, "passing.txt")
        with open(lst, "w") as f:
            f.write("ipv6 %s/a-v6.pkt\nipv6 %s/c.pkt  # comment\nipv4 %s/d.pkt\n" % ((os.path.basename(src),) * 3))
        out = os.path.join(tempfile.mkdtemp(), "m")
        pm.make(["--out", out, "--ip-mode", "ipv6", "--passing", lst, "--kinds", "drop", src])
        with open(os.path.join(out, "manifest.json")) as f:
            names = sorted(os.path.basename(k) for k in json.load(f))
        self.assertTrue(names)
        self.assertTrue(all(n.startswith(("a-v6__", "c__")) for n in names), names)
        self.assertTrue(all(n.endswith("-v6.pkt") for n in names if n.startswith("a-v6")), names)


class Layout(unittest.TestCase):
    def test_upstreams_common_folders_are_mirrored_at_their_depth(self):
        root = tempfile.mkdtemp()
        for d in ("common", "tcp/common", "tcp/fastopen/server/opt34"):
            os.makedirs(os.path.join(root, d))
        with open(os.path.join(root, "tcp/common/set_sysctls.py"), "w") as f:
            f.write("")
        s = os.path.join(root, "tcp/fastopen/server/opt34/x.pkt")
        with open(s, "w") as f:
            f.write(SCRIPT)
        out = tempfile.mkdtemp()
        dest = pm.out_folder(s, out)
        self.assertEqual(dest, os.path.join(out, "tcp/fastopen/server/opt34"))
        # opt34's ../../../common (tcp/common) and the root's common resolve from the
        # mutant's folder as from the script's
        self.assertTrue(os.path.isfile(os.path.normpath(os.path.join(dest, "../../../common/set_sysctls.py"))))
        self.assertTrue(os.path.isdir(os.path.normpath(os.path.join(dest, "../../../../common"))))


def run(path, result, line=None, reason=None, mode="ipv6"):
    return {"path": path, "mode": mode, "result": result, "line": line, "reason": reason}


class Compare(unittest.TestCase):
    def compare(self, k, l):
        return compare_runs(pm.compare, k, l)

    def test_an_assertion_the_kernel_never_reached_is_not_compared(self):
        c = self.compare([run("a", "fail", 46, "timing error: expected outbound packet")],
                         [run("a", "fail", 34, "error in Python code (AssertionError: 13)")])
        self.assertEqual((c["differing"], c["assert_unevaluated"]), (0, 1))

    def test_an_assertion_failed_before_the_other_runs_failure_is_compared(self):
        c = self.compare([run("a", "fail", 20, "live packet field tcp_seq: ...")],
                         [run("a", "fail", 34, "error in Python code (AssertionError: 13)")])
        self.assertEqual((c["differing"], c["assert_unevaluated"]), (1, 0))

    def test_a_kernel_that_could_not_start_the_script_is_set_apart(self):
        c = self.compare([run("a", "fail", None, "error executing init command: non-zero status 2")],
                         [run("a", "pass")])
        self.assertEqual((c["differing"], c["kernel_init"]), (0, 1))

    def test_timestamps_compare_by_offset_and_errno_of_a_success_is_ignored(self):
        k = [run("a", "fail", 112, "Bad timestamp 0 in scm_timestamping 0: expected=1796606879837746 (20000) "
                 "actual=1796606879848391 (30645) start=1796606879817746"),
             run("b", "fail", 20, "Expected result 0 but got 10 with errno 32 (Broken pipe)")]
        l = [run("a", "fail", 112, "Bad timestamp 0 in scm_timestamping 0: expected=1767225600020260 (20000) "
                 "actual=1767225600030294 (30034) start=1767225600000260"),
             run("b", "fail", 20, "Expected result 0 but got 10 with errno 2 (No such file or directory)")]
        self.assertEqual(self.compare(k, l)["same"], 2)


if __name__ == "__main__":
    unittest.main()
