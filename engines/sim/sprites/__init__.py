"""Fast procedural 2.5-D clips that teach how things stop: contacts labelled to the microsecond.

    sample_clip(seed, *, kind=None, duration_s=None, size=None, fps=None) -> SpriteClip

Deterministic in `seed` (numpy Generator; the same seed gives the same frames bit for bit).
Unset arguments are drawn: duration 2-6 s; fps 12-60 (mostly 24/25/29.97/30, some 15/50/60,
some arbitrary; a quarter of the clips jittered by up to 20 % of the interval or with dropped
frames); size (width, height) with the long side 160-400 px at 4:3, 16:9, 1:1 or 9:16, some
with letterbox or pillarbox bars baked in. `kind` is one of KINDS:

    drop    1-3 bodies fall (screen-space gravity 300-3000 px/s^2) onto a floor, shelf or
            table (maybe tilted), off walls; each bounce is a contact until they settle or roll
    strike  a stick, hammer or mallet swung about a wrist, or a hand, boot or fist driven, into
            a floor, table, drum, anvil, wall or a surface facing the camera; stops abruptly or
            rebounds, dwells, lifts, repeats 0.15-1.5 s apart; or boots walking (heel strikes);
            or a bat or racket meeting a ball (the ball reverses)
    swing   the same bodies swung and turned round smoothly, often right next to a surface,
            never touching it; waving, conducting, wipers (no contacts)
    wobble  a dog running, a bird hopping (landings are contacts, never required), a person
            bobbing, a shaken body, a bird flapping, a talking head, light flicker
    pass    bodies and traffic crossing at constant velocity, occluding each other; rain,
            flowing water
    camera  a still scene filmed by a panning, shaking, zooming or rolling camera
    static  nothing moves (noise and flicker aside)

Any kind may add camera motion, distractor motion from the silent kinds, foreground occluders,
rain or flowing water, and a hard cut to a second shot of the same kind (`cuts`).

SpriteClip
    frames      (N, H, W, 3) uint8 RGB, as delivered: motion blur, sensor noise, bars, burnt-in
                captions, JPEG (quality 30-95) on some clips, an H.264 round trip on a few
    times_s     (N,) float64 seconds, times_s[0] == 0, strictly increasing
    duration_s  the clip covers [0, duration_s); all frames lie inside it
    contacts    SpriteContact per contact inside [0, duration_s), sorted by time
    cuts        indices of frames that begin a new shot (never 0)
    kind, seed
SpriteContact
    time_s      exact contact time on the clip's timeline (from the closed-form motion, not the
                frames): when the body's outline meets the surface line
    xy          the contact point in frame pixels (x right, y down; pixel centres at integers)
    speed_px_s  closing speed along the contact normal just before contact, frame px/s
    size_px     the moving body's longest extent, frame px
    material    an engines.sim.materials OBJECT_MATERIALS name, or None (hands, birds)
    required    True when the contact must be voiced: inside the picture (not in the bars, not
                under a caption), not hidden behind a body drawn in front, body >= 2 px,
                closing speed >= max(0.25 m/s at the body's implied scale, 20 px/s), a frame of
                the same shot on either side; False contacts are neither right nor wrong to voice

Time convention: the frame at times_s[k] shows the scene at that time; with an exposure of
s seconds (0 to one frame interval, per clip) it shows the average over [t - s/2, t + s/2].
"""

from engines.sim.sprites.clip import SpriteClip, SpriteContact
from engines.sim.sprites.generate import sample_clip
from engines.sim.sprites.scenarios import KINDS

__all__ = ["KINDS", "SpriteClip", "SpriteContact", "sample_clip"]
