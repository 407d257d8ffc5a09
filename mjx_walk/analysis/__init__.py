"""The analysis layer: audit flags in plain words, plots, videos and the run report. Imports
every layer below it."""
