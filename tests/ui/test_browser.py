"""The inspector in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by selenium) against the real app served by uvicorn on 127.0.0.1,
over a store with every kind of state. It opens each page, runs a recall, pins a memory,
forgets and restores one, checks that user text stays inert, and saves a screenshot of each
page (to ``MNEMONIA_SCREENSHOTS`` when set, e.g. ``docs/ui`` for the inspector's documentation
page, docs/inspector.md; else tmp_path).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from mnemonia.ui import create_app

from tests.ui.store import SECRET, XSS_IMG, XSS_SCRIPT, Store

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                "(it is in the dev dependency group)")
from selenium.common.exceptions import (  # noqa: E402
    NoAlertPresentException,
    WebDriverException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

uvicorn = pytest.importorskip("uvicorn", reason="the ui extra is not installed")

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p),
                None)
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                       reason="Debian's chromium and chromium-driver are not installed "
                       "(scripts/setup.sh installs them when run as root with apt)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(store: Store) -> Iterator[str]:
    """The app served by a real uvicorn on 127.0.0.1 (a thread of this process)."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(store.engine), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--hide-scrollbars"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("MNEMONIA_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shot(driver: Any, folder: Path, name: str) -> Path:
    """A screenshot of the whole page (the window grown to the page's height)."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(700, min(int(height) + 20, 4000)))
    path = folder / f"{name}.png"
    assert driver.save_screenshot(str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    driver.set_window_size(1280, 900)
    return path


def _no_alert(driver: Any) -> None:
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018


def _submit(driver: Any, button: Any) -> None:
    """Click a button whose form navigates, and wait for the next page.

    The old page is marked before the click and the wait ends when a page
    without the mark has loaded. Waiting on the button going stale instead was
    flaky: chromedriver sometimes answers a query on a node of the page being
    left with an "unhandled inspector error" rather than a stale element.
    """
    driver.execute_script("window.__mnemoniaLeaving = true")
    button.click()
    WebDriverWait(driver, 20, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script(
            "return window.__mnemoniaLeaving !== true"
            " && document.readyState === 'complete'"))


def _text(driver: Any, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def test_every_page_in_a_real_browser(served: str, browser: Any, store: Store,
                                      shots: Path) -> None:
    d, engine, ids = browser, store.engine, store.ids
    d.get(served + "/")
    assert "alice" in _text(d, "#tenants") and "bob" in _text(d, "#tenants")
    assert "consolidate" in _text(d, "#maintenance")
    _shot(d, shots, "tenants")

    # the recall console: type a query, submit, read the explanation table
    d.find_element(By.CSS_SELECTOR, "#tenants a.tenant-link[href='/t/alice/memories']").click()
    d.find_element(By.ID, "nav-recall").click()
    box = d.find_element(By.CSS_SELECTOR, "#recall-form input[name=q]")
    box.send_keys("what does Alice drink in the afternoon?")
    _submit(d, d.find_element(By.ID, "recall-go"))
    first = d.find_elements(By.CSS_SELECTOR, "#hits tr.hit")[0].text
    assert "green tea" in first
    assert "RELEVANT MEMORY" in _text(d, "#rendered")
    _shot(d, shots, "recall")

    # the memory list: user text that looks like HTML shows as text, nothing runs
    d.get(served + "/t/alice/memories?deleted=all")
    links = [a.text for a in d.find_elements(By.CSS_SELECTOR, "#memories a.memlink")]
    assert XSS_SCRIPT in links and f"Look at this {XSS_IMG} picture" in links
    assert SECRET not in d.page_source
    _no_alert(d)
    assert d.find_elements(By.CSS_SELECTOR, "#memories img") == []
    _shot(d, shots, "memories")
    d.get(served + "/t/alice/memories?state=pinned")
    assert [a.text for a in d.find_elements(By.CSS_SELECTOR, "#memories a.memlink")] == [
        engine.get(ids["pinned"], tenant="alice").text]

    # a memory page: curve, graph, history; the XSS neighbour is a label, not markup
    d.get(served + f"/t/alice/memories/{ids['batched']}")
    assert d.find_elements(By.CSS_SELECTOR, "#curve svg")
    labels = [t.text for t in d.find_elements(By.CSS_SELECTOR, "#graph text.node-label")]
    assert XSS_SCRIPT in labels
    assert "recalled" in _text(d, "#history") and "feedback" in _text(d, "#history")
    _no_alert(d)
    _shot(d, shots, "memory")
    d.get(served + f"/t/alice/memories/{ids['xss']}")
    assert _text(d, "#memory-text") == XSS_SCRIPT
    assert "<script>alert(2)</script>" in _text(d, "#metadata")
    _no_alert(d)

    # pin from the memory page
    d.get(served + f"/t/alice/memories/{ids['batched']}")
    _submit(d, d.find_element(By.CSS_SELECTOR, "button.act-pin"))
    assert d.find_elements(By.CSS_SELECTOR, "button.act-unpin")
    assert "pinned" in [b.text for b in d.find_elements(By.CSS_SELECTOR, ".badge")]
    assert engine.get(ids["batched"], tenant="alice").pinned

    # due: time passes, reviews come due
    store.clock.advance(timedelta(days=3))
    d.get(served + "/t/alice/due")
    assert d.find_elements(By.CSS_SELECTOR, "#schedule svg")
    assert d.find_elements(By.CSS_SELECTOR, "#due tr.memory-row")
    _shot(d, shots, "due")

    # fading: forget the next memory eviction would take, then restore it
    d.get(served + "/t/alice/fading")
    row = d.find_elements(By.CSS_SELECTOR, "#fading tr.memory-row")[0]
    victim = row.get_attribute("data-id")
    _submit(d, row.find_element(By.CSS_SELECTOR, "button.act-forget"))
    assert engine.get(victim, tenant="alice").deleted
    assert d.current_url.endswith("/t/alice/fading")
    gone = d.find_element(By.CSS_SELECTOR, f"#forgotten tr[data-id='{victim}']")
    _shot(d, shots, "fading")
    _submit(d, gone.find_element(By.CSS_SELECTOR, "button.act-restore"))
    assert not engine.get(victim, tenant="alice").deleted
    assert not d.find_elements(By.CSS_SELECTOR, f"#forgotten tr[data-id='{victim}']")

    # errors are pages, not tracebacks
    d.get(served + "/t/nobody/memories")
    assert "404" in d.find_element(By.CSS_SELECTOR, "section.error h1").text
    assert "Traceback" not in d.page_source
