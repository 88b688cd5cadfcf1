"""What one clip of the sync evaluation scored, and the summary table of a set of them.

The rows are those `engines.eval.sync` describes; the ceilings (the true track where a clip
has one, clean clicks always) stand beside the rendered row they are read against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.eval.onsets import OnsetScore, combined


@dataclass(frozen=True)
class ClipResult:
    """One clip's scores (see engines.eval.sync); onsets match within its TOLERANCE_S."""

    name: str
    kind: str
    rate: str
    control: bool
    duration_s: float
    fired: OnsetScore
    rendered: OnsetScore
    truth: OnsetScore | None  # the simulator's own track, scored as a render (None: no track)
    clicks: OnsetScore  # clean clicks at the required onsets, scored as a render
    masking: OnsetScore | None
    events: int  # fired events
    heard: int  # fired events with a rendered onset within the tolerance
    render_offsets_s: np.ndarray  # rendered onset - fired event, per heard event
    early: int  # rendered onsets more than the tolerance before the first contact
    # Controls: false rendered (and fired) onsets over the span where only a contact may sound
    # (EvalClip.spurious_span_s) and that span's length.
    spurious: int
    spurious_fired: int
    span_s: float
    cut_voiced: bool | None  # clips with a cut: a false rendered onset within its window after it


def _row(label: str, score: OnsetScore) -> str:
    errors_ms = np.abs(score.errors_s) * 1000
    median = f"{np.median(errors_ms):6.1f}" if len(errors_ms) else "     -"
    within = f"{np.mean(errors_ms <= 10) * 100:5.0f} %" if len(errors_ms) else "      -"
    return (
        f"{label:<22} {score.f1:5.3f} {score.precision:5.3f} {score.recall:5.3f} "
        f"{median} {within}   tp {score.true_positives} fp {score.false_positives} "
        f"fn {score.false_negatives} ignored {score.ignored}"
    )


def summary(results: list[ClipResult]) -> str:
    scenes = [r for r in results if not r.control]
    controls = [r for r in results if r.control]
    lines = _scene_lines(scenes) if scenes else []
    early = [r for r in results if r.early]
    lines.append(f"clips with onsets before the first contact: {len(early)} of {len(results)}")
    if controls:
        lines += _control_lines(controls)
    cuts = [r for r in results if r.cut_voiced is not None]
    if cuts:
        lines.append(f"shot cuts voiced: {sum(bool(r.cut_voiced) for r in cuts)} of {len(cuts)}")
    return "\n".join(lines)


def _scene_lines(scenes: list[ClipResult]) -> list[str]:
    rendered = combined([r.rendered for r in scenes])
    required = rendered.true_positives + rendered.false_negatives
    lines = [
        f"scenes: {len(scenes)}   required onsets: {required}",
        f"{'(+-50 ms)':<22} {'F1':>5} {'P':>5} {'R':>5} {'med ms':>6} {'<=10ms':>7}",
        _row("fired events", combined([r.fired for r in scenes])),
        _row("rendered onsets", rendered),
    ]
    truths = [r.truth for r in scenes if r.truth is not None]
    if len(truths) == len(scenes):
        lines.append(_row("true track (ceiling)", combined(truths)))
    lines.append(_row("clicks (ceiling)", combined([r.clicks for r in scenes])))
    maskings = [r.masking for r in scenes if r.masking is not None]
    if len(maskings) == len(scenes):
        lines.append(_row("masking fidelity", combined(maskings)))
    events = sum(r.events for r in scenes)
    offsets = np.concatenate([r.render_offsets_s for r in scenes]) * 1000
    if events:
        offset = f"{np.median(offsets):+.1f} ms" if len(offsets) else "-"
        lines.append(
            f"fired events heard in their render: {sum(r.heard for r in scenes) / events:.0%}"
            f" of {events}; render offset (median): {offset}"
        )
    lines.append("per frame rate (F1 fired / rendered):")
    for rate in sorted({c.rate for c in scenes}, key=_rate_order):
        sub = [c for c in scenes if c.rate == rate]
        lines.append(
            f"  {rate:>6}: {combined([c.fired for c in sub]).f1:.3f} / "
            f"{combined([c.rendered for c in sub]).f1:.3f}   ({len(sub)} clips)"
        )
    lines.append("per scene kind (F1 fired / rendered, required onsets):")
    for kind in sorted({c.kind for c in scenes}):
        sub = combined([c.rendered for c in scenes if c.kind == kind])
        lines.append(
            f"  {kind:>8}: {combined([c.fired for c in scenes if c.kind == kind]).f1:.3f}"
            f" / {sub.f1:.3f}   ({sub.true_positives + sub.false_negatives})"
        )
    return lines


def _rate_order(label: str) -> tuple[bool, float]:
    """FRAME_RATES' order: by rate, variable last (other rates, of sprite clips, by value)."""
    return (label == "vfr", 0.0 if label == "vfr" else float(label))


def _control_lines(controls: list[ClipResult]) -> list[str]:
    minutes = sum(r.span_s for r in controls) / 60
    spurious, fired = _per_minute(controls)
    lines = [
        f"controls: {len(controls)} clips, {minutes:.2f} min; spurious onsets per minute: "
        f"rendered {spurious:.2f}, fired {fired:.2f}",
        "per control kind (spurious onsets per minute, rendered / fired):",
    ]
    for kind in dict.fromkeys(r.kind for r in controls):
        sub = [r for r in controls if r.kind == kind]
        spurious, fired = _per_minute(sub)
        lines.append(
            f"  {kind:>8}: {spurious:.2f} / {fired:.2f}   "
            f"({len(sub)} clips, {sum(r.span_s for r in sub):.1f} s)"
        )
    return lines


def _per_minute(controls: list[ClipResult]) -> tuple[float, float]:
    """Spurious (rendered, fired) onsets per minute over the controls' spans."""
    minutes = sum(r.span_s for r in controls) / 60
    return (
        sum(r.spurious for r in controls) / minutes,
        sum(r.spurious_fired for r in controls) / minutes,
    )
