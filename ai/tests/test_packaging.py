"""The checkout builds into a wheel that holds every file of `ai`, and that wheel installs.

The build runs without isolation (the dev extra's setuptools, wheel and build) and the
install without an index, so nothing here reaches the network.
"""

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path
from tempfile import TemporaryDirectory
from unittest import TestCase

ROOT = Path(__file__).resolve().parents[2]
BUILD_TOOLS = ("build", "setuptools", "wheel")
PIP_INSTALL = ("-m", "pip", "install", "--quiet", "--no-deps", "--no-index")
# Imported from the installed wheel: where `ai` lives, then each migration by name.
IMPORT_FROM_WHEEL = """
import importlib, pkgutil, sys
sys.path.insert(0, sys.argv[1])
import ai.migrations
print(ai.__file__)
for module in pkgutil.iter_modules(ai.migrations.__path__):
    print(importlib.import_module(f"ai.migrations.{module.name}").__name__)
"""


def package_files():
    """Every file of the `ai` package in this checkout, as a wheel names it."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "ai").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def run(*args, cwd):
    """Run this interpreter with `args`; fail with its output if it fails."""
    done = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise AssertionError(f"{args} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


class TestWheel(TestCase):
    def setUp(self):
        if not (ROOT / "pyproject.toml").exists():
            self.skipTest("pyproject.toml is not shipped with an installed package")
        missing = [name for name in BUILD_TOOLS if importlib.util.find_spec(name) is None]
        if missing:
            self.skipTest(f"{', '.join(missing)} not installed (the dev extra has them)")
        tmp = TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = Path(tmp.name)

    def test_the_wheel_holds_the_whole_package_and_installs(self):
        # Without --sdist/--wheel, build makes the sdist and then the wheel from it.
        run("-m", "build", "--no-isolation", "--outdir", self.tmp / "dist", ROOT, cwd=self.tmp)
        (wheel,) = (self.tmp / "dist").glob("*.whl")
        names = set(zipfile.ZipFile(wheel).namelist())
        self.assertLessEqual({"ai/migrations/0001_initial.py", "ai/offline/engine.py"}, names)
        self.assertEqual(package_files() - names, set())

        site = self.tmp / "site"
        run(*PIP_INSTALL, "--target", site, wheel, cwd=self.tmp)
        ai_file, *migrations = run("-c", IMPORT_FROM_WHEEL, site, cwd=self.tmp).split()
        self.assertEqual(Path(ai_file), site / "ai" / "__init__.py")
        expected = sorted(
            f"ai.migrations.{path.stem}" for path in (ROOT / "ai" / "migrations").glob("0*.py")
        )
        self.assertEqual(sorted(migrations), expected)
