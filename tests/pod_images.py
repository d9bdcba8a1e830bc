"""Locally made pod images for tests that need one Podman should refuse (no registry needed)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scheduler.node.runtime.pulls import node_platform


def other_platform() -> str:
    """A platform that is not this node's: linux/arm64, or linux/amd64 on an arm64 node."""
    return "linux/amd64" if node_platform() == "linux/arm64" else "linux/arm64"


@contextmanager
def foreign_image(work: Path) -> Iterator[str]:
    """An image for other_platform() in Podman's store (`podman import --os --arch` of a rootfs whose
    /bin/sh is not a program of this machine), removed afterwards. Yields its name."""
    os_name, arch = other_platform().split("/")
    rootfs = work / "foreign-rootfs"
    (rootfs / "bin").mkdir(parents=True)
    (rootfs / "bin" / "sh").write_bytes(b"\x7fELF not for this machine")
    tarball = work / "foreign-rootfs.tar"
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True, timeout=60)
    name = f"localhost/tidepool-test-{arch}:{uuid.uuid4().hex[:12]}"  # unique: runs may overlap
    made = subprocess.run(["podman", "import", "--os", os_name, "--arch", arch, str(tarball), name],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    try:
        yield name
    finally:
        subprocess.run(["podman", "rmi", "--force", name], capture_output=True, timeout=120)
