"""Having a container pod's image: the node's store, the pull policy, the operator's registry and its
credentials (runtime/pulls.py), with a recording stand-in for podman and, where it runs, the real one."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from scheduler.node.runtime.container import podman_available
from scheduler.node.runtime.pulls import ImagePuller, ImageUnavailable, ensure_image
from tests.runtime.test_container_args import spec as pod_spec


@pytest.fixture
def fake_podman(tmp_path: Path):
    """A podman that has the images listed in `store`, records its calls, and refuses pulls of names
    containing 'nosuch' the way a registry does."""
    calls = tmp_path / "calls"
    store = tmp_path / "store"
    store.write_text("localhost/tidepool-pod:1\n")
    script = tmp_path / "podman"
    script.write_text(f"""#!/bin/sh
echo "$*" >> {calls}
if [ "$1 $2" = "image exists" ]; then grep -qxF "$3" {store}; exit $?; fi
if [ "$1" = "pull" ]; then
  for image; do :; done
  case "$image" in *nosuch*) echo "Error: initializing source docker://$image: reading manifest: manifest unknown" >&2; exit 125;; esac
  echo "$image" >> {store}; echo sha256:abc; exit 0
fi
exit 2
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)

    class Fake:
        command = [str(script)]

        @staticmethod
        def calls() -> list[str]:
            return calls.read_text().splitlines() if calls.exists() else []

    return Fake


def test_never_uses_only_the_store(fake_podman) -> None:
    ensure_image(fake_podman.command, "localhost/tidepool-pod:1", policy="never")
    with pytest.raises(ImageUnavailable, match="not in this node's store and TIDEPOOL_POD_PULL=never"):
        ensure_image(fake_podman.command, "team/train:v2", policy="never")
    assert not any(call.startswith("pull") for call in fake_podman.calls())


def test_missing_pulls_what_the_store_lacks_with_the_credentials_file(fake_podman) -> None:
    ensure_image(fake_podman.command, "localhost/tidepool-pod:1", policy="missing")
    ensure_image(fake_podman.command, "registry.example.com/team/train:v2", policy="missing", authfile="/etc/auth.json")
    pulls = [call for call in fake_podman.calls() if call.startswith("pull")]
    assert pulls == ["pull --quiet --authfile /etc/auth.json registry.example.com/team/train:v2"]


def test_always_pulls_even_what_the_store_has(fake_podman) -> None:
    ensure_image(fake_podman.command, "localhost/tidepool-pod:1", policy="always")
    assert "pull --quiet localhost/tidepool-pod:1" in fake_podman.calls()


def test_a_refused_pull_says_why(fake_podman) -> None:
    with pytest.raises(ImageUnavailable, match="could not be pulled: Error: .*manifest unknown"):
        ensure_image(fake_podman.command, "team/nosuch:v1", policy="missing")


def test_the_puller_names_the_image_as_the_node_has_it(fake_podman, tmp_path: Path) -> None:
    puller = ImagePuller(fake_podman.command, default_image="localhost/tidepool-pod:1", policy="missing",
                         registry="registry.example.com:5000")
    assert puller.prepare(pod_spec(tmp_path, image="team/train:v2")).image == "registry.example.com:5000/team/train:v2"
    assert puller.prepare(pod_spec(tmp_path, image="")).image == "localhost/tidepool-pod:1"  # the node's default
    assert puller.prepare(pod_spec(tmp_path, image="quay.io/a/b:1")).image == "quay.io/a/b:1"
    with pytest.raises(ValueError, match="TIDEPOOL_POD_REGISTRY='https://x'"):
        ImagePuller(fake_podman.command, default_image="", registry="https://x")
    with pytest.raises(ImageUnavailable, match="no default"):
        ImagePuller(fake_podman.command, default_image="").prepare(pod_spec(tmp_path, image=""))


@pytest.mark.skipif(podman_available() is not None, reason=f"needs rootful Podman: {podman_available()}")
def test_real_podman_an_unknown_image_and_a_refused_pull(tmp_path: Path) -> None:
    podman = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]
    with pytest.raises(ImageUnavailable, match="not in this node's store"):
        ensure_image(podman, "localhost/tidepool-no-such-image:1", policy="never")
    # Nothing listens on port 1: the registry refuses the pull at once, without a network.
    with pytest.raises(ImageUnavailable, match="could not be pulled"):
        ensure_image(podman, "127.0.0.1:1/team/nosuch:1", policy="missing", timeout=60)
