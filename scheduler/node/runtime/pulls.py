"""Having a pod's image before its container starts: the node's store, else the registry (pure Python).

`ensure_image` follows the node's pull policy (TIDEPOOL_POD_PULL): `never` uses only the node's
store, `missing` pulls what the store lacks, `always` pulls every time (a registry's newer image
under the same tag wins). Pulls go to the operator's registry for names that name none
(TIDEPOOL_POD_REGISTRY, `image_names.qualified` applied by the caller) with its credentials file
(TIDEPOOL_POD_REGISTRY_AUTH_FILE, Podman's `--authfile`). An image that cannot be had raises
`ImageUnavailable` with the reason: the pod stays Pending and is tried again later, since a
registry that is down or a tag not pushed yet is no fault of the job (DESIGN §3).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import replace

from scheduler.image_names import image_reference_problem, qualified
from scheduler.node.runtime.process import PodSpec

PULL_TIMEOUT_S = 900.0


class ImageUnavailable(OSError):
    """The pod's image is not in the node's store and cannot be pulled (unknown, refused, no policy)."""


def _last_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (result.stderr or result.stdout or "").splitlines() if line.strip()]
    return next((line for line in reversed(lines) if line.startswith("Error")), lines[-1] if lines else "no output")


def ensure_image(podman: Sequence[str], image: str, *, policy: str, authfile: str = "",
                 timeout: float = PULL_TIMEOUT_S) -> None:
    """Return once `image` is in the node's store per `policy`; raises ImageUnavailable."""
    present = subprocess.run([*podman, "image", "exists", image], capture_output=True, text=True,
                             timeout=60).returncode == 0
    if present and policy != "always":
        return
    if policy == "never":
        raise ImageUnavailable(f"image {image} is not in this node's store and TIDEPOOL_POD_PULL=never")
    argv = [*podman, "pull", "--quiet"]
    if authfile:
        argv += ["--authfile", authfile]
    try:
        result = subprocess.run([*argv, image], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ImageUnavailable(f"pulling image {image} took longer than {timeout:.0f} s") from None
    if result.returncode != 0:
        raise ImageUnavailable(f"image {image} could not be pulled: {_last_error(result)}"[:240])


class ImagePuller:
    """The node's image policy for container pods: which name a pod's image has here, and having it."""

    def __init__(self, podman: Sequence[str], *, default_image: str, policy: str = "missing", registry: str = "",
                 authfile: str = "") -> None:
        if registry and (problem := image_reference_problem(f"{registry}/x")):
            raise ValueError(f"TIDEPOOL_POD_REGISTRY={registry!r} is not a registry host[:port]: {problem}")
        if policy not in ("never", "missing", "always"):
            raise ValueError(f"TIDEPOOL_POD_PULL={policy!r}: use never, missing or always")
        self.podman = list(podman)
        self.default_image = default_image
        self.policy = policy
        self.registry = registry
        self.authfile = authfile

    def image_for(self, spec: PodSpec) -> str:
        return qualified(spec.image or self.default_image, self.registry)

    def prepare(self, spec: PodSpec) -> PodSpec:
        """`spec` naming its image as this node has it, once it is here; raises ImageUnavailable."""
        image = self.image_for(spec)
        if not image:
            raise ImageUnavailable("the job names no image and this node has no default "
                                   "(TIDEPOOL_POD_IMAGE; bin/build-pod-image)")
        ensure_image(self.podman, image, policy=self.policy, authfile=self.authfile)
        return replace(spec, image=image)
