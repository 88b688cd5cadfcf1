// Plays the Foley stream in sync with the page's delayed video: sample s (0 = the first frame's
// time) sounds at context frame `origin + s`, where `origin` is set by the page. `reset` drops
// the stream (a pause or a seek): silence until the next one's origin.
class FoleyPlayer extends AudioWorkletProcessor {
  constructor() {
    super();
    this.size = 1 << 20; // ~22 s at 48 kHz: far more than the delay ever holds
    this.ring = new Float32Array(this.size);
    this.written = 0; // samples received, in order
    this.origin = null; // context frame of sample 0
    this.underruns = 0;
    this.ended = false; // the stream is complete: nothing more is missing
    this.stream = 0; // the page's stream number: messages of others are dropped
    this.port.onmessage = (event) => {
      const m = event.data;
      if (m.type === "reset") this.reset(m.stream);
      else if (m.stream !== this.stream) return; // late messages of a stream that was dropped
      else if (m.type === "origin") this.origin = m.frame;
      else if (m.type === "audio") this.write(m.start, m.samples);
      else if (m.type === "end") this.ended = true;
    };
  }

  reset(stream) {
    this.stream = stream;
    this.ring.fill(0);
    this.written = 0;
    this.origin = null;
    this.ended = false;
  }

  write(start, samples) {
    for (let i = 0; i < samples.length; i++) this.ring[(start + i) % this.size] = samples[i];
    this.written = Math.max(this.written, start + samples.length);
  }

  process(inputs, outputs) {
    const out = outputs[0][0];
    if (this.origin === null) return true;
    const first = currentFrame - this.origin;
    let missing = false;
    for (let i = 0; i < out.length; i++) {
      const s = first + i;
      if (s < 0) continue;
      if (s < this.written) out[i] = this.ring[s % this.size];
      else missing = true;
    }
    if (missing && !this.ended && first >= 0) {
      this.underruns++;
      this.port.postMessage({ type: "underrun", count: this.underruns });
    }
    return true;
  }
}

registerProcessor("foley-player", FoleyPlayer);
