"""PyTorch, the eager peer of the CPU benchmarks: installed on first use from
bench/requirements-decode.txt (benchmarks only, never the product)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ensure_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        env = dict(os.environ, PIP_BREAK_SYSTEM_PACKAGES="1")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r",
                        os.path.join(ROOT, "bench", "requirements-decode.txt")],
                       check=True, env=env)
