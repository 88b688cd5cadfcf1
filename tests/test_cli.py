"""`foley` CLI: exit codes, one-line errors, staged output; end to end with the shipped model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import av
import numpy as np
import opentimelineio as otio
import pytest

from service import cli
from service.api import server
from service.cli import generate
from service.config import Settings
from service.errors import MediaError
from service.markers import MarkersDocument
from service.media.loudness import CEILING_DBTP, DEFAULT_TARGET_LUFS, measure
from service.pipeline.backends.base import backend_present
from service.pipeline.types import ContactMarker, RenderOptions, RenderResult
from tests.media import videos

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "sample.mp4"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(err: str, code: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"foley: error: {code}: "), err
    assert "Traceback" not in err


class ScriptedEngine:
    """Test double of `FoleyEngine` for the CLI: reports progress, then succeeds or raises."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.fail = fail
        self.options: RenderOptions | None = None

    def render(self, input_path, output_path, options, progress=None) -> RenderResult:
        self.options = options
        for step in range(11):
            progress(step / 10)
        output_path.write_bytes(b"partial")
        if self.fail is not None:
            raise self.fail
        return RenderResult(output_path, replace(options, tier="test-tier"), 12.0, 12.0, 300,
                            "0.0.1", {"decode": 0.1},
                            markers=(ContactMarker(0.25, "impact", 0.5, "wood"),),
                            video_fps=25.0)  # fmt: skip


MP4_HEAD = b"\x00\x00\x00\x18ftypmp42"  # what an MP4 starts with


@pytest.fixture
def video(tmp_path: Path) -> Path:
    path = tmp_path / "in.mp4"
    path.write_bytes(MP4_HEAD + b" not decoded by the scripted engine")
    return path


def use_engine(monkeypatch: pytest.MonkeyPatch, engine: ScriptedEngine) -> None:
    """The scripted engine, and a probe that takes any file as a 12 s video."""
    monkeypatch.setattr(generate, "load_engine", lambda settings, tier: engine)
    monkeypatch.setattr(generate, "probe_input", lambda path, settings: 12.0)


def test_bad_output_extension_exits_2_with_one_line(
    video: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["generate", str(video), "-o", str(tmp_path / "out.mp3")], capsys)
    assert code == 2
    assert out == ""
    assert_one_error_line(err, "unsupported_format")


def test_nonexistent_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.mp4"
    code, _, err = run(["generate", str(missing), "-o", str(tmp_path / "out.wav")], capsys)
    assert code == 2
    assert_one_error_line(err, "input_not_found")


def test_missing_output_directory_exits_2(
    video: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["generate", str(video), "-o", str(tmp_path / "no/out.wav")], capsys)
    assert code == 2
    assert_one_error_line(err, "output_dir_not_found")


def test_unknown_tier_exits_2(
    video: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", str(video), "-o", str(tmp_path / "o.wav"), "--tier", "no-such-tier"]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert_one_error_line(err, "unknown_tier")


def test_unsupported_sample_rate_is_a_usage_error(
    video: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", str(video), "-o", str(tmp_path / "o.wav"), "--sample-rate", "22050"]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert "invalid choice" in err


def test_success_prints_one_summary_line_and_passes_the_options(
    video: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    engine = ScriptedEngine()
    use_engine(monkeypatch, engine)
    monkeypatch.setattr(generate, "PROGRESS_DELAY_S", 0.0)
    output = tmp_path / "out.MKV"
    argv = ["generate", str(video), "-o", str(output), "--sample-rate", "16000",
            "--replace-audio"]  # fmt: skip
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert engine.options == RenderOptions("mkv", 16000, None, replace_audio=True)
    assert output.read_bytes() == b"partial"
    assert out.count("\n") == 1
    assert "12.00 s" in out and "300 frames" in out and "real time" in out
    assert "%|" in err  # the progress bar, on stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "out.MKV"]


@pytest.mark.parametrize(
    ("given", "target"),
    [([], -23.0), (["--loudness", "-16"], -16.0), (["--loudness", "off"], None)],
)
def test_loudness_reaches_the_engine(
    video: Path, tmp_path: Path, capsys, monkeypatch, given: list[str], target: float | None
) -> None:
    engine = ScriptedEngine()
    use_engine(monkeypatch, engine)
    code, _, err = run(["generate", str(video), "-o", str(tmp_path / "out.wav"), *given], capsys)
    assert code == 0, err
    assert engine.options is not None and engine.options.loudness == target


@pytest.mark.parametrize("suffix", [".json", ".csv", ".otio"])
def test_events_are_written_beside_the_track(
    video: Path, tmp_path: Path, capsys, monkeypatch, suffix: str
) -> None:
    use_engine(monkeypatch, ScriptedEngine())
    events = tmp_path / "marks" / f"clip{suffix}"
    events.parent.mkdir()
    code, _, err = run(
        ["generate", str(video), "-o", str(tmp_path / "out.wav"), "--events", str(events)], capsys
    )
    assert code == 0, err
    text = events.read_text()
    if suffix == ".json":
        document = MarkersDocument.model_validate_json(text)
        assert (document.video.file, document.audio_file) == ("../in.mp4", "../out.wav")
        assert [c.material for c in document.contacts] == ["wood"]
    elif suffix == ".csv":
        assert text.splitlines()[1].startswith("12.25,00:00:12:06,impact,0.5,wood")
    else:
        timeline = otio.adapters.read_from_string(text, "otio_json")
        assert len(timeline.tracks.markers) == 1
    assert sorted(p.name for p in events.parent.iterdir()) == [events.name]


def test_an_unknown_events_extension_is_refused_before_the_model_loads(
    video: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    engine = ScriptedEngine()
    use_engine(monkeypatch, engine)
    argv = ["generate", str(video), "-o", str(tmp_path / "out.wav"), "--events", "x.edl"]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert_one_error_line(err, "unsupported_format")
    assert engine.options is None


@pytest.mark.parametrize("value", ["loud", "-80", "3"])
def test_a_loudness_out_of_range_is_a_usage_error(
    video: Path, tmp_path: Path, capsys, value: str
) -> None:
    code, _, err = run(
        ["generate", str(video), "-o", str(tmp_path / "out.wav"), "--loudness", value], capsys
    )
    assert code == 2
    assert "--loudness" in err


@pytest.mark.parametrize(
    ("error", "exit_code", "code"),
    [
        (MediaError("no video stream", code="no_video_stream"), 2, "no_video_stream"),
        (RuntimeError("session\ncrashed"), 1, "internal_error"),
    ],
)
def test_render_failure_exits_with_one_line_and_leaves_no_file(
    video: Path, tmp_path: Path, capsys, monkeypatch, error, exit_code, code
) -> None:
    use_engine(monkeypatch, ScriptedEngine(fail=error))
    output = tmp_path / "out.wav"
    output_before = b"an older render the user keeps"
    output.write_bytes(output_before)
    code_, _, err = run(["generate", str(video), "-o", str(output), "--force"], capsys)
    assert code_ == exit_code
    assert_one_error_line(err, code)
    assert str(video) in err
    assert output.read_bytes() == output_before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "out.wav"]


def test_serve_config_bounds_shutdown_and_websockets() -> None:
    settings = Settings(host="0.0.0.0", port=9001, max_connections=100)
    config = server.uvicorn_config(app=object(), settings=settings)
    assert (config.host, config.port) == ("0.0.0.0", 9001)
    assert config.limit_concurrency == 100
    assert config.timeout_graceful_shutdown == server.GRACEFUL_SHUTDOWN_S
    assert config.ws_max_size <= 16 * 1024 * 1024
    assert config.ws_ping_interval and config.ws_ping_timeout


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".wav", ".mp4"])
def test_generate_with_the_shipped_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    clip = videos.encode_clip(tmp_path / "square.mp4", fps=25, frames=50, size=(160, 120)).path
    output = tmp_path / f"foley{suffix}"
    code, out, err = run(
        ["generate", str(clip), "-o", str(output), "--sample-rate", "24000"], capsys
    )
    assert code == 0, err
    assert out.startswith(str(output))
    with av.open(str(output)) as container:
        audio = container.streams.audio[0]
        assert audio.rate == 24000
        seconds = sum(frame.samples for frame in container.decode(audio)) / 24000
    assert seconds == pytest.approx(2.0, abs=1 / 25 + 0.03)


def track_of(path: Path) -> np.ndarray:
    """The first audio stream, float mono at 48 kHz."""
    with av.open(str(path)) as container:
        resampler = av.AudioResampler(format="flt", layout="mono", rate=48000)
        frames = [*container.decode(container.streams.audio[0]), None]
        chunks = [f.to_ndarray().reshape(-1) for frame in frames for f in resampler.resample(frame)]
    return np.concatenate(chunks)


@pytest.mark.slow
@pytest.mark.parametrize(("suffix", "rate"), [(".wav", 48000), (".flac", 44100), (".mp4", 48000)])
def test_the_sample_renders_at_the_target_loudness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, rate: int
) -> None:
    output = tmp_path / f"foley{suffix}"
    argv = ["generate", str(SAMPLE), "-o", str(output), "--sample-rate", str(rate)]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert "LUFS (gain +" in out
    loudness = measure(track_of(output), 48000)
    assert loudness.integrated_lufs == pytest.approx(DEFAULT_TARGET_LUFS, abs=0.5)
    assert loudness.true_peak_dbtp <= CEILING_DBTP


@pytest.mark.slow
def test_loudness_off_keeps_the_models_own_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw, levelled = tmp_path / "raw.wav", tmp_path / "levelled.wav"
    # A frame-rate tier: its vocoder's own level is far under the target.
    tier = ["--tier", "preview"]
    code, out, _ = run(
        ["generate", str(SAMPLE), "-o", str(raw), "--loudness", "off", *tier], capsys
    )
    assert code == 0 and "LUFS" not in out
    assert run(["generate", str(SAMPLE), "-o", str(levelled), *tier], capsys)[0] == 0
    x, y = track_of(raw), track_of(levelled)
    # The levelled track is the raw one times one gain, except around the loudest attacks.
    quiet = (np.abs(y) < 0.5 * np.abs(y).max()) & (np.abs(x) > 1e-3)
    ratio = y[quiet] / x[quiet]
    assert np.median(ratio) > 10  # the raw track is well under the target
    assert np.mean(np.abs(ratio / np.median(ratio) - 1) < 0.01) > 0.8


class CountingLoads:
    """load_engine's stand-in: the scripted engine, counting the loads."""

    def __init__(self, engine: ScriptedEngine) -> None:
        self.engine, self.loads = engine, 0

    def __call__(self, settings: Settings, tier: str) -> ScriptedEngine:
        self.loads += 1
        return self.engine


def videos_in(folder: Path, *names: str) -> list[Path]:
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_bytes(MP4_HEAD + name.encode())
    return [folder / n for n in names]


def test_several_inputs_and_a_folder_render_with_the_model_loaded_once(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    use_engine(monkeypatch, ScriptedEngine())
    loads = CountingLoads(ScriptedEngine())
    monkeypatch.setattr(generate, "load_engine", loads)
    a, b = videos_in(tmp_path / "one", "a.mp4", "b.MOV")
    (c,) = videos_in(tmp_path / "reel", "c.mkv")
    (tmp_path / "reel" / "notes.txt").write_text("not a video, and not taken")
    code, out, err = run(["generate", str(a), str(b), str(tmp_path / "reel"), "-q"], capsys)
    assert code == 0, err
    assert loads.loads == 1
    assert out == "" and err == ""  # -q, after the command
    for video in (a, b, c):
        assert (video.parent / f"{video.stem}.foley.wav").read_bytes() == b"partial"
    code, out, _ = run(["generate", str(tmp_path / "reel"), "--format", "flac", "--force"], capsys)
    assert code == 0 and out.count("\n") == 1 and "c.foley.flac" in out


def test_output_defaults_beside_the_input_and_events_beside_each_output(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    use_engine(monkeypatch, ScriptedEngine())
    a, b = videos_in(tmp_path / "in", "a.mp4", "b.mp4")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, _, err = run(["generate", str(a), str(b), "-o", str(out_dir), "--events", "otio"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "a.foley.otio", "a.foley.wav", "b.foley.otio", "b.foley.wav",
    ]  # fmt: skip
    code, _, err = run(["generate", str(a), str(b), "--events", str(tmp_path / "x.otio")], capsys)
    assert code == 2
    assert_one_error_line(err, "invalid_parameter")


def test_several_inputs_need_an_output_folder(tmp_path: Path, capsys, monkeypatch) -> None:
    use_engine(monkeypatch, ScriptedEngine())
    a, b = videos_in(tmp_path, "a.mp4", "b.mp4")
    code, _, err = run(["generate", str(a), str(b), "-o", str(tmp_path / "one.wav")], capsys)
    assert code == 2
    assert_one_error_line(err, "output_dir_not_found")


def test_the_input_and_existing_files_are_never_overwritten_unless_forced(
    video: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    engine = ScriptedEngine()
    use_engine(monkeypatch, engine)
    before = video.read_bytes()
    code, _, err = run(["generate", str(video), "-o", str(video), "--force"], capsys)
    assert code == 2
    assert_one_error_line(err, "output_is_input")
    assert video.read_bytes() == before
    existing = tmp_path / "in.foley.wav"
    existing.write_bytes(b"an earlier render")
    code, _, err = run(["generate", str(video)], capsys)
    assert code == 2
    assert_one_error_line(err, "output_exists")
    assert str(existing) in err and existing.read_bytes() == b"an earlier render"
    assert engine.options is None  # refused before any render
    assert run(["generate", str(video), "--force"], capsys)[0] == 0
    assert existing.read_bytes() == b"partial"


def test_a_file_that_is_not_a_video_is_refused_before_the_model_loads(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    loads = CountingLoads(ScriptedEngine())
    monkeypatch.setattr(generate, "load_engine", loads)
    text = tmp_path / "notes.mp4"
    text.write_text("a text file named like a video")
    code, _, err = run(["generate", str(text)], capsys)
    assert code == 2
    assert_one_error_line(err, "not_a_video")
    assert str(text) in err and loads.loads == 0


def test_one_failing_file_does_not_stop_the_others(tmp_path: Path, capsys, monkeypatch) -> None:
    class FailsOnB(ScriptedEngine):
        def render(self, input_path, output_path, options, progress=None):
            if input_path.name == "b.mp4":
                raise MediaError("no video stream", code="no_video_stream")
            return super().render(input_path, output_path, options, progress)

    use_engine(monkeypatch, FailsOnB())
    _, b, _ = videos_in(tmp_path / "in", "a.mp4", "b.mp4", "c.mp4")
    code, out, err = run(["generate", str(tmp_path / "in"), "-q"], capsys)
    assert code == 2
    assert_one_error_line(err, "no_video_stream")
    assert str(b) in err
    assert out == ""
    assert [p.name for p in sorted((tmp_path / "in").glob("*.foley.wav"))] == [
        "a.foley.wav", "c.foley.wav",
    ]  # fmt: skip


def test_version_and_verbosity_anywhere(capsys) -> None:
    assert run(["--version"], capsys)[1].startswith("foley ")
    code, _, err = run(["generate", "--help", "-v"], capsys)
    assert code == 0
    assert run(["tiers", "-v", "--no-speed"], capsys)[0] == 0
    assert run(["-q", "tiers", "--no-speed"], capsys)[0] == 0
    code, _, err = run(["tiers", "-q", "-v"], capsys)
    assert code == 2 and "not allowed with" in err  # -q and -v at once


def test_tiers_lists_each_tier_with_its_size(capsys) -> None:
    code, out, err = run(["tiers", "--no-speed"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    rows = {line.split()[0]: line for line in lines[1:] if " MB" in line}
    assert {"preview", "export", "objects"} <= set(rows)
    assert rows[Settings().default_tier].endswith("yes")
    assert "encoder:fp32 generator:fp32 vocoder:fp32" in rows["preview"]
    assert lines[-1].startswith("backend: cpu on CPU (ONNX Runtime ")


def test_a_backend_that_cannot_start_is_an_error_not_a_fallback(capsys, monkeypatch) -> None:
    monkeypatch.setenv("FOLEY_BACKEND", "cpu")  # --backend sets it: restored after the test
    code, out, err = run(["tiers", "--no-speed", "--backend", "cuda"], capsys)
    if backend_present("cuda"):
        assert code == 0 and "backend: cuda on " in out
    else:
        assert code == 1 and "backend_unavailable: the cuda backend cannot start here" in err


@pytest.mark.slow
def test_tiers_times_each_tier_here(capsys) -> None:
    code, out, err = run(["tiers"], capsys)
    assert code == 0, err
    assert out.count("x real time") == len(list(Settings().models_dir.glob("*/config.json")))
