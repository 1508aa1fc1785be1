"""Every measurement of the checked-out depthutils, remote (local NDIF) against local, on ladder-4."""
import os, time
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["NDIF_API_KEY"] = "SECRET-MARKER-123"
import numpy as np, nnsight
import depthutils as du
from nnsight.modeling import huggingface as hf
nnsight.CONFIG.API.HOST = "http://127.0.0.1:8001"
PATH = "/work/main/data/models/ladder-4"
hf._ID_CACHE[PATH] = PATH
local = du.load_model("ladder-4")
remote = du.load_model(PATH, remote=True)
ps = du.data.gsm8k(2)
def md(a, b):
    out = {}
    for k, v in vars(a).items():
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            out[k] = float(np.nanmax(np.abs(v - getattr(b, k))))
    return out
calls = {
 "contributions": lambda m: du.contributions(m, ps),
 "logit_lens": lambda m: du.logit_lens(m, ps),
 "future_effects layer": lambda m: du.future_effects(m, ps[:1], method="batched"),
 "future_effects attn all": lambda m: du.future_effects(m, ps[:1], part="attn", mode="all", method="batched"),
 "future_effects mlp local": lambda m: du.future_effects(m, ps[:1], part="mlp", local=True, method="batched"),
 "erasure": lambda m: du.residual_erasure(m, "5 + 7 + 5 = ", "17", baseline=du.residual_means(m, ps), method="batched"),
 "ig": lambda m: du.integrated_gradients(m, "5 + 7 = ", "12", steps=16, method="batched"),
 "ig gauss": lambda m: du.integrated_gradients(m, "5 + 7 = ", "12", steps=8, rule="gauss", method="batched"),
 "effective_depth": lambda m: du.effective_depth(m, ps),
}
for name, call in calls.items():
    t = time.time()
    try:
        a, b = call(local), call(remote)
        print(f"{name}: max|d| {max(md(a, b).values()):.2e} ({time.time()-t:.1f}s)", flush=True)
    except Exception as e:
        print(f"{name}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
