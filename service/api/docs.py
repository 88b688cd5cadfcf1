"""The API's documentation pages, /docs (Swagger UI) and /redoc, with their scripts and styles
served by the service itself (static/docs, see VERSIONS there): they work in a facility with no
way out to a CDN, and load nothing from anywhere else."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

DOCS_STATIC = Path(__file__).resolve().parent / "static" / "docs"
router = APIRouter(include_in_schema=False)


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=request.app.openapi_url,
        title=f"{request.app.title}: API",
        swagger_js_url="/static/docs/swagger-ui-bundle.js",
        swagger_css_url="/static/docs/swagger-ui.css",
        swagger_favicon_url="/static/docs/favicon-32x32.png",
    )


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    return get_redoc_html(
        openapi_url=request.app.openapi_url,
        title=f"{request.app.title}: API",
        redoc_js_url="/static/docs/redoc.standalone.js",
        redoc_favicon_url="/static/docs/favicon-32x32.png",
        with_google_fonts=False,
    )
