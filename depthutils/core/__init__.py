"""The bottom layer: errors, results and their statistics, bands over seeds, prompts and their encoding, progress
bars, norms, the result cache, numbers as the prose prints them, softmax without subnormal floats, elementwise
chains compiled into one loop, and torch's threads beside other CPU-bound processes. It imports nothing else of depthutils."""
