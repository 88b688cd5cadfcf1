// The live preview page: plays a local video file, streams its frames to /v1/preview, and plays
// the Foley that comes back in sync with a display of the video delayed by the same amount.
// Protocol: docs/preview.md. Exposes its counters as window.foleyPreview (for tests and tools).

const SIZE = 96; // frames are sent at the model's size: the server does no scaling work
const RATE = 48000;
const $ = (id) => document.getElementById(id);
const video = $("video");
const state = (window.foleyPreview = {
  frames: 0, chunks: 0, onsets: 0, underruns: 0, latency: [], error: null, ended: false,
});

let file = null;
$("file").addEventListener("change", () => {
  file = $("file").files[0] || null;
  if (!file) return;
  video.src = URL.createObjectURL(file);
  $("play").disabled = false;
  status(`${file.name}: ready to play.`);
});
$("play").addEventListener("click", () => start().catch((e) => fail(e.message)));

function status(text) { $("status").textContent = text; }
function fail(text) { state.error = text; status(`Error: ${text}`); }

async function start() {
  $("play").disabled = true;
  const delay = Number($("delay").value) / 1000;
  const audio = new AudioContext({ sampleRate: RATE, latencyHint: "interactive" });
  await audio.audioWorklet.addModule("/static/preview/worklet.js");
  const player = new AudioWorkletNode(audio, "foley-player", { outputChannelCount: [1] });
  player.connect(audio.destination);
  player.port.onmessage = (e) => { if (e.data.type === "underrun") state.underruns = e.data.count; };
  await audio.resume();

  const url = new URL("/v1/preview", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  const key = new URLSearchParams(location.search).get("api_key");
  if (key) url.searchParams.set("api_key", key);
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  const ready = new Promise((resolve, reject) => {
    ws.onopen = () => ws.send(JSON.stringify({
      type: "config", width: SIZE, height: SIZE, pixel_format: "rgb24", sample_rate: RATE,
    }));
    ws.onerror = () => reject(new Error("the WebSocket connection failed"));
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.type === "ready") resolve(m); else reject(new Error(`${m.code}: ${m.reason}`));
    };
  });
  const session = await ready;
  status(`Session ${session.session}: tier ${session.tier} ${session.model_version}.`);

  const capture = new OffscreenCanvas(SIZE, SIZE).getContext("2d", { willReadFrequently: true });
  const shown = []; // [due time (performance.now ms), ImageBitmap]
  const sent = []; // [media time, performance.now ms] per frame
  let completing = 0; // index into `sent` of the frame that completes the next chunk
  let t0 = null;
  const waveform = new Waveform($("wave"), video.duration || 10);
  const timeline = new Timeline($("timeline"), video.duration || 10);

  ws.onmessage = (e) => {
    if (e.data instanceof ArrayBuffer) {
      const view = new DataView(e.data);
      const start = Number(view.getBigInt64(8, true));
      const samples = new Float32Array(e.data, 24);
      player.port.postMessage({ type: "audio", start, samples });
      waveform.add(start / RATE, samples);
      latencyOf(start + samples.length, session);
      state.chunks++;
      return;
    }
    const m = JSON.parse(e.data);
    if (m.type === "onset") { state.onsets++; timeline.mark(m.time_s - (t0 ?? 0)); }
    else if (m.type === "stats") $("stat-compute").textContent = `${m.compute_ms_p50.toFixed(1)} / ${m.compute_ms_p99.toFixed(1)} ms`;
    else if (m.type === "end") { state.ended = true; player.port.postMessage({ type: "end" }); status("Done."); }
    else if (m.type === "error") fail(`${m.code}: ${m.reason}`);
    render();
  };
  ws.onclose = (e) => { if (!state.ended && !state.error) fail(`connection closed (${e.code}) ${e.reason}`); };

  function latencyOf(endSample, s) {
    // The chunk ending here was completed by the frame `lookahead` frames after its end (model
    // frames for a frame-rate tier; sent frames for a contacts tier, whose model_fps is null).
    // Chunks come in order, so the search goes on from where the last one stopped.
    let k;
    if (s.model_fps) {
      const due = (endSample / s.samples_per_frame - 1 + s.lookahead_frames) / s.model_fps;
      while (completing < sent.length && sent[completing][0] - t0 < due - 1e-4) completing++;
      k = completing;
    } else {
      const end = endSample / s.sample_rate;
      while (completing < sent.length && sent[completing][0] - t0 < end - 1e-6) completing++;
      k = completing + s.lookahead_frames;
    }
    if (k < sent.length) state.latency.push(performance.now() - sent[k][1]);
  }

  function onFrame(now, meta) {
    if (ws.readyState !== WebSocket.OPEN) return;
    if (t0 === null) {
      t0 = meta.mediaTime;
      // Sample 0 sounds `delay` after this frame was presented.
      const lag = (performance.now() - now) / 1000;
      player.port.postMessage({ type: "origin", frame: Math.round((audio.currentTime - lag + delay) * RATE) });
    }
    capture.drawImage(video, 0, 0, SIZE, SIZE);
    const rgba = capture.getImageData(0, 0, SIZE, SIZE).data;
    const message = new Uint8Array(16 + SIZE * SIZE * 3);
    const header = new DataView(message.buffer);
    header.setUint8(0, 1); header.setUint8(1, 1);
    header.setUint32(4, state.frames, true);
    header.setFloat64(8, meta.mediaTime, true);
    for (let i = 0, j = 16; i < rgba.length; i += 4, j += 3) {
      message[j] = rgba[i]; message[j + 1] = rgba[i + 1]; message[j + 2] = rgba[i + 2];
    }
    ws.send(message);
    sent.push([meta.mediaTime, performance.now()]);
    state.frames++;
    createImageBitmap(video).then((bitmap) => shown.push([now + delay * 1000, bitmap]));
    if (!video.ended) video.requestVideoFrameCallback(onFrame);
  }

  const screen = $("screen").getContext("2d");
  (function paint() {
    const now = performance.now();
    let frame = null;
    while (shown.length && shown[0][0] <= now) {
      if (frame) frame.close();
      frame = shown.shift()[1];
    }
    if (frame) {
      screen.drawImage(frame, 0, 0, screen.canvas.width, screen.canvas.height);
      frame.close();
    }
    if (t0 !== null) timeline.cursor(video.currentTime - delay - t0);
    requestAnimationFrame(paint);
  })();

  video.addEventListener("ended", () => ws.send(JSON.stringify({ type: "end" })), { once: true });
  video.requestVideoFrameCallback(onFrame);
  await video.play();
}

function render() {
  const lat = [...state.latency].sort((a, b) => a - b);
  const q = (p) => lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))].toFixed(1) : "–";
  $("stat-latency").textContent = `${q(0.5)} / ${q(0.99)} ms`;
  $("stat-counts").textContent = `${state.frames} / ${state.chunks}`;
  $("stat-onsets").textContent = String(state.onsets);
  $("stat-underruns").textContent = String(state.underruns);
}

class Waveform {
  constructor(canvas, duration) {
    this.ctx = canvas.getContext("2d");
    this.w = canvas.width; this.h = canvas.height; this.duration = duration;
    this.ctx.fillStyle = "#2f6fed";
  }
  add(startS, samples) {
    const x0 = Math.floor((startS / this.duration) * this.w);
    const x1 = Math.floor(((startS + samples.length / RATE) / this.duration) * this.w);
    const per = Math.max(1, Math.floor(samples.length / Math.max(1, x1 - x0)));
    for (let x = x0; x < Math.max(x1, x0 + 1); x++) {
      let peak = 0;
      for (let i = (x - x0) * per; i < Math.min(samples.length, (x - x0 + 1) * per); i++) {
        peak = Math.max(peak, Math.abs(samples[i]));
      }
      const h = Math.min(1, peak * 4) * this.h;
      this.ctx.fillRect(x, (this.h - h) / 2, 1, Math.max(1, h));
    }
  }
}

class Timeline {
  constructor(element, duration) { this.element = element; this.duration = duration; }
  mark(timeS) {
    const mark = document.createElement("div");
    mark.className = "onset";
    mark.style.left = `${Math.min(100, (100 * timeS) / this.duration)}%`;
    mark.title = `${timeS.toFixed(3)} s`;
    this.element.appendChild(mark);
  }
  cursor(timeS) { $("cursor").style.left = `${Math.max(0, Math.min(100, (100 * timeS) / this.duration))}%`; }
}
