"""placer for PyTorch: capture a training step as a placer model.

    import placer_torch
    placer_torch.capture(model, (images, labels), loss_fn, optimizer, "model.json")

`placer_torch.profile("model.json")` profiles it with torch's own kernels, and
`placer_torch.apply(model, optimizer, "model.json", "plan.json")` runs the user's loop
under a plan. The model file is placer's own format, checked and written by placer's Rust core
(`placer_torch._core`), so every `placer` verb reads it: inspect, profile, solve, run.
"""

from ._core import FORMAT_VERSION, ModelError, check_model
from .apply import Placed, apply
from .capture import Capture, CaptureError, capture
from .profile import ProfileError, TorchKernels, profile

__all__ = ["capture", "Capture", "CaptureError", "apply", "Placed", "profile", "TorchKernels", "ProfileError",
           "ModelError", "check_model", "FORMAT_VERSION"]
