"""Having a pod's image before its container starts: the node's store, else the registry (pure Python).

`ensure_image` follows the node's pull policy (TIDEPOOL_POD_PULL): `never` uses only the node's
store, `missing` pulls what the store lacks, `always` pulls every time (a registry's newer image
under the same tag wins). Pulls go to the operator's registry for names that name none
(TIDEPOOL_POD_REGISTRY, `image_names.qualified` applied by the caller) with its credentials file
(TIDEPOOL_POD_REGISTRY_AUTH_FILE, Podman's `--authfile`). An image that cannot be had raises
`ImageUnavailable` with the reason: the pod stays Pending and is tried again later, since a
registry that is down or a tag not pushed yet is no fault of the job (DESIGN §3).

So is an image for another platform ("image X is for linux/arm64, this node is linux/amd64"):
Podman would only warn and start it, and its first program would fail with "exec format error",
counted as the job's failure. Where the pull policy allows, such an image is pulled again first,
since the registry may hold this node's platform under the same tag (a multi-platform image).
"""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Sequence
from dataclasses import replace

from scheduler.image_names import image_reference_problem, qualified
from scheduler.node.runtime.process import PodSpec

PULL_TIMEOUT_S = 900.0
# Python's machine names as OCI image platforms name them (GOARCH); any other is used as it is.
_OCI_ARCHITECTURES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm",
                      "armv6l": "arm", "i386": "386", "i686": "386", "ppc64le": "ppc64le", "s390x": "s390x",
                      "riscv64": "riscv64"}


class ImageUnavailable(OSError):
    """The pod's image is not in the node's store and cannot be pulled (unknown, refused, no policy)."""


def _last_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (result.stderr or result.stdout or "").splitlines() if line.strip()]
    return next((line for line in reversed(lines) if line.startswith("Error")), lines[-1] if lines else "no output")


def node_platform(system: str | None = None, machine: str | None = None) -> str:
    """This node's platform as images name it: `linux/amd64`, `linux/arm64`, ..."""
    system = (system or platform.system()).lower()
    machine = (machine or platform.machine()).lower()
    return f"{system}/{_OCI_ARCHITECTURES.get(machine, machine)}"


# Absent from the node's store: one inspect says whether the image is there and for which platform.
ABSENT = "absent"


def image_platform(podman: Sequence[str], image: str) -> str | None:
    """`os/architecture` of an image in the node's store; ABSENT when the store lacks it (Podman's
    inspect fails); None where Podman does not say."""
    result = subprocess.run([*podman, "image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", image],
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        return ABSENT
    found = result.stdout.strip().splitlines()
    if not found or found[0].startswith("/") or found[0].endswith("/"):
        return None
    return found[0].lower()


def platform_problem(image: str, theirs: str | None, node: str) -> str | None:
    """Why `image`, for platform `theirs`, cannot run on platform `node`; None when it can or is not known."""
    if theirs in (None, ABSENT, node):
        return None
    return f"image {image} is for {theirs}, this node is {node}"


def ensure_image(podman: Sequence[str], image: str, *, policy: str, authfile: str = "",
                 timeout: float = PULL_TIMEOUT_S, node: str | None = None) -> None:
    """Return once `image` is in the node's store per `policy`, for this node's platform (`node`,
    default node_platform()); raises ImageUnavailable."""
    node = node or node_platform()
    theirs = image_platform(podman, image)
    present = theirs != ABSENT
    wrong_platform = platform_problem(image, theirs, node)
    if present and policy != "always" and wrong_platform is None:
        return
    if policy == "never":
        raise ImageUnavailable(wrong_platform or f"image {image} is not in this node's store and TIDEPOOL_POD_PULL=never")
    argv = [*podman, "pull", "--quiet"]
    if authfile:
        argv += ["--authfile", authfile]
    try:
        result = subprocess.run([*argv, image], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ImageUnavailable(wrong_platform or f"pulling image {image} took longer than {timeout:.0f} s") from None
    if result.returncode != 0:
        # The store's copy for another platform is the cause; the failed try for a better one is not.
        raise ImageUnavailable(wrong_platform or f"image {image} could not be pulled: {_last_error(result)}"[:240])
    wrong_platform = platform_problem(image, image_platform(podman, image), node)
    if wrong_platform is not None:
        raise ImageUnavailable(wrong_platform)


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
