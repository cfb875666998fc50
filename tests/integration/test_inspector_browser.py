"""The web inspector in a real browser: Debian's headless ``chromium``, driven by selenium through
Debian's ``chromedriver`` (``.ci/run`` installs both with apt; selenium is given their paths, so it
never downloads a browser or a driver), with JavaScript switched off: every page must work without it.

The server is the real CLI, ``pagefault inspect --web``, on a data directory another process seeded
(``test_inspector_http.seed_memory``: a thread compacted several times, facts, a superseded fact, a
flagged record, a document, a typed block, a second user). The test opens each page of the seeded
user, checks the DOM for the blocks, records and plot it must show, uses the forms (an edit, a
filter, a delete after its confirmation) and saves a full-page screenshot of each page in its
temporary directory (printed with ``-s``); with ``PAGEFAULT_INSPECTOR_SCREENSHOTS=<dir>`` set, copies
go there too.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait
from support.devserver import free_port

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
HERE = Path(__file__).resolve().parent
WIDTH = 1280
SEED = """
import dataclasses, json, sys
sys.path.insert(0, sys.argv[2])
from test_inspector_http import seed_memory
print(json.dumps(dataclasses.asdict(seed_memory(sys.argv[1])), default=str))
"""


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> dict:
    """The seeded directory, written by another process (this one never opens it: the CLI's server does)."""
    data_dir = tmp_path_factory.mktemp("browser") / "pf"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGEFAULT_")}
    out = subprocess.run([sys.executable, "-c", SEED, str(data_dir), str(HERE)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    found.pop("state")
    return found


@pytest.fixture(scope="module")
def server(seeded, tmp_path_factory):
    """``pagefault inspect --web`` on the seeded directory, on a free loopback port."""
    port = free_port()
    log = tmp_path_factory.mktemp("cli") / "inspect.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGEFAULT_")}
    cmd = [str(Path(sys.executable).with_name("pagefault")), "inspect", "--web", "--port", str(port),
           "--user", "ann", "--data-dir", seeded["data_dir"]]
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{url}/inspector/", timeout=2) as r:
                if r.status == 200:
                    break
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"pagefault inspect --web did not serve {url}:\n{log.read_text()[-3000:]}", pytrace=False)
        time.sleep(0.2)
    printed = log.read_text()
    assert f"pagefault inspector: {url}/inspector/ann/context" in printed and "loopback only" in printed
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            pytest.fail(f"no {path}: apt-get install -y chromium chromium-driver (.ci/run does)", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}", f"--window-size={WIDTH},900"):
        options.add_argument(arg)
    options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def shoot(driver: WebDriver, shots: Path, name: str) -> Path:
    """A screenshot of the whole page (not only the window) as ``<name>.png``."""
    height = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]["height"]
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": WIDTH, "height": min(int(height), 6000), "scale": 1}})
    path = shots / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    keep = os.environ.get("PAGEFAULT_INSPECTOR_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)
    print(f"screenshot: {path}")
    return path


def css(driver: WebDriver, selector: str):
    return driver.find_elements(By.CSS_SELECTOR, selector)


def follow(driver: WebDriver, target: WebElement | tuple[str, str]) -> None:
    """Click ``target`` (an element, or a locator found afresh on the page) and wait until the page it
    leads to has replaced this one. With a locator, a click that lands while the browser is still swapping
    in the page just loaded (chromium: "Node with given id does not belong to the document") finds the
    element again and clicks it, up to three times."""
    for attempt in range(3):
        page = driver.find_element(By.TAG_NAME, "html")
        element = driver.find_element(*target) if isinstance(target, tuple) else target
        try:
            element.click()
            break
        except WebDriverException as e:
            swapped = isinstance(e, StaleElementReferenceException) or "does not belong to the document" in str(e)
            if not isinstance(target, tuple) or not swapped or attempt == 2:
                raise
    WebDriverWait(driver, 30).until(expected_conditions.staleness_of(page))


def test_every_page_of_a_seeded_user_in_a_browser_without_javascript(server, browser, shots, seeded):
    d = browser
    d.get("data:text/html,<title>before</title><script>document.title='script ran'</script>")
    assert d.title == "before"  # scripts do not run in this browser
    d.get(f"{server}/")  # the CLI's server sends / to the inspector
    assert d.current_url == f"{server}/inspector/"
    assert "No authentication." in d.find_element(By.ID, "access-notice").text
    assert [a.text for a in css(d, "#users a")] == ["ann", "ben"]
    shoot(d, shots, "index")

    # the user picker is a plain GET form
    d.find_element(By.NAME, "user").send_keys("ann")
    follow(d, (By.CSS_SELECTOR, "#choose-user button"))
    assert d.current_url.startswith(f"{server}/inspector/ann/context")

    d.get(f"{server}/inspector/ann/context?thread={seeded['thread']}")
    assert d.title == "Context window · pagefault inspector"
    assert len(css(d, "#budget-bar rect.seg")) >= 4
    steps = css(d, "#context-plot a.step")
    assert len(steps) >= 10 and len(css(d, "#context-plot .compaction-mark")) >= 2
    assert [r.get_attribute("data-segment") for r in css(d, "#segments tr[data-segment]")] == [
        "system", "core", "procedures", "summary", "messages", "tools"]
    assert d.find_element(By.ID, "context-plot").size["width"] > 900  # drawn to the page's width
    shoot(d, shots, "context")
    assert steps[0].get_dom_attribute("href").startswith("/inspector/ann/replay?thread=ann-t1&turn=0")
    follow(d, steps[0])  # a column links to its replay
    assert "Replay: thread ann-t1, turn 0" in d.find_element(By.TAG_NAME, "h1").text
    assert d.find_element(By.ID, "system-prompt").text.startswith("You are an agent with virtual context memory.")
    shoot(d, shots, "replay")

    d.get(f"{server}/inspector/ann/core")
    assert [s.get_attribute("id") for s in css(d, "section.block")] == [
        "block-persona", "block-human", "block-notes", "block-profile"]
    assert "Lives in: Lisbon" in d.find_element(By.CSS_SELECTOR, "#block-human .value").text
    assert css(d, "#block-human table.log tbody tr")
    shoot(d, shots, "core")
    d.find_element(By.CSS_SELECTOR, "#block-notes details:not([open]) summary").click()  # <details>: no script
    box = d.find_element(By.CSS_SELECTOR, "#block-notes textarea[name=value]")
    box.clear()
    box.send_keys("Prefers short answers.\nWrites in the morning.")
    follow(d, (By.CSS_SELECTOR, "#block-notes form.edit button"))
    assert "Saved the notes block" in d.find_element(By.ID, "flash").text
    assert d.find_element(By.CSS_SELECTOR, "#block-notes .value").text == "Prefers short answers.\nWrites in the morning."
    assert "user, on the inspector (local)" in d.find_element(By.CSS_SELECTOR, "#block-notes table.log").text

    d.get(f"{server}/inspector/ann/archival")
    assert len(css(d, "tr.record")) == 20 and "page 1 of" in d.find_element(By.CSS_SELECTOR, ".pager").text
    shoot(d, shots, "archival")
    d.find_element(By.NAME, "q").send_keys("where does my sister work")
    follow(d, (By.CSS_SELECTOR, "#archival-filters button"))
    first = css(d, "tr.record")[0]
    assert "Lucia" in first.text and first.find_element(By.CSS_SELECTOR, ".part-bm25").text.startswith("BM25")
    shoot(d, shots, "archival-search")
    d.get(f"{server}/inspector/ann/archival?trust=flagged")
    assert [r.get_attribute("data-id") for r in css(d, "tr.record")] == [seeded["flagged_id"]]

    d.get(f"{server}/inspector/ann/archival/{seeded['old_bike_id']}")
    assert len(css(d, "#chain li")) == 2 and "superseded" in d.find_element(By.ID, "validity").text
    shoot(d, shots, "record")
    d.get(f"{server}/inspector/ann/archival/{seeded['passage_ids'][5]}")
    follow(d, (By.ID, "delete-link"))
    assert "This cannot be undone." in d.find_element(By.ID, "delete-confirm").text
    shoot(d, shots, "delete-confirm")
    follow(d, (By.CSS_SELECTOR, "#confirm-delete button"))
    assert f"Deleted {seeded['passage_ids'][5]}" in d.find_element(By.ID, "flash").text
    d.get(f"{server}/inspector/ann/archival/{seeded['passage_ids'][5]}")
    assert "Not found" in d.find_element(By.TAG_NAME, "h1").text

    d.get(f"{server}/inspector/ann/recall?q=sister")
    marks = {r.get_attribute("data-window") for r in css(d, "tr.hit")}
    assert marks == {"in", "evicted"}
    shoot(d, shots, "recall")

    d.get(f"{server}/inspector/ann/compactions?thread={seeded['thread']}")
    cards = css(d, "section.compaction")
    assert len(cards) >= 2 and all(c.find_element(By.CSS_SELECTOR, "pre.summary").text for c in cards)
    shoot(d, shots, "compactions")

    d.get(f"{server}/inspector/nobody/context")
    assert "no memory of user 'nobody'" in d.find_element(By.ID, "error-message").text
    assert len(list(shots.glob("*.png"))) == 10
