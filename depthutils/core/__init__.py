"""The bottom layer: errors, results and their statistics, prompts and their encoding, progress bars, norms, the
result cache, and numbers as the prose prints them. It imports nothing else of depthutils."""
