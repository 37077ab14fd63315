"""A Python with pytest for the plugin's tests: this one if it has pytest, else a venv in the build tree with pytest
from PyPI (made once, reused)."""
import os
import subprocess
import sys


def python_with_pytest(build_dir):
    if subprocess.run([sys.executable, "-c", "import pytest"], capture_output=True).returncode == 0:
        return sys.executable
    venv = os.path.join(os.path.abspath(build_dir), "pytest-venv")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python) or subprocess.run([python, "-c", "import pytest"]).returncode != 0:
        subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "pytest"], check=True)
    return python


def marker_line(path, marker):
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if marker in line:
                return number
    raise AssertionError(f"{marker} not in {path}")
