"""A CPU-only model actor for a local NDIF test server (no CUDA calls)."""
import gc

import ray
import torch  # noqa: F401  (loaded before the deployment builds the model)
from ndif.services.ray.deployments.modeling.base import BaseModelDeployment
from nnsight.modeling.huggingface import HuggingFaceModel


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
