// The live preview page: plays a local video file, streams its frames to /v1/preview, and plays
// the Foley that comes back in sync with a display of the video delayed by the same amount,
// mixed with the clip's own sound (delayed alike). Pause, seek and loop end the stream and
// start a new one where the video is: each stream's sample 0 is its first frame. Export sends
// the file to the export queue and offers the full-quality render for download.
// Protocol: docs/preview.md. Exposes its counters as window.foleyPreview (for tests and tools).

import { RATE, Timeline, Waveform, timecode } from "./views.js";

// Frames are sent at the default tier's picture, the video's shape kept (black bars), as the
// service decodes a file for it: the server does no scaling work.
const WIDTH = 320, HEIGHT = 180;
const $ = (id) => document.getElementById(id);
const video = $("video");
// The key rides in headers and the config message, never in a URL (access logs keep URLs); the
// page reads it from its own fragment (/preview#api_key=...), which browsers never send.
const KEY = new URLSearchParams(location.hash.slice(1)).get("api_key");
const state = (window.foleyPreview = {
  frames: 0, chunks: 0, onsets: 0, underruns: 0, latency: [], error: null, ended: false,
  streams: 0, playing: false, t0: null, fps: 30, levels: { original: 1, foley: 1 },
  exported: null, gain_db: null, playing_gain_db: null,
});

let file = null;
let audio = null; // the AudioContext and its graph, made on the first press of Play
let stream = null; // the live stream now running, if any
const waveform = new Waveform($("wave"));
const timeline = new Timeline($("timeline"), $("cursor"), (t) => seek(t));

status("Pick a video file.");
$("file").addEventListener("change", () => {
  file = $("file").files[0] || null;
  if (!file) return;
  stop();
  state.gain_db = null;
  timeline.reset();
  waveform.reset(0);
  video.src = URL.createObjectURL(file);
  $("empty").hidden = true;
  $("play").disabled = false;
  $("export").disabled = false;
  status(`${file.name}: ready to play.`);
  analyse(file).catch((e) => status(`${file.name}: ready to play (not analysed: ${e.message}).`));
});
video.addEventListener("loadedmetadata", () => {
  $("seek").max = String(video.duration);
  $("seek").disabled = false;
  waveform.reset(video.duration);
  timeline.setDuration(video.duration);
});
$("play").addEventListener("click", () => (state.playing ? pause() : play()).catch(fail));
$("seek").addEventListener("change", () => seek(Number($("seek").value)).catch(fail));
$("level-original").addEventListener("input", levels);
$("level-foley").addEventListener("input", levels);
$("export").addEventListener("click", () => exportFile().catch((e) => exportStatus(`Error: ${e.message}`)));
video.addEventListener("ended", () => {
  if ($("loop").checked) seek(0).catch(fail);
  else if (stream) stream.end();
});

function status(text) { $("status").textContent = text; }
function fail(error) { state.error = error.message || String(error); status(`Error: ${state.error}`); }
function exportStatus(text) { $("export-status").textContent = text; }
function delayS() { return Number($("delay").value) / 1000; }

async function graph() {
  if (audio) return audio;
  const context = new AudioContext({ sampleRate: RATE, latencyHint: "interactive" });
  await context.audioWorklet.addModule("/static/preview/worklet.js");
  const player = new AudioWorkletNode(context, "foley-player", { outputChannelCount: [1] });
  player.port.onmessage = (e) => { if (e.data.type === "underrun") state.underruns = e.data.count; };
  const foley = context.createGain();
  player.connect(foley).connect(context.destination);
  // The clip's own sound, delayed as its picture is.
  const original = context.createGain();
  const delay = context.createDelay(2.0);
  context.createMediaElementSource(video).connect(delay).connect(original).connect(context.destination);
  audio = { context, player, foley, original, delay };
  levels();
  return audio;
}

function levels() {
  state.levels = { original: Number($("level-original").value), foley: Number($("level-foley").value) };
  if (!audio) return;
  audio.original.gain.value = state.levels.original;
  audio.foley.gain.value = state.levels.foley;
}

async function play() {
  const { context, delay } = await graph();
  await context.resume();
  delay.delayTime.value = delayS();
  if (video.ended) video.currentTime = 0;
  state.playing = true;
  $("play").textContent = "Pause";
  stream = new LiveStream(audio, state.streams + 1);
  state.streams++;
  await stream.open();
  await video.play();
}

async function pause() {
  video.pause();
  stop();
  status(`Paused at ${timecode(video.currentTime, state.fps)}.`);
}

function stop() {
  state.playing = false;
  $("play").textContent = "Play";
  if (stream) stream.close();
  stream = null;
}

async function seek(timeS) {
  const playing = state.playing;
  if (playing) { video.pause(); stop(); }
  video.currentTime = Math.max(0, Math.min(timeS, video.duration || timeS));
  await new Promise((resolve) => video.addEventListener("seeked", resolve, { once: true }));
  $("seek").value = String(video.currentTime);
  if (playing || $("loop").checked && timeS === 0) await play();
}

// One stream of the video from where it is now to a pause, a seek or its end.
class LiveStream {
  constructor(graph, number) {
    this.graph = graph; this.number = number;
    this.ws = null; this.session = null; this.t0 = null;
    this.sent = []; // [media time, performance.now ms] per frame
    this.completing = 0; // index into `sent` of the frame that completes the next chunk
    this.shown = []; // [due time (performance.now ms), ImageBitmap]
    this.closed = false;
    this.capture = new OffscreenCanvas(WIDTH, HEIGHT).getContext("2d", { willReadFrequently: true });
  }

  async open() {
    this.graph.player.port.postMessage({ type: "reset", stream: this.number });
    const url = new URL("/v1/preview", location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    this.ws = new WebSocket(url);
    this.ws.binaryType = "arraybuffer";
    this.session = await new Promise((resolve, reject) => {
      this.ws.onopen = () => this.ws.send(JSON.stringify({
        type: "config", width: WIDTH, height: HEIGHT, pixel_format: "rgb24", sample_rate: RATE,
        ...(KEY ? { api_key: KEY } : {}),
        ...(state.gain_db !== null ? { gain_db: state.gain_db } : {}),
      }));
      this.ws.onerror = () => reject(new Error("the WebSocket connection failed"));
      this.ws.onmessage = (e) => {
        const m = JSON.parse(e.data);
        if (m.type === "ready") resolve(m); else reject(new Error(`${m.code}: ${m.reason}`));
      };
    });
    state.playing_gain_db = this.session.gain_db;
    const level = state.gain_db !== null ? "the export's level" : "the tier's usual level";
    status(`Playing: tier ${this.session.tier} ${this.session.model_version}, at ${level}.`);
    this.ws.onmessage = (e) => this.receive(e);
    this.ws.onclose = (e) => {
      if (!this.closed && !state.ended && !state.error) fail(new Error(`connection closed (${e.code}) ${e.reason}`));
    };
    video.requestVideoFrameCallback((now, meta) => this.frame(now, meta));
    this.paint();
  }

  end() { if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: "end" })); }

  close() {
    this.closed = true;
    this.graph.player.port.postMessage({ type: "reset", stream: 0 });
    if (this.ws) this.ws.close(1000);
    for (const [, bitmap] of this.shown) bitmap.close();
    this.shown = [];
  }

  receive(e) {
    if (this.closed) return;
    if (e.data instanceof ArrayBuffer) {
      const view = new DataView(e.data);
      const start = Number(view.getBigInt64(8, true));
      const samples = new Float32Array(e.data, 24);
      this.graph.player.port.postMessage({ type: "audio", stream: this.number, start, samples });
      waveform.add(this.t0 + start / RATE, samples);
      this.latencyOf(start + samples.length);
      state.chunks++;
      return;
    }
    const m = JSON.parse(e.data);
    if (m.type === "onset") { state.onsets++; timeline.mark(m, state.fps); }
    else if (m.type === "stats") $("stat-compute").textContent = `${m.compute_ms_p50.toFixed(1)} / ${m.compute_ms_p99.toFixed(1)} ms`;
    else if (m.type === "end") {
      state.ended = true;
      this.graph.player.port.postMessage({ type: "end", stream: this.number });
      status("Done.");
    } else if (m.type === "error") fail(new Error(`${m.code}: ${m.reason}`));
    render();
  }

  latencyOf(endSample) {
    // The chunk ending here was completed by the frame `lookahead` frames after its end (model
    // frames for a frame-rate tier; sent frames for a contacts tier, whose model_fps is null).
    // Chunks come in order, so the search goes on from where the last one stopped.
    const s = this.session, sent = this.sent;
    let k;
    if (s.model_fps) {
      const due = (endSample / s.samples_per_frame - 1 + s.lookahead_frames) / s.model_fps;
      while (this.completing < sent.length && sent[this.completing][0] - this.t0 < due - 1e-4) this.completing++;
      k = this.completing;
    } else {
      const end = endSample / s.sample_rate;
      while (this.completing < sent.length && sent[this.completing][0] - this.t0 < end - 1e-6) this.completing++;
      k = this.completing + s.lookahead_frames;
    }
    if (k < sent.length) state.latency.push(performance.now() - sent[k][1]);
  }

  frame(now, meta) {
    if (this.closed || this.ws.readyState !== WebSocket.OPEN) return;
    if (this.t0 === null) {
      this.t0 = state.t0 = meta.mediaTime;
      // Sample 0 sounds `delay` after this frame was presented.
      const lag = (performance.now() - now) / 1000;
      const frame = Math.round((this.graph.context.currentTime - lag + delayS()) * RATE);
      this.graph.player.port.postMessage({ type: "origin", stream: this.number, frame });
    } else if (this.sent.length) {
      const step = meta.mediaTime - this.sent[this.sent.length - 1][0];
      if (step > 0) state.fps = Math.round(1 / step); // the video's rate, for timecodes
    }
    const scale = Math.min(WIDTH / video.videoWidth, HEIGHT / video.videoHeight);
    const w = Math.round(video.videoWidth * scale), h = Math.round(video.videoHeight * scale);
    this.capture.fillStyle = "black";
    this.capture.fillRect(0, 0, WIDTH, HEIGHT);
    this.capture.drawImage(video, (WIDTH - w) >> 1, (HEIGHT - h) >> 1, w, h);
    const rgba = this.capture.getImageData(0, 0, WIDTH, HEIGHT).data;
    const message = new Uint8Array(16 + WIDTH * HEIGHT * 3);
    const header = new DataView(message.buffer);
    header.setUint8(0, 1); header.setUint8(1, 1);
    header.setUint32(4, this.sent.length, true);
    header.setFloat64(8, meta.mediaTime, true);
    for (let i = 0, j = 16; i < rgba.length; i += 4, j += 3) {
      message[j] = rgba[i]; message[j + 1] = rgba[i + 1]; message[j + 2] = rgba[i + 2];
    }
    this.ws.send(message);
    this.sent.push([meta.mediaTime, performance.now()]);
    state.frames++;
    createImageBitmap(video).then((bitmap) => {
      if (this.closed) bitmap.close(); else this.shown.push([now + delayS() * 1000, bitmap]);
    });
    if (!video.ended) video.requestVideoFrameCallback((n, m) => this.frame(n, m));
  }

  paint() {
    if (this.closed) return;
    const screen = $("screen").getContext("2d");
    const now = performance.now();
    let frame = null;
    while (this.shown.length && this.shown[0][0] <= now) {
      if (frame) frame.close();
      frame = this.shown.shift()[1];
    }
    if (frame) {
      screen.drawImage(frame, 0, 0, screen.canvas.width, screen.canvas.height);
      frame.close();
    }
    if (this.t0 !== null) {
      const shownAt = Math.max(this.t0, video.currentTime - delayS());
      timeline.cursor(shownAt);
      $("timecode").textContent = timecode(shownAt, state.fps);
      if (document.activeElement !== $("seek")) $("seek").value = String(shownAt);
    }
    requestAnimationFrame(() => this.paint());
  }
}

function render() {
  const lat = [...state.latency].sort((a, b) => a - b);
  const q = (p) => lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))].toFixed(1) : "–";
  $("stat-latency").textContent = `${q(0.5)} / ${q(0.99)} ms`;
  $("stat-counts").textContent = `${state.frames} / ${state.chunks}`;
  $("stat-onsets").textContent = String(state.onsets);
  $("stat-underruns").textContent = String(state.underruns);
}

// The file's offline render, answered with its contact markers (format=events): the markers go
// on the timeline at once, and its loudness gain becomes the live level, so the preview sounds
// as loud as the export will (a live stream cannot measure a clip it has not heard yet).
async function analyse(picked) {
  const body = new FormData();
  body.append("file", picked, picked.name);
  const headers = KEY ? { "X-API-Key": KEY } : {};
  const answer = await fetch("/v1/foley?format=events", { method: "POST", headers, body });
  if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
  const document = await answer.json();
  if (picked !== file) return; // another file was picked meanwhile
  const gain = answer.headers.get("X-Foley-Gain-dB");
  state.gain_db = gain === null ? null : Number(gain);
  const fps = document.video.timecode_fps;
  state.fps = fps;
  for (const contact of document.contacts) {
    timeline.mark(contact, fps);
  }
  if (!state.playing) status(`${picked.name}: ready to play, at the export's level.`);
}

// The full-quality render through the export queue (docs/exports.md): upload, poll, download.
async function exportFile() {
  const format = $("format").value;
  const headers = KEY ? { "X-API-Key": KEY } : {};
  const body = new FormData();
  body.append("file", file, file.name);
  $("export").disabled = true;
  $("download").hidden = true;
  exportStatus("Uploading…");
  try {
    let answer = await fetch(`/v1/exports?format=${format}`, { method: "POST", headers, body });
    let job = await answer.json();
    if (!answer.ok) throw new Error(`${job.error.code}: ${job.error.reason}`);
    while (job.state === "queued" || job.state === "running") {
      exportStatus(`${job.state === "queued" ? "Queued" : "Rendering"}… ${Math.round(100 * job.progress)} %`);
      await new Promise((resolve) => setTimeout(resolve, 500));
      answer = await fetch(`/v1/exports/${job.id}`, { headers });
      job = await answer.json();
      if (!answer.ok) throw new Error(`${job.error.code}: ${job.error.reason}`);
    }
    if (job.state !== "succeeded") throw new Error(job.error ? `${job.error.code}: ${job.error.reason}` : job.state);
    const result = await fetch(job.result_url, { headers });
    if (!result.ok) throw new Error(`the result could not be fetched (${result.status})`);
    const name = (result.headers.get("content-disposition") || "").match(/filename="([^"]+)"/);
    const link = $("download");
    link.href = URL.createObjectURL(await result.blob());
    link.download = name ? name[1] : `foley.${format}`;
    link.textContent = `Download ${link.download}`;
    link.hidden = false;
    state.exported = link.download;
    exportStatus(`Rendered in ${(job.timings.total || 0).toFixed(1)} s.`);
  } finally {
    $("export").disabled = false;
  }
}
