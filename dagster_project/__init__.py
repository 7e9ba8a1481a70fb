"""The attention warehouse. Importing the package sets the process environment that must be in
place before torch is imported, so every entry point (the CLI, Dagster's code server, tests,
benchmarks) gets it by importing anything of the project first or along with torch."""

import os

# 2-thread torch spins (and slows ~4x) while another process keeps a core busy; PASSIVE makes
# idle OpenMP threads sleep. The OpenMP runtime reads it once, when torch loads it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
