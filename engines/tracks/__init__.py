"""Contact detection from on-screen object trajectories alone.

A future visual localiser gives each object's centre per frame; these modules find, per track
and per frame interval, whether the object touched something in that interval and when:

    data      simulated scenes -> per-object pixel tracks at native frame rates, with labels
    head      a tiny learned per-track temporal head (at most one frame of lookahead)
    train     trains the head on cached simulated tracks
"""
