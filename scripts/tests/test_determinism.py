#!/usr/bin/env python3
"""Tests of scripts/determinism.py's normalization and comparison (no binary needed).

Run: python3 scripts/tests/test_determinism.py
"""

import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
spec = importlib.util.spec_from_file_location(
    "determinism", os.path.join(os.path.dirname(HERE), "determinism.py"))
det = importlib.util.module_from_spec(spec)
spec.loader.exec_module(det)


def compare(ref, now):
    errors, notes = [], []
    det.diff(det.normalize(ref), det.normalize(now), "run", errors, notes)
    return errors, notes


class Normalize(unittest.TestCase):
    def test_wall_fields_and_paths_are_ignored(self):
        self.assertEqual(compare({"sim_wall_s": 1.0, "wall_s": 2, "out": "/a", "x": 1},
                                 {"sim_wall_s": 9.0, "wall_s": 3, "out": "/b", "x": 1}),
                         ([], []))

    def test_any_other_value_counts(self):
        errors, _ = compare({"a": {"b": [1, 2.5]}}, {"a": {"b": [1, 2.5000001]}})
        self.assertEqual(len(errors), 1)
        self.assertIn("run.a.b[1]", errors[0])

    def test_a_new_field_is_a_note_not_a_failure(self):
        errors, notes = compare({"a": 1}, {"a": 1, "b": 2})
        self.assertEqual(errors, [])
        self.assertEqual(notes, ["run.b: new field"])

    def test_long_lists_are_digested_and_still_compared(self):
        ref = {"series": list(range(200))}
        now = {"series": list(range(199)) + [7]}
        self.assertIn("list_sha256", det.normalize(ref)["series"])
        errors, _ = compare(ref, now)
        self.assertEqual(len(errors), 1)
        self.assertEqual(compare(ref, {"series": list(range(200))}), ([], []))

    def test_list_length_change_counts(self):
        errors, _ = compare({"a": [1, 2]}, {"a": [1, 2, 3]})
        self.assertEqual(len(errors), 1)


if __name__ == "__main__":
    unittest.main()
