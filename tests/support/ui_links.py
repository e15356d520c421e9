"""Follow every link of a plugin page by clicking it in Chromium, at top level or in the Airflow frame.

A link counts as followed when the click really took the browser somewhere: a ``#anchor``
moves to an element that exists; a plain link navigates its own frame to the link's URL
with a response below 400 (a navigation the frame's sandbox blocks never happens, so the
wait for it fails); a ``target="_top"`` link puts the link's URL in the top window's address
bar (inside Airflow that is the Airflow router, see plugins/pipeline_ui/static/ui.js) and the
page there names the run. After each click the page is opened again for the next link.

Inside Airflow the frame and the address bar are kept in step by Airflow's external-view page
(Airflow 3's ``ExternalView``): when the frame loads a page, Airflow notes its URL and tells its
router, which renders that route later (a React transition); when a rendered route differs from
the URL noted last, Airflow moves the frame there. A frame moved again before Airflow rendered
its previous page is therefore moved back to it when that render lands, then forward again: the
page just opened is destroyed under whoever reads it ("Execution context was destroyed, most
likely because of a navigation"). So after every navigation of the frame the test waits until
it has settled (``settle``): the frame shows the page, loaded; Airflow's address bar names it;
and the Airflow page has no work left queued (an idle callback), so the route is rendered and
nothing will move the frame but the next click.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urldefrag, urlsplit

LINK_TIMEOUT_MS = 15_000
FRAME_ROUTE = "/plugin/pipeline-datasets"
# Resolves once the page's event loop has nothing queued (React renders in queued tasks); at
# the latest after the timeout, as requestIdleCallback promises.
IDLE = "ms => new Promise(done => requestIdleCallback(() => done(), {timeout: ms}))"


@dataclass(frozen=True)
class Link:
    index: int
    href: str  # as written in the page
    url: str  # resolved by the browser
    target: str


def _shown_in_frame(url: str) -> Callable[[str], bool]:
    """Whether an Airflow URL is the nav route showing ``url`` (of this app) in its frame."""
    parts = urlsplit(urldefrag(url)[0])
    want = f"{parts.scheme}://{parts.netloc}{FRAME_ROUTE}{unquote(parts.path)}?{parts.query}"

    def shown(got: str) -> bool:
        g = urlsplit(urldefrag(got)[0])
        return f"{g.scheme}://{g.netloc}{unquote(g.path)}?{g.query}" == want
    return shown


def settle(page, frame, url: str) -> None:
    """Wait until ``frame`` shows ``url``, loaded, Airflow's address bar names it and Airflow has
    rendered that route: from then on nothing moves the frame but the next click."""
    frame.wait_for_url(_same_page(url), timeout=LINK_TIMEOUT_MS)
    page.wait_for_url(_shown_in_frame(url), timeout=LINK_TIMEOUT_MS)
    page.evaluate(IDLE, LINK_TIMEOUT_MS)


def links_on(scope) -> list[Link]:
    rows = scope.eval_on_selector_all(
        "a[href]", "els => els.map(e => [e.getAttribute('href'), e.href, e.target])")
    return [Link(i, href, url, target) for i, (href, url, target) in enumerate(rows)]


def _same_page(url: str) -> Callable[[str], bool]:
    want = urldefrag(url)[0]
    return lambda got: urldefrag(got)[0] == want


def click(page, scope, link: Link, expect) -> str:
    """Click ``link`` in ``scope`` (a Frame); return the URL it reached, failing if none."""
    where = scope.locator("a[href]").nth(link.index)
    if link.href.startswith("#"):
        where.click()
        assert scope.evaluate("location.hash") == link.href, link
        assert scope.evaluate("id => !!document.getElementById(id)", link.href[1:]), link
        return link.url
    if link.target == "_top":
        if scope is page.main_frame:
            with page.expect_navigation(url=_same_page(link.url), timeout=LINK_TIMEOUT_MS) as nav:
                where.click()
            assert nav.value is not None and nav.value.status < 400, (link, nav.value)
        else:
            where.click()
            page.wait_for_url(_same_page(link.url), timeout=LINK_TIMEOUT_MS)
        run = unquote(urlsplit(link.url).path.rstrip("/").rsplit("/", 1)[-1])
        expect(page.get_by_text(run).first).to_be_visible()  # Airflow's run page, not blank
        return link.url
    with scope.expect_navigation(url=_same_page(link.url), timeout=LINK_TIMEOUT_MS) as nav:
        where.click()
    response = nav.value
    assert response is not None and response.status < 400, (link, response and response.status)
    if scope is not page.main_frame:  # inside Airflow: it may move the frame until settled
        settle(page, scope, link.url)
    return link.url


def top_level(page, base: str) -> Callable[[str], object]:
    """Opens a plugin page by itself; returns the frame its links are in."""
    def open_page(path: str):
        response = page.goto(base + path)
        assert response is not None and response.status == 200, (path, response)
        return page.main_frame
    return open_page


def in_airflow_frame(page, base: str, expect) -> Callable[[str], object]:
    """Opens a plugin page inside the Airflow UI (its nav route); returns the iframe's frame,
    settled (``settle``)."""
    def open_page(path: str):
        frames = page.main_frame.child_frames
        if urlsplit(page.url).path.startswith(FRAME_ROUTE) and frames:
            frame = frames[0]  # Airflow still shows the frame, settled: only the frame navigates
            response = frame.goto(base + path)
            assert response is not None and response.status == 200, (path, response)
        else:
            page.goto(f"{base}{FRAME_ROUTE}{path}")
            frame = page.wait_for_selector("iframe").content_frame()
            assert frame is not None, path
        settle(page, frame, base + path)
        expect(frame.locator("main").first).to_be_visible()
        return frame
    return open_page


def follow_all(page, open_page: Callable[[str], object], path: str, expect) -> list[str]:
    """Click every link on the page at ``path``, reopening it after each; the URLs reached."""
    scope = open_page(path)
    links, reached = links_on(scope), []
    for link in links:
        reached.append(click(page, scope, link, expect))
        if not link.href.startswith("#"):  # an anchor leaves the page where it was
            scope = open_page(path)
            assert len(links_on(scope)) == len(links), path  # same page, same links
    return reached
