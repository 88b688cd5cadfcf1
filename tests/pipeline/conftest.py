from __future__ import annotations

from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[2] / "service" / "models"
