"""The in-process Python package: `gpumemtrace run` puts python/sitecustomize.py first on PYTHONPATH. A Python app
must still get its own sitecustomize (chained), even a failing one; our package must start, reach the preloaded
library, and stay out of the way with --no-python-hooks."""
import os
import sys
import unittest

from gmt_e2e import TraceDirTestCase, run_cli

PROBE = ("import os, sys\n"
         "print('user_site', os.environ.get('USER_SITE_RAN', 'no'))\n"
         "site = sys.modules.get('sitecustomize')\n"
         "print('sitecustomize', getattr(site, '__file__', None))\n"
         "print('package', 'gpumemtrace_inprocess' in sys.modules)\n"
         "print('pythonpath', os.environ.get('PYTHONPATH', ''))\n"
         "if 'gpumemtrace_inprocess' in sys.modules:\n"
         "    from gpumemtrace_inprocess import native\n"
         "    print('native', native.available())\n"
         "sys.exit(7)\n")


def parse(stdout):
    return dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)


class InProcessPackageTest(TraceDirTestCase):
    def user_site(self, body):
        folder = self.path("user_site")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "sitecustomize.py"), "w") as f:
            f.write(body)
        return folder

    def run_probe(self, *options, user_site=None):
        env = {"PYTHONPATH": user_site or ""}
        result = run_cli("run", "--simulate", "-q", "-o", self.path("probe.db"), *options, "--",
                         sys.executable, "-c", PROBE, env=env)
        self.assertEqual(result.returncode, 7, result.stderr)  # the app's own exit code, passed through
        return parse(result.stdout), result.stderr

    def test_package_starts_and_the_users_sitecustomize_still_runs(self):
        site = self.user_site("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
        seen, stderr = self.run_probe(user_site=site)
        self.assertEqual(seen["user_site"], "yes")
        # The app sees its own sitecustomize module, as without the profiler.
        self.assertEqual(seen["sitecustomize"], os.path.join(site, "sitecustomize.py"))
        self.assertEqual(seen["package"], "True")
        self.assertEqual(seen["native"], "True")
        self.assertTrue(seen["pythonpath"].endswith(":" + site), seen["pythonpath"])
        self.assertNotIn("gpumemtrace: the Python", stderr)

    def test_a_failing_user_sitecustomize_does_not_stop_the_app_or_the_package(self):
        site = self.user_site("raise RuntimeError('broken site')\n")
        seen, stderr = self.run_probe(user_site=site)
        self.assertIn("broken site", stderr)  # reported by CPython's site module, as without us
        self.assertEqual(seen["package"], "True")

    def test_no_python_hooks_leaves_pythonpath_alone(self):
        site = self.user_site("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
        seen, _ = self.run_probe("--no-python-hooks", user_site=site)
        self.assertEqual(seen["pythonpath"], site)
        self.assertEqual(seen["package"], "False")
        self.assertEqual(seen["user_site"], "yes")


if __name__ == "__main__":
    unittest.main()
