"""/docs and /redoc in headless Chromium with every request to anywhere but the service
blocked (an offline facility): the operations are listed, with an Authorize button."""

from __future__ import annotations

from playwright.sync_api import Route, sync_playwright

from service.api import create_app
from service.config import Settings
from tests.api.conftest import RecordingEngine
from tests.browser import CHROMIUM_ARGS, chromium_or_skip, watched_page
from tests.conftest import uvicorn_server


def test_the_api_docs_work_with_no_way_out(settings: Settings) -> None:
    chromium = chromium_or_skip()
    app = create_app(settings, engine_loader=lambda *_: RecordingEngine())
    elsewhere: list[str] = []
    problems: list[str] = []
    with uvicorn_server(app) as port, sync_playwright() as pw:
        base = f"http://127.0.0.1:{port}"

        def only_the_service(route: Route) -> None:
            if route.request.url.startswith(base):
                route.continue_()
            else:
                elsewhere.append(route.request.url)
                route.abort()

        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = watched_page(browser, problems)
        page.route("**/*", only_the_service)
        page.goto(f"{base}/docs")
        page.wait_for_selector(".opblock", timeout=20_000)
        operations = page.locator(".opblock-summary-path").all_text_contents()
        authorize = page.locator("button.authorize").count()
        page.goto(f"{base}/redoc")
        page.wait_for_selector('text="/v1/foley"', timeout=20_000)
        browser.close()
    assert {"/v1/foley", "/v1/tiers", "/v1/exports"} <= {
        o.replace("\u200b", "") for o in operations
    }
    assert authorize == 1
    assert not elsewhere, elsewhere
    assert not problems, problems
