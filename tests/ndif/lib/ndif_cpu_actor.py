"""A CPU-only model actor for a local NDIF test server (no CUDA calls).

It holds a job that has started running while the file ``$NDIF_HOME/hold`` exists (at most HOLD_SECONDS):
tests/models/test_remote.py's fault tests cause their fault while a job is held, so that the job cannot
finish before the fault lands, however slow the machine.
"""
import gc
import os
import time
from pathlib import Path

import ray
import torch  # noqa: F401  (loaded before the deployment builds the model)
from ndif.services.ray.deployments.modeling.base import BaseModelDeployment
from nnsight.modeling.huggingface import HuggingFaceModel

HOLD = Path(os.environ.get("NDIF_HOME", "/nonexistent")) / "hold"
HOLD_SECONDS = 120.0


class CPUModelDeployment(BaseModelDeployment):
    # Parking HOT->WARM moves weights GPU->CPU; meaningless here.
    CACHEABLE = False

    def load_from_disk(self) -> HuggingFaceModel:
        # The controller assigns a fake GPU ({0: bytes}); forget it so the
        # per-request gpu_baselines/gpu_peaks helpers make no torch.cuda calls.
        self.gpu_mem_bytes_by_id = {}
        model = HuggingFaceModel.from_model_key(
            self.model_key, dispatch=True, dtype=self.dtype_name, **self.kwargs
        )
        model._module.requires_grad_(False)
        model._module.eval()
        return model

    def commit(self) -> None:
        """Called after the RUNNING status is sent and before the block runs: wait while HOLD exists."""
        end = time.monotonic() + HOLD_SECONDS
        while HOLD.exists() and time.monotonic() < end:
            time.sleep(0.05)

    async def to_cache(self) -> None:
        await self.cancel("preempted")
        self.cached = True

    def from_cache(self, gpu_mem_bytes_by_id) -> None:
        self.cached = False

    def cleanup(self) -> None:
        self.kill_switch.clear()
        self.kill_reason = None
        self.execution_ident = None
        self.model.interleaver.cancel()
        gc.collect()


@ray.remote(num_cpus=1, max_restarts=-1)
class CPUModelActor(CPUModelDeployment):
    pass
