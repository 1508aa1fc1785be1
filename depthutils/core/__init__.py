"""The bottom layer: errors, results and their statistics, prompts and their encoding, progress bars, norms, the
result cache, numbers as the prose prints them, softmax without subnormal floats, and elementwise chains compiled
into one loop. It imports nothing else of depthutils."""
