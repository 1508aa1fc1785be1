"""The bottom layer: errors, results and their statistics, prompts and their encoding, progress bars, norms and
the result cache. It imports nothing else of depthutils."""
