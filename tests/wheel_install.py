"""The wheel of django-sluice, built and installed into a fresh virtualenv, for the host-project tests."""

import site
import subprocess
import sys

from sluice_tools.processes import ROOT


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
