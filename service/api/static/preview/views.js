// What the page draws: the Foley's waveform, the contact markers, and timecodes. Positions
// are media times of the video, so what several streams (after a seek) draw lines up.

export const RATE = 48000;

export function timecode(seconds, fps) {
  const rate = Math.round(fps) || 30;
  const frames = Math.max(0, Math.floor(seconds * fps + 1e-6));
  const ff = frames % rate;
  const s = Math.floor(frames / rate);
  const pad = (n) => String(n).padStart(2, "0");
  return `${pad(Math.floor(s / 3600))}:${pad(Math.floor(s / 60) % 60)}:${pad(s % 60)}:${pad(ff)}`;
}

export class Waveform {
  constructor(canvas) {
    this.ctx = canvas.getContext("2d");
    this.w = canvas.width; this.h = canvas.height; this.duration = 10;
    this.ctx.fillStyle = "#2f6fed";
  }
  reset(duration) {
    this.duration = duration || 10;
    this.ctx.clearRect(0, 0, this.w, this.h);
  }
  add(startS, samples) {
    const x0 = Math.floor((startS / this.duration) * this.w);
    const x1 = Math.floor(((startS + samples.length / RATE) / this.duration) * this.w);
    const per = Math.max(1, Math.floor(samples.length / Math.max(1, x1 - x0)));
    this.ctx.clearRect(x0, 0, Math.max(1, x1 - x0), this.h);
    for (let x = x0; x < Math.max(x1, x0 + 1); x++) {
      let peak = 0;
      for (let i = (x - x0) * per; i < Math.min(samples.length, (x - x0 + 1) * per); i++) {
        peak = Math.max(peak, Math.abs(samples[i]));
      }
      const h = Math.min(1, peak) * this.h;
      this.ctx.fillRect(x, (this.h - h) / 2, 1, Math.max(1, h));
    }
  }
}

// Contact markers, one per contact heard; a marker is a button that seeks there.
export class Timeline {
  constructor(element, cursor, onPick) {
    this.element = element; this.cursorElement = cursor; this.onPick = onPick;
    this.duration = 10; this.seen = new Set();
  }
  reset() {
    this.seen.clear();
    for (const mark of [...this.element.querySelectorAll(".onset")]) mark.remove();
  }
  setDuration(duration) {
    this.duration = duration || 10;
    for (const mark of this.element.querySelectorAll(".onset")) this.place(mark);
  }
  place(mark) {
    mark.style.left = `${Math.min(100, (100 * Number(mark.dataset.time)) / this.duration)}%`;
  }
  mark(onset, fps) {
    // A contact heard again (after a seek, or first listed by the offline analysis) is one
    // marker; contacts closer than 30 ms are one sound anyway.
    const key = onset.time_s.toFixed(2);
    if (this.seen.has(key)) return;
    this.seen.add(key);
    const mark = document.createElement("button");
    mark.className = "onset";
    mark.dataset.time = String(onset.time_s);
    this.place(mark);
    const what = [onset.material, onset.kind].filter(Boolean).join(" ");
    mark.title = `${timecode(onset.time_s, fps)} ${what}`;
    mark.setAttribute("aria-label", mark.title);
    mark.addEventListener("click", () => this.onPick(onset.time_s));
    this.element.appendChild(mark);
  }
  get count() { return this.seen.size; }
  cursor(timeS) {
    this.cursorElement.style.left = `${Math.max(0, Math.min(100, (100 * timeS) / this.duration))}%`;
  }
}
