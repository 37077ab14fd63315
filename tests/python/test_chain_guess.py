"""The Python chain key's guess (unwind/python_frames.cpp, ChainGuess) never changes a key: every allocation of
chain_guess_app.py, whose chains share frames with the chain before them in each way the guess must tell apart, is
recorded with its own Python functions, innermost first, under the stack memo that the key indexes; and under
GMT_UNWIND=check every key is taken again following the chain frame by frame and none differs (meta
python_key_mismatches), nor does any memo answer differ from the whole stack. The memo alone would not show a wrong
key: a key no other chain has misses the memo and the stack is read whole. The guess runs where CPython's code
objects are watched (3.12, 3.13); the other supported versions take the same test on the key without it.
"""
import os
import sqlite3

from gmt_e2e import TraceDirTestCase, parse_truth, report_json, run_cli
from test_python_frames import SUPPORTED

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chain_guess_app.py")
ROUNDS = 40
DEPTHS = (1, 5, 12, 3, 9, 2, 12, 1)  # chain_guess_app.py's
DEEP = 90
TAIL = ["main", "<module>"]


def expected_functions(size):
    """The Python functions (innermost first) of the allocation of `size` bytes, as chain_guess_app.py makes it."""
    if 100_000 <= size < 200_000:
        return ["allocate", "helper", "caller_b" if size % 16 else "caller_a", *TAIL]
    if 200_000 <= size < 300_000:
        levels = (size - 200_000) // 1000
        turn = (size - 200_000) % 1000 % 16
        assert DEPTHS[turn] == levels, size
        return ["allocate", *["dive"] * (levels + 1), *TAIL]
    if 300_000 <= size < 400_000:
        return ["allocate", *["dive"] * (DEEP + 1), *TAIL]
    if 400_000 <= size < 500_000:
        return ["allocate", "producer", *(["relay", "driver_two"] if size % 2 else ["driver_one"]), *TAIL]
    return ["allocate", "helper", *(["mapped_relay", "mapped_two"] if size % 2 else ["mapped_one"]), *TAIL]


def recorded_functions(trace):
    """Each allocation's size and its stack's Python functions, innermost first."""
    with sqlite3.connect(trace) as db:
        rows = db.execute("SELECT size, stack_id FROM events WHERE size >= 100000 AND size < 600000 "
                          "AND stack_id IS NOT NULL").fetchall()
        functions = {}
        for stack_id in {stack_id for _, stack_id in rows}:
            functions[stack_id] = [name for (name,) in db.execute(
                "SELECT s.text FROM stack_frames f JOIN python_frames p ON p.id = f.python_frame_id "
                "JOIN strings s ON s.id = p.function_id WHERE f.stack_id = ? ORDER BY f.level", (stack_id,))]
        meta = dict(db.execute("SELECT key, value FROM meta"))
    return [(size, functions[stack_id]) for size, stack_id in rows], meta


class ChainGuessTest(TraceDirTestCase):
    def test_each_allocation_names_its_own_python_functions(self):
        for minor, python in sorted(SUPPORTED.items()):
            for mode, env in (("default", {}), ("check", {"GMT_UNWIND": "check"})):
                with self.subTest(python=f"3.{minor}", mode=mode):
                    trace = self.path(f"{mode}.3{minor}.db")
                    result = run_cli("run", "--simulate", "-q", "-o", trace, "--", python, APP, str(ROUNDS), env=env)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    truth = parse_truth(result.stdout)[0]
                    report = report_json(trace)
                    self.assertEqual((report["totals"]["leaked_bytes"], report["totals"]["leaked_allocations"]),
                                     (truth["leaked_bytes"], truth["leaked_allocations"]))
                    allocations, meta = recorded_functions(trace)
                    self.assertEqual(len(allocations), truth["leaked_allocations"])
                    wrong = []
                    for size, functions in allocations:
                        expected = expected_functions(size)
                        # A stack holds 64 frames: the deep chain's are its innermost ones.
                        if functions != expected[:len(functions)] or len(functions) < min(len(expected), 40):
                            wrong.append((size, functions[:8], expected[:8]))
                    self.assertEqual(wrong[:5], [], f"{len(wrong)} allocations with another chain's functions")
                    if minor >= 12:  # the memo answered most: the keys were taken (counted by 64s per thread)
                        self.assertGreater(int(meta["stack_memo_hits"]), truth["leaked_allocations"] // 2, meta)
                    if mode == "check":
                        self.assertEqual(meta["stack_memo_mismatches"], "0", meta)
                        # Every key taken again following the chain frame by frame: the same key.
                        self.assertGreaterEqual(int(meta["python_keys_checked"]), truth["leaked_allocations"], meta)
                        self.assertEqual(meta["python_key_mismatches"], "0", meta)
