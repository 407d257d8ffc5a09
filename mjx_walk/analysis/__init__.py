"""The analysis layer: the held-out panel evaluator, audit flags, trace files and replay, plots,
videos and the run report. Imports every layer below it."""
