"""Helpers of the host-project tests: the wheel of django-sluice in a fresh virtualenv, and a host's commands."""

import json
import site
import subprocess
import sys
import textwrap

import pytest

from sluice_tools.processes import ROOT, ManagedProcess


def wheel_in_fresh_venv(folder):
    """Build dist/django_sluice-*.whl in ``folder`` with the build backend only, and pip install it into a new
    virtualenv there; return (the virtualenv's python, the wheel).

    The machine has no network, so the virtualenv sees the locked dependencies through a .pth file (never the
    repository); pip still checks the wheel's requirements against them (no --no-deps).
    """
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(folder / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = (folder / "dist").glob("django_sluice-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True, timeout=120)
    python = folder / "venv" / "bin" / "python"
    [packages] = (folder / "venv" / "lib").glob("python3*/site-packages")
    (packages / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", str(wheel)], check=True, timeout=300)
    return python, wheel


class Host:
    """A host project in ``folder``, its commands run with ``python`` (the fresh virtualenv's) under its settings."""

    ENV = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "host.settings"}

    def __init__(self, folder, python):
        self.folder, self.python = folder, python
        self.settings = folder / "host" / "settings.py"

    def run(self, *args, env=None, check=False):
        done = subprocess.run(
            [str(self.python), *args],
            cwd=self.folder,
            env={**self.ENV, **(env or {})},
            capture_output=True,
            text=True,
            timeout=180,
        )
        if check and done.returncode:
            pytest.fail(f"{args} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done

    def manage(self, *args, **kwargs):
        return self.run("manage.py", *args, **kwargs)

    def shell(self, code, **kwargs):
        return self.manage("shell", "-c", textwrap.dedent(code), **kwargs)

    def answer(self, code):
        """Run ``code`` in `manage.py shell`; its last line of output, parsed as JSON."""
        done = self.shell(code, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    def process(self, name, *args, ready_text):
        """A ManagedProcess of the host's python in its folder, with its settings (not started)."""
        started = ManagedProcess(f"host-{name}", [str(self.python), *args], env=self.ENV, ready_text=ready_text)
        started.cwd = self.folder
        return started

    def with_settings(self, extra):
        """Append ``extra`` to the host's settings for the next commands; return a function that takes it back."""
        saved = self.settings.read_text()
        self.settings.write_text(saved + "\n" + extra + "\n")
        return lambda: self.settings.write_text(saved)
