"""`strata perf fuzz`: a million generated frames at a live broker while a real client round-trips.

frames.py makes the frames (sans-IO, seeded), driver.py sends them over many pipelined
connections and counts how the broker answered, roundtrip.py is the official client that must keep
round-tripping, command.py is the command line (the standalone, RSS, the report, the exit code).

What must hold: the frames are a function of the seed alone (frames.py imports no sockets), and a
run ends, within --timeout-s, with the broker it started stopped and a verdict.
"""
