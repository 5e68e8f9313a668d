"""Make docs/_static/report.png: an annotated screenshot of the HTML report of a small run.

    .venv/bin/python docs/scripts/screenshot_report.py            # runs the small suite, then screenshots it
    .venv/bin/python docs/scripts/screenshot_report.py RUN_DIR    # screenshot an existing run folder

The small run: the relaxation searches (counterexamples), the Scan and Snap figures and the schema
properties under the ``dev`` profile, one process (a minute or two).  The report's sections are marked
with numbered badges (placed by their element ids, so the marks follow the template) that
docs/report.md explains.  Needs headless Chromium (Debian: ``apt-get install -y chromium``) and writes a
PNG of at most ~200 KB (a 64-colour palette; half the size if still larger).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "_static" / "report.png"
SMALL_RUN = ["properties/li2024/test_relaxations.py", "properties/tian2023/test_figures.py",
             "properties/core/test_problem_schema.py"]
# (element id, badge number): docs/report.md explains each number.
MARKS = [("verdict", 1), ("run", 2), ("dashboard", 3), ("counterexamples", 4)]
BADGES = """
<style>.doc-badge{display:inline-block;min-width:1.6em;height:1.6em;line-height:1.6em;border-radius:0.8em;
background:#d62728;color:#fff;font:bold 15px sans-serif;text-align:center;margin-right:0.4em;
box-shadow:0 0 0 3px #fff}</style>
<script>
document.addEventListener("DOMContentLoaded", function () {
  %s.forEach(function (m) {
    var el = document.getElementById(m[0]);
    if (!el) return;
    var target = el.querySelector("h2") || el;
    var b = document.createElement("span"); b.className = "doc-badge"; b.textContent = m[1];
    target.insertBefore(b, target.firstChild);
  });
});
</script>
"""
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]


def small_run(report_root: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                    "--hypothesis-profile=dev", "--report-root", str(report_root), *SMALL_RUN], cwd=ROOT, check=False)
    return (report_root / "latest").resolve()


def screenshot(run_dir: Path, out: Path, width: int = 1280, height: int = 1500) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("chromium not found (Debian: apt-get install -y chromium)")
    page = run_dir / "index.html"
    html = page.read_text()
    marks = "[" + ",".join(f'["{i}",{n}]' for i, n in MARKS) + "]"
    annotated = run_dir / "index.annotated.html"
    annotated.write_text(html.replace("</head>", BADGES % marks + "</head>", 1))
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                        f"--screenshot={out}", annotated.as_uri()], check=True, capture_output=True, timeout=120)
    annotated.unlink()
    shrink(out)


def shrink(path: Path, limit: int = 200_000) -> None:
    """Keep the docs' pictures small: a 64-colour palette (text stays sharp), then half the size if needed."""
    from PIL import Image  # pillow comes with matplotlib

    img = Image.open(path).convert("RGB")
    img.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    if path.stat().st_size > limit:
        img = img.resize((img.width // 2, img.height // 2), Image.Resampling.LANCZOS)
        img.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def main(argv: list[str]) -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    if argv:
        run_dir = Path(argv[0]).resolve()
    else:
        run_dir = small_run(Path(tempfile.mkdtemp(prefix="report-shot-")))
    screenshot(run_dir, OUT)
    print(f"{OUT} ({OUT.stat().st_size / 1e3:.0f} KB) from {run_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
