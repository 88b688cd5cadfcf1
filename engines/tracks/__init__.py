"""Contact detection from on-screen object trajectories alone.

A future visual localiser gives each object's centre per frame; these modules find, per track
and per frame interval, whether the object touched something in that interval and when:

    data      simulated scenes -> per-object pixel tracks at native frame rates, with labels
    geometry  a non-learned baseline: constant-acceleration arcs before and after an interval
    head      a tiny learned per-track temporal head (at most one frame of lookahead)
    train     trains the head on cached simulated tracks
    study     measures both against the required-onset reference (python -m engines.tracks.study)
"""
