"""Make the figures of docs/reproductions.md: each ``reproduce NAME --figure`` at the budget below.

    .venv/bin/python docs/scripts/make_figures.py [NAME ...]

The budgets are smaller than the defaults where a default run takes minutes (the page says which);
every figure is drawn by the same command a reader runs.  Output: docs/_static/figures/NAME.png.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "_static" / "figures"
COMMANDS = {  # name -> options (the docs page quotes these)
    "li-local": ["--trials", "10"],
    "tian-fig3": [],
    "tian-fig5": ["--seeds", "1", "--steps", "2000"],
    "tian-fig8": [],
    "tian-fig9": [],
    "tian-fig11": ["--seeds", "3"],
    "tian-fig12": ["--seeds", "3"],
}


def main(names: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names or COMMANDS:
        png = OUT / f"{name}.png"
        subprocess.run([sys.executable, "-m", "theory", "reproduce", name, *COMMANDS[name], "--figure", str(png)],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        print(f"{png.relative_to(ROOT)}: {png.stat().st_size / 1e3:.0f} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
