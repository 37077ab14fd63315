"""Memory shared between processes under the simulated runtime: samples/ipc_share exports two buffers from device
0; its child opens them on device 1, closes one and leaves the other open. Each trace, the merged report and the
devices table are checked with exact figures."""
import glob
import json
import os
import re
import sqlite3
import sys
import unittest

from gmt_e2e import TraceDirTestCase, marker_line, report_json, run_cli, sample

MIB = 1 << 20
SIM_ENV = {"GMT_SIM_DEVICE_COUNT": "2", "GMT_SIM_DEVICE_BYTES": "1G"}


def sim_uuid(ordinal):
    """The simulator's UUID of a device (tests/simcuda/api_device.cpp: "gmtsim", zeros, the ordinal last)."""
    raw = b"gmtsim" + bytes(9) + bytes([ordinal])
    h = raw.hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class IpcTest(TraceDirTestCase):
    def setUp(self):
        super().setUp()
        result = run_cli("run", "--simulate", "-q", "-o", self.path("ipc.%p.db"), "--", sample("ipc_share"),
                         env=SIM_ENV)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.truth = dict(re.findall(r"ipc-truth: (\w+) (.*)", result.stdout))
        self.assertEqual(set(self.truth), {"exporter", "importer"}, result.stdout)
        self.importer_truth = dict(kv.split("=") for kv in self.truth["importer"].split())
        traces = sorted(glob.glob(self.path("*.db")))
        self.assertEqual(len(traces), 2, traces)
        self.exporter = self.importer = None
        for trace in traces:
            with sqlite3.connect(trace) as db:
                command = db.execute("SELECT value FROM meta WHERE key = 'command_line'").fetchone()[0]
            if command.endswith(" import"):
                self.importer = trace
            else:
                self.exporter = trace
        self.assertIsNotNone(self.exporter)
        self.assertIsNotNone(self.importer)

    def devices_table(self, trace):
        with sqlite3.connect(trace) as db:
            return db.execute("SELECT ordinal, name, uuid, total_bytes, pci_bus_id FROM devices "
                              "ORDER BY ordinal").fetchall()

    def test_importer_counts_imported_memory_apart(self):
        self.assertEqual(self.importer_truth["device"], "1")  # two simulated devices: the child uses device 1
        own = int(self.importer_truth["own_bytes"])
        imported_bytes = int(self.importer_truth["imported_bytes"])
        left_open = int(self.importer_truth["left_open_bytes"])
        self.assertEqual((own, imported_bytes, left_open), (1 * MIB, 8 * MIB, 2 * MIB))
        report = report_json(self.importer)
        # Its own memory only: 1 MiB on device 1, freed.
        self.assertEqual(report["totals"]["allocations"], 1)
        self.assertEqual(report["totals"]["allocated_bytes"], own)
        self.assertEqual(report["totals"]["peak_bytes"], own)
        self.assertEqual(report["totals"]["leaked_bytes"], 0)
        self.assertEqual(report["totals"]["unmatched_frees"], 0)
        self.assertEqual(report["leaks"], [])
        self.assertEqual([p["device"] for p in report["peak_stacks"]], [1])
        # The exporter's memory, on the exporter's device 0.
        imported = report["imported"]
        self.assertEqual((imported["opens"], imported["closes"]), (2, 1))
        self.assertEqual(imported["peak_bytes"], imported_bytes)
        self.assertEqual([(d["device"], d["peak_bytes"], d["opens"], d["open_at_end_bytes"]) for d in imported["devices"]],
                         [(0, imported_bytes, 2, left_open)])
        self.assertEqual((imported["left_open_handles"], imported["left_open_bytes"]), (1, left_open))
        group = imported["left_open"][0]
        self.assertEqual(group["apis"], ["cudaIpcOpenMemHandle"])
        self.assertIn("open_and_forget", group["stack"][0]["function"])
        self.assertEqual(group["stack"][0]["line"], marker_line("ipc_share.cu", "IPC-OPEN: left_open"))

        text = run_cli("report", self.importer)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("No leaks: every allocation was freed.", text.stdout)
        self.assertIn("IPC handles left open: 1 handle (2.00 MiB (2097152 B))", text.stdout)
        self.assertIn(f"  device 0: Simulated GPU 0 (gpumemtrace) ({sim_uuid(0)}): peak 8.00 MiB (8388608 B)",
                      text.stdout)

    def test_exporter_owns_the_memory(self):
        report = report_json(self.exporter)
        self.assertEqual(report["totals"]["allocated_bytes"], 8 * MIB)
        self.assertEqual(report["totals"]["peak_bytes"], 8 * MIB)
        self.assertEqual(report["totals"]["leaked_bytes"], 0)
        self.assertEqual([p["device"] for p in report["peak_stacks"]], [0])
        self.assertEqual(report["imported"]["opens"], 0)
        self.assertEqual(report["imported"]["left_open"], [])

    def test_devices_table_names_each_device_once(self):
        one_gib = 1 << 30
        self.assertEqual(self.devices_table(self.exporter),
                         [(0, "Simulated GPU 0 (gpumemtrace)", sim_uuid(0), one_gib, "0000:01:00.0")])
        # The importer's events name device 1 (its own memory) and device 0 (the imported memory).
        self.assertEqual(self.devices_table(self.importer),
                         [(0, "Simulated GPU 0 (gpumemtrace)", sim_uuid(0), one_gib, "0000:01:00.0"),
                          (1, "Simulated GPU 1 (gpumemtrace)", sim_uuid(1), one_gib, "0000:02:00.0")])
        report = report_json(self.importer)
        self.assertEqual([(d["ordinal"], d["name"], d["uuid"]) for d in report["devices"]],
                         [(0, "Simulated GPU 0 (gpumemtrace)", sim_uuid(0)),
                          (1, "Simulated GPU 1 (gpumemtrace)", sim_uuid(1))])
        text = run_cli("report", self.exporter)
        self.assertIn(f"  device 0: Simulated GPU 0 (gpumemtrace) ({sim_uuid(0)}), 1.00 GiB, PCI 0000:01:00.0\n",
                      text.stdout)

    def test_merged_report_shows_imported_bytes_per_process(self):
        result = run_cli("report", "--format", "json", self.dir)
        self.assertEqual(result.returncode, 0, result.stderr)
        merged = json.loads(result.stdout)
        by_path = {p["path"]: p for p in merged["processes"]}
        exporter, importer = by_path[self.exporter], by_path[self.importer]
        self.assertEqual((exporter["peak_bytes"], exporter["leaked_bytes"]), (8 * MIB, 0))
        self.assertEqual(exporter["imported"]["peak_bytes"], 0)
        self.assertEqual((importer["peak_bytes"], importer["leaked_bytes"]), (1 * MIB, 0))
        self.assertEqual(importer["imported"]["peak_bytes"], 8 * MIB)
        self.assertEqual([(d["device"], d["peak_bytes"], d["open_at_end_bytes"])
                          for d in importer["imported"]["per_device"]], [(0, 8 * MIB, 2 * MIB)])
        self.assertEqual((importer["imported"]["left_open_handles"], importer["imported"]["left_open_bytes"]),
                         (1, 2 * MIB))
        self.assertEqual([d["name"] for d in importer["device_info"]],
                         ["Simulated GPU 0 (gpumemtrace)", "Simulated GPU 1 (gpumemtrace)"])
        self.assertEqual(merged["leaks"], [])
        self.assertEqual(merged["outliers"], [])

        text = run_cli("report", self.dir)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn(f"imported from other processes on device 0: Simulated GPU 0 (gpumemtrace) ({sim_uuid(0)}): "
                      "peak 8.00 MiB (8388608 B), 2.00 MiB (2097152 B) open at the end", text.stdout)
        self.assertIn("IPC handles left open: 1 (2.00 MiB (2097152 B))", text.stdout)
        self.assertIn(f"device 1: Simulated GPU 1 (gpumemtrace) ({sim_uuid(1)}): peak 1.00 MiB", text.stdout)

    def test_html_report_shows_imported_memory(self):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "html"))
        import html_support
        browser = html_support.find_chromium()
        if browser is None:
            self.skipTest("chromium is not installed (scripts/install-deps.sh installs it)")
        page = self.path("importer.html")
        result = run_cli("report", "--format", "html", "-o", page, self.importer)
        self.assertEqual(result.returncode, 0, result.stderr)
        dom = html_support.parse_dom(html_support.dump_dom(browser, page))
        tables = {t.attrs.get("id"): t for t in dom.find_all("table")}
        rows = [[td.text() for td in tr.find_all("td")] for tr in tables["imported-table"].find_all("tr")][1:]
        self.assertEqual(rows, [["device 0 (Simulated GPU 0 (gpumemtrace))", "8.00 MiB", "2", "2.00 MiB"]])
        left_open = tables["left-open-table"].find_all("tr", cls="left-open")
        self.assertEqual(len(left_open), 1)
        self.assertIn("open_and_forget", left_open[0].text())
        header = tables["trace-info"].text()
        self.assertIn(f"device 1: Simulated GPU 1 (gpumemtrace) ({sim_uuid(1)})", header)


if __name__ == "__main__":
    unittest.main()
