"""The report in a real browser: headless Chromium opens the page of a small synthetic run and the page says
what pytest said.

A nested ``pytest`` run (subprocess, its own report root) of a synthetic suite with a pass, an expected
failure (xfail), an unexpected pass (non-strict xfail that passes), an untagged test in a paper folder and
one in ``properties/suite/``, a relaxation row whose outcome is the expected one with details, a
counterexample problem file -- and, in the red variant, one failing test.  Headless Chromium loads the
report and the test asserts, on the rendered page:

* the header's verdict agrees with pytest's exit status (green exactly when it is 0, by its computed
  colour), and the xpass is shown apart (its own note, not counted as a failure);
* every section is rendered (present, laid out with a height, with text); every image decoded;
* no console error, no uncaught exception, no failed load (the Log domain reports those);
* every in-page link reaches an element, and every link to a file (problem file, observations) exists;
* the expected relaxation row is green, untagged tests sit under a readable group, not a module name;
* the dashboard has one card per claim of the registry (laid out, with its statement), and the claim whose
  file holds a synthetic property shows that property's undecided examples as ``undecided: N``.

Driven over the Chrome DevTools protocol (for the console and load errors ``--dump-dom`` cannot give),
with tornado's websocket client: tornado is already installed (dask.distributed depends on it), where
Playwright's Python package would add a 40 MB driver for the same few commands.

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it when it can); without it these tests skip
and say how to install it.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from reports import generate

pytestmark = pytest.mark.theorem("Report")

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
INSTALL = "apt-get update && apt-get install -y chromium (Debian, as root; .ci/run does it when it can)"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--window-size=1400,1000")
GIVE_UP_S = 90  # a limit against hanging, not a timing assertion: nothing here measures speed

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason=f"headless Chromium not found; install it: {INSTALL}")


# --------------------------------------------------------------------------------------------------
# A small DevTools-protocol client
# --------------------------------------------------------------------------------------------------

class Chromium:
    """One headless Chromium with a fresh profile, driven over its DevTools websocket."""

    def __init__(self, profile: Path):
        self.profile = profile
        profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def endpoint(self) -> str:
        """The browser's websocket URL, from the DevToolsActivePort file Chromium writes when it listens."""
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + GIVE_UP_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}: "
                                   f"{self.proc.stderr.read().decode(errors='replace')[-2000:]}")
            lines = port_file.read_text().split() if port_file.exists() else []
            if len(lines) >= 2:
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            time.sleep(0.05)
        raise RuntimeError(f"chromium did not open its DevTools port within {GIVE_UP_S} s")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


PAGE_PROBE = r"""
(() => {
  const box = e => { const r = e.getBoundingClientRect(); return {height: r.height, width: r.width}; };
  const verdict = document.getElementById('verdict');
  const sections = {};
  for (const id of SECTIONS) {
    const e = document.getElementById(id);
    sections[id] = e ? {...box(e), text: e.innerText.trim().length, display: getComputedStyle(e).display} : null;
  }
  const hrefs = [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'));
  const note = document.getElementById('xpass-note');
  const pill = r => r.querySelector('.pill');
  return {
    title: document.title,
    verdict: verdict && {text: verdict.innerText, cls: verdict.className, exit: verdict.dataset.exitstatus,
                         background: getComputedStyle(verdict).backgroundColor, ...box(verdict)},
    xpass_note: note && {text: note.innerText, background: getComputedStyle(note).backgroundColor, ...box(note)},
    good: getComputedStyle(document.documentElement).getPropertyValue('--good').trim(),
    bad: getComputedStyle(document.documentElement).getPropertyValue('--bad').trim(),
    warn: getComputedStyle(document.documentElement).getPropertyValue('--warn').trim(),
    sections,
    hrefs,
    missing_anchors: hrefs.filter(h => h.startsWith('#') && !document.getElementById(decodeURIComponent(h.slice(1)))),
    images: [...document.images].map(i => ({alt: i.alt, ok: i.complete && i.naturalWidth > 0})),
    relaxations: [...document.querySelectorAll('#relaxations tbody tr')].map(r => ({
        cls: r.className, outcome: pill(r).innerText, background: getComputedStyle(pill(r)).backgroundColor})),
    theorem_rows: [...document.querySelectorAll('#dashboard-table tbody.theorems tr')].map(r => r.cells[0].innerText),
    untagged_rows: [...document.querySelectorAll('#dashboard-table tbody.untagged tr:not(.sub)')].map(
        r => ({name: r.cells[0].innerText, cls: r.className})),
    xpasses: [...document.querySelectorAll('#xpasses + p + ul li')].map(li => li.innerText),
    claims: [...document.querySelectorAll('#dashboard article.claim')].map(a => ({
        name: a.dataset.claim, cls: a.className, text: a.innerText, ...box(a)})),
  };
})()
"""


async def _inspect(ws_url: str, page_url: str) -> dict:
    """Open ``page_url`` in a new tab; the probe's result, every console/log error and a screenshot."""
    from tornado.websocket import websocket_connect

    conn = await asyncio.wait_for(websocket_connect(ws_url, max_message_size=64 << 20), GIVE_UP_S)
    counter = 0
    events: list[dict] = []

    async def call(method, params=None, session=None):
        nonlocal counter
        counter += 1
        msg = {"id": counter, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        await conn.write_message(json.dumps(msg))
        while True:
            raw = await asyncio.wait_for(conn.read_message(), GIVE_UP_S)
            if raw is None:
                raise RuntimeError("chromium closed the DevTools connection")
            reply = json.loads(raw)
            if reply.get("id") == counter:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            events.append(reply)

    async def until(method, session):
        seen = 0
        while True:
            for e in events[seen:]:
                if e.get("method") == method and e.get("sessionId") == session:
                    return e
            seen = len(events)
            raw = await asyncio.wait_for(conn.read_message(), GIVE_UP_S)
            if raw is None:
                raise RuntimeError("chromium closed the DevTools connection")
            events.append(json.loads(raw))

    try:
        target = (await call("Target.createTarget", {"url": "about:blank"}))["targetId"]
        session = (await call("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            await call(f"{domain}.enable", session=session)
        await call("Page.navigate", {"url": page_url}, session=session)
        await until("Page.loadEventFired", session)
        probe = PAGE_PROBE.replace("SECTIONS", json.dumps(list(generate.SECTIONS)))
        result = await call("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session=session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"the probe failed: {result['exceptionDetails']}")
        shot = await call("Page.captureScreenshot", {"format": "png"}, session=session)
        await call("Target.closeTarget", {"targetId": target})
    finally:
        conn.close()
    errors = []
    for e in events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append(f"console.{p['type']}: {[a.get('value', a.get('description')) for a in p.get('args', [])]}")
        elif e.get("method") == "Runtime.exceptionThrown":
            errors.append(f"exception: {p.get('exceptionDetails', {}).get('text')}")
        elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
    return {"page": result["result"]["value"], "errors": errors, "screenshot": shot["data"]}


def open_in_chromium(html: Path, profile: Path) -> dict:
    pytest.importorskip("tornado.websocket", reason="tornado (installed with dask[distributed]) drives Chromium")
    with Chromium(profile) as browser:
        return asyncio.run(_inspect(browser.endpoint(), html.resolve().as_uri()))


# --------------------------------------------------------------------------------------------------
# The synthetic suite
# --------------------------------------------------------------------------------------------------

CONFTEST = """
from hypothesis import settings
pytest_plugins = ["reports.plugin"]
settings.register_profile("ci", max_examples=10, derandomize=True, deadline=None, print_blob=True)
settings.load_profile("ci")
"""

PAPER_TESTS = '''
import json
import pytest
from hypothesis import given, strategies as st
from reports.record import record_counterexample, record_inputs, record_relaxation, report_dir

@pytest.mark.theorem("Theorem 1")
@given(st.integers(2, 9))
def test_passes(K):
    record_inputs(K=K)

@pytest.mark.theorem("Relaxations")
def test_relaxation_as_expected():
    folder = report_dir() / "counterexamples"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "head.json"
    problem = {"embeddings": [[1, 0], [0, 1]], "sequences": [[0, 1]], "labels": [0], "loss": "log"}
    path.write_text(json.dumps(problem))
    record_counterexample(title="Theorem 1 without head", problem=problem, what_fails="correlation 0.2",
                          amount=0.2, problem_file=str(path), replay=f"python -m theory analyze {path}")
    record_relaxation(theorem="Theorem 1", relaxation="head", expected="counterexample",
                      outcome=f"counterexample (n=1, K=2) at {path.name}", reason="synthetic")

@pytest.mark.theorem("Theorem 2")
@pytest.mark.xfail(strict=False, reason="a known gap that is still open")
def test_expected_failure():
    assert False

@pytest.mark.theorem("Theorem 2")
@pytest.mark.xfail(strict=False, reason="a gap that seems closed now")
def test_unexpected_pass():
    pass

def test_untagged_in_paper_folder():
    pass
'''

FAILING_TEST = '''
@pytest.mark.theorem("Theorem 2")
def test_fails():
    assert 1 == 2, "synthetic failure"
'''

# Written into the first file of the registry's first claim: a property whose verdict is undecided on every
# third example (counted as not judged, the way the suite's three-valued properties count UNDECIDED).
CLAIM_TESTS = '''
import pytest
from hypothesis import assume, event, given, strategies as st

@pytest.mark.theorem("Theorem 1")
@pytest.mark.judged(floor=0.1)
@given(st.integers(0, 9))
def test_claim_property(x):
    if x % 3 == 0:
        event("not judged: undecided at the maximum budget")
        assume(False)
'''

SUITE_TESTS = '''
def test_machinery():
    pass
'''


def synthetic_run(tmp_path: Path, failing: bool) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    paper = tmp_path / "properties" / "li2024"
    suite = tmp_path / "properties" / "suite"
    paper.mkdir(parents=True)
    suite.mkdir(parents=True)
    (paper / "test_paper_synth.py").write_text(textwrap.dedent(PAPER_TESTS) + (FAILING_TEST if failing else ""))
    claim_file = tmp_path / first_claim_file()
    claim_file.parent.mkdir(parents=True, exist_ok=True)
    claim_file.write_text(CLAIM_TESTS)
    (suite / "test_suite_synth.py").write_text(SUITE_TESTS)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name in ("PYTEST_ADDOPTS", "TPG_REPORT_OBSERVATIONS", "TPG_REPORT_KEEP"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-rxX",
                           "--rootdir", str(tmp_path), "--report-root", str(tmp_path / "reports"), "properties"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    latest = tmp_path / "reports" / "latest"
    assert latest.exists(), f"no reports/latest\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done, latest.resolve()


def first_claim_file() -> str:
    from theory.claims import all_claims

    return all_claims()[0].properties[0]


def _rgb(hex_colour: str) -> str:
    h = hex_colour.lstrip("#")
    return "rgb({}, {}, {})".format(*(int(h[i:i + 2], 16) for i in (0, 2, 4)))


@needs_chromium
@pytest.mark.parametrize("failing", [False, True], ids=["green", "red"])
def test_report_in_chromium_tells_the_truth(tmp_path, failing):
    done, run_dir = synthetic_run(tmp_path, failing)
    assert done.returncode == (1 if failing else 0), done.stdout[-3000:]
    assert "XPASS" in done.stdout and "XFAIL" in done.stdout, done.stdout[-3000:]  # the run is what we think
    seen = open_in_chromium(run_dir / "index.html", tmp_path / "chromium-profile")
    page, errors = seen["page"], seen["errors"]
    assert not errors, f"the browser reported errors: {errors}"

    # The verdict is pytest's: green exactly when it exited 0, by the colour the browser computed.
    v = page["verdict"]
    assert v is not None and v["height"] > 0, "no verdict in the header"
    assert v["exit"] == str(done.returncode), v
    expected_colour = _rgb(page["bad"] if done.returncode else page["good"])
    assert v["background"] == expected_colour, (v, page["good"], page["bad"])
    if failing:
        assert "1 of 8 properties failed" in v["text"], v["text"]
    else:
        assert "none of 7 properties failed: 5 passed, 1 xfailed" in v["text"], v["text"]
    # The xpass is shown apart: its own note (not red, not green), listed with its reason, never a failure.
    note = page["xpass_note"]
    assert note is not None and note["height"] > 0 and "1 xpassed" in note["text"], note
    assert note["background"] not in (_rgb(page["bad"]), _rgb(page["good"])), note
    assert any("test_unexpected_pass" in li and "a gap that seems closed now" in li for li in page["xpasses"]), page["xpasses"]
    assert "(1 failed)" in page["title"] if failing else "failed" not in page["title"], page["title"]

    # Every section rendered, every image decoded.
    for sid, box in page["sections"].items():
        assert box is not None, f"section {sid} missing"
        assert box["display"] != "none" and box["height"] > 0 and box["text"] > 0, (sid, box)
    assert all(img["ok"] for img in page["images"]), page["images"]

    # Links: in-page anchors reach an element; links to files (problem file, observations) exist.
    assert not page["missing_anchors"], page["missing_anchors"]
    files = [h for h in page["hrefs"] if not h.startswith(("#", "data:", "http:", "https:"))]
    assert "counterexamples/head.json" in files, files
    assert any(h.startswith("observations/") for h in files), files
    for href in files:
        target = (run_dir / unquote(urlparse(href).path)).resolve()
        assert target.is_file(), f"link {href!r} leads nowhere ({target})"

    # The expected relaxation outcome is green (per the legend), not amber.
    rows = page["relaxations"]
    assert len(rows) == 1 and rows[0]["outcome"].startswith("counterexample"), rows
    assert rows[0]["background"] == _rgb(page["good"]), (rows, page["good"], page["warn"])

    # Untagged tests: readable groups apart from the theorem rows, no raw module name.
    assert [r["name"].split("\n")[0] for r in page["untagged_rows"]] == ["Li et al. 2024, untagged",
                                                                         "Suite machinery"], page["untagged_rows"]
    assert not any("test_" in name for name in page["theorem_rows"]), page["theorem_rows"]
    assert "Theorem 1" in page["theorem_rows"]

    # One card per claim, laid out, with its statement; the claim holding the synthetic property shows its
    # undecided examples (as the run's data counts them), the others that none of their tests ran.
    from theory.claims import all_claims

    claims = all_claims()
    cards = {c["name"]: c for c in page["claims"]}
    assert [c["name"] for c in page["claims"]] == [c.name for c in claims], page["claims"]
    for c in claims:
        card = cards[c.name]
        assert card["height"] > 0 and card["width"] > 0, card
        assert " ".join(c.statement.split()) in " ".join(card["text"].split()), (c.name, card["text"])
    nodeid = f"{first_claim_file()}::test_claim_property"
    run = generate.load_run(run_dir)
    undecided = dict(generate._hypothesis_summary(run["tests"][nodeid]["hypothesis"])["not_judged"])
    n = undecided["undecided at the maximum budget"]
    assert n > 0
    holding = [c.name for c in claims if first_claim_file() in c.properties]
    for c in claims:
        text = cards[c.name]["text"]
        if c.name in holding:
            assert f"undecided: {n}" in text and "1 test: 1 passed, 0 failed" in text, (c.name, text)
        else:
            assert "no property ran" in text and "none" in cards[c.name]["cls"].split(), (c.name, text)
    shot = Path(tmp_path / "screenshot.png")
    shot.write_bytes(__import__("base64").b64decode(seen["screenshot"]))
    assert shot.read_bytes().startswith(b"\x89PNG"), "no screenshot"


@needs_chromium
def test_browser_check_sees_a_broken_page(tmp_path):
    """The check can fail: a page with a console error, a failed load and a missing anchor is reported."""
    broken = tmp_path / "broken.html"
    broken.write_text('<!DOCTYPE html><html><head><title>x</title></head><body>'
                      '<div id="verdict" class="status good" data-exitstatus="1">all passed</div>'
                      '<a href="#nowhere">x</a><img src="missing.png" alt="m">'
                      '<script>console.error("planted")</script></body></html>')
    seen = open_in_chromium(broken, tmp_path / "chromium-profile")
    assert any("planted" in e for e in seen["errors"]), seen["errors"]
    assert any("missing.png" in e for e in seen["errors"]), seen["errors"]
    assert seen["page"]["missing_anchors"] == ["#nowhere"]
    assert seen["page"]["images"] == [{"alt": "m", "ok": False}]
    # A green header with exit status 1: what the truth check above rejects.
    assert seen["page"]["verdict"]["exit"] == "1" and seen["page"]["verdict"]["cls"] == "status good"
