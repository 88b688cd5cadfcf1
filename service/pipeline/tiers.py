"""Which model tiers a deployment has: one folder with a config.json per tier under
`Settings.models_dir`. The one tier check the CLI, the API and the export queue use."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from service.config import Settings
from service.errors import InvalidInput, echo


def installed_tiers(settings: Settings) -> list[str]:
    return sorted(p.parent.name for p in settings.models_dir.glob("*/config.json"))


TierKind = Literal["frames", "contacts", "motion"]


@dataclass(frozen=True)
class TierListing:
    name: str
    kind: TierKind
    version: str
    size_bytes: int  # its config and graphs on disk


def listed_tiers(settings: Settings) -> list[TierListing]:
    """Each installed tier as its config describes it, by name."""
    found = []
    for name in installed_tiers(settings):
        folder = settings.models_dir / name
        raw = json.loads((folder / "config.json").read_text())
        files = [f for f in folder.iterdir() if f.suffix in (".onnx", ".json")]
        size = sum(f.stat().st_size for f in files)
        found.append(TierListing(name, raw.get("kind", "frames"), raw["version"], size))
    return found


MAX_TIER_NAME = 64


def tier_exists(settings: Settings, tier: str) -> bool:
    """A tier name is a short ASCII identifier (a folder of the models directory); any other
    string names none, whatever the file system would make of it."""
    if not (len(tier) <= MAX_TIER_NAME and tier.isascii() and tier.isidentifier()):
        return False
    return (settings.models_dir / tier / "config.json").is_file()


def resolve_tier(settings: Settings, tier: str | None) -> str:
    """The tier a request for `tier` gets (None: the deployment's default), refused
    (`unknown_tier`) if it is not installed. The default is the deployment's own choice: a
    missing one fails its load instead, naming the setting."""
    if tier is None or tier == settings.default_tier:
        return settings.default_tier
    check_tier(settings, tier)
    return tier


def check_tier(settings: Settings, tier: str) -> None:
    """Refuse a request for a tier this deployment does not ship, before any work."""
    if not tier_exists(settings, tier):
        known = ", ".join(installed_tiers(settings)) or "none"
        raise InvalidInput(
            f"no model tier named {echo(tier)} is installed (tiers: {known})", code="unknown_tier"
        )
