"""The GPU suite for memory imported from other processes: samples/ipc_share (the exporter allocates 6 + 2 MiB on
device 0 and hands IPC handles to a child it spawns; the child opens them on device 1 when there are 2 GPUs, else
on device 0, closes the first and leaves the second open) under the CUPTI and driver-hook backends. Checks, per
backend: the importer's imported bytes exactly, on the device the driver names for the opened pointer (the
importer's); none of it in the importer's totals
or leaks; the handle left open with the sample's source line; the devices table naming real GPUs with UUIDs.
Works on 1 or 2 GPUs; skips (exit 77) without one."""
import os
import re
import sqlite3
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from gmt_e2e import TraceDirTestCase, marker_line, report_json, run_cli, sample  # noqa: E402
from test_gpu_samples import SKIP, have_gpu  # noqa: E402

MIB = 1 << 20
BACKENDS = ("cupti", "hooks")


class IpcOnGpuTest(TraceDirTestCase):
    def run_sample(self, backend):
        pattern = self.path(f"ipc-{backend}.%p.db")
        result = run_cli("run", "--backend", backend, "-o", pattern, "--", sample("ipc_share"))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        truth = dict(re.findall(r"ipc-truth: (\w+) (.*)", result.stdout))
        self.assertEqual(set(truth), {"exporter", "importer"}, result.stdout)
        importer_truth = dict(kv.split("=") for kv in truth["importer"].split())
        exporter = importer = None
        traces = sorted(os.path.join(self.dir, n) for n in os.listdir(self.dir)
                        if n.startswith(f"ipc-{backend}.") and n.endswith(".db"))
        self.assertEqual(len(traces), 2, os.listdir(self.dir))
        for trace in traces:
            with sqlite3.connect(trace) as db:
                command = db.execute("SELECT value FROM meta WHERE key = 'command_line'").fetchone()[0]
            if command.endswith(" import"):
                importer = trace
            else:
                exporter = trace
        self.assertIsNotNone(exporter, os.listdir(self.dir))
        self.assertIsNotNone(importer, os.listdir(self.dir))
        return exporter, importer, importer_truth

    def check_backend(self, backend):
        exporter, importer, truth = self.run_sample(backend)
        own, imported_bytes, left_open = (int(truth["own_bytes"]), int(truth["imported_bytes"]),
                                          int(truth["left_open_bytes"]))
        importer_device = int(truth["device"])

        report = report_json(importer)
        self.assertEqual(report["trace"]["backend"], backend)
        totals = report["totals"]
        # The importer's own memory only: its 1 MiB, freed; the imported memory is no leak of its.
        self.assertEqual(totals["peak_bytes"], own, f"{backend}: {totals}")
        self.assertEqual(totals["leaked_bytes"], 0, f"{backend}: {report['leaks']}")
        self.assertEqual(totals["unmatched_frees"], 0)
        self.assertEqual([p["device"] for p in report["peak_stacks"]], [importer_device])

        imported = report["imported"]
        print(f"{backend}: importer on device {importer_device}: imported {imported}", flush=True)
        self.assertEqual((imported["opens"], imported["closes"]), (2, 1), backend)
        self.assertEqual(imported["peak_bytes"], imported_bytes, backend)
        # An IPC-opened pointer is on the device the driver names for it: measured on two H200s, the device of
        # the context that opened it (the importer's), not the exporter's device 0.
        self.assertEqual([(d["device"], d["peak_bytes"], d["open_at_end_bytes"]) for d in imported["devices"]],
                         [(importer_device, imported_bytes, left_open)], backend)
        self.assertEqual((imported["left_open_handles"], imported["left_open_bytes"]), (1, left_open), backend)
        frame = imported["left_open"][0]["stack"][0]
        self.assertIn("open_and_forget", frame["function"] or "", backend)
        self.assertEqual(frame["line"], marker_line("ipc_share.cu", "IPC-OPEN: left_open"), backend)

        exporter_report = report_json(exporter)
        self.assertEqual(exporter_report["totals"]["peak_bytes"], imported_bytes, backend)
        self.assertEqual(exporter_report["totals"]["leaked_bytes"], 0, backend)
        self.assertEqual(exporter_report["imported"]["opens"], 0, backend)

        for trace, device in ((exporter, 0), (importer, importer_device)):
            with sqlite3.connect(trace) as db:
                rows = db.execute("SELECT ordinal, name, uuid, total_bytes, pci_bus_id FROM devices").fetchall()
            print(f"{backend}: devices of {os.path.basename(trace)}: {rows}", flush=True)
            self.assertIn(device, [r[0] for r in rows])
            for ordinal, name, uuid, total_bytes, pci_bus_id in rows:
                self.assertTrue(name and not name.startswith("Simulated"), rows)
                self.assertRegex(uuid or "", r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
                self.assertGreater(total_bytes or 0, 0)
                self.assertRegex(pci_bus_id or "", r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9]$")
        text = run_cli("report", importer)
        self.assertIn("IPC handles left open: 1 handle", text.stdout)

    def test_cupti(self):
        self.check_backend("cupti")

    def test_hooks(self):
        self.check_backend("hooks")


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
