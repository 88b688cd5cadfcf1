"""HTTP transport: `create_app()` builds the FastAPI app that `foley serve` runs."""

from service.api.app import create_app

__all__ = ["create_app"]
