"""Having a container pod's image: the node's store, the pull policy, the operator's registry and its
credentials (runtime/pulls.py), with a recording stand-in for podman and, where it runs, the real one."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from scheduler.node.runtime.container import podman_available
from scheduler.node.runtime.pulls import ImagePuller, ImageUnavailable, ensure_image, node_platform
from tests.pod_images import foreign_image, other_platform
from tests.runtime.test_container_args import spec as pod_spec


@pytest.fixture
def fake_podman(tmp_path: Path):
    """A podman that has the images listed in `store`, records its calls, and refuses pulls of names
    containing 'nosuch' the way a registry does. `image inspect` fails for an image not in the store
    and gives the platform `platforms` lists for it ("name os/arch" lines), else an empty line (a
    platform Podman does not say); a pull of a name containing 'multi' gets linux/amd64 (a registry's
    multi-platform image)."""
    calls = tmp_path / "calls"
    store = tmp_path / "store"
    store.write_text("localhost/tidepool-pod:1\n")
    platforms = tmp_path / "platforms"
    platforms.write_text("")
    script = tmp_path / "podman"
    script.write_text(f"""#!/bin/sh
echo "$*" >> {calls}
if [ "$1 $2" = "image inspect" ]; then
  for image; do :; done
  grep -qxF "$image" {store} || {{ echo "Error: $image: image not known" >&2; exit 125; }}
  grep "^$image " {platforms} | tail -n 1 | cut -d' ' -f2; exit 0
fi
if [ "$1" = "pull" ]; then
  for image; do :; done
  case "$image" in *nosuch*) echo "Error: initializing source docker://$image: reading manifest: manifest unknown" >&2; exit 125;; esac
  case "$image" in *multi*) echo "$image linux/amd64" >> {platforms};; esac
  echo "$image" >> {store}; echo sha256:abc; exit 0
fi
exit 2
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)

    class Fake:
        command = [str(script)]

        @staticmethod
        def has(image: str, platform: str) -> None:
            with store.open("a") as file:
                file.write(f"{image}\n")
            with platforms.open("a") as file:
                file.write(f"{image} {platform}\n")

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


def test_the_nodes_platform_is_named_as_images_name_it() -> None:
    assert node_platform("Linux", "x86_64") == "linux/amd64"
    assert node_platform("Linux", "aarch64") == "linux/arm64"
    assert node_platform("Linux", "ppc64le") == "linux/ppc64le"
    assert node_platform("Linux", "mips64") == "linux/mips64"  # unknown: as the kernel names it


def test_an_image_for_another_platform_is_not_run_and_says_so(fake_podman) -> None:
    fake_podman.has("team/arm:v1", "linux/arm64")
    fake_podman.has("team/amd:v1", "linux/amd64")
    ensure_image(fake_podman.command, "team/amd:v1", policy="never", node="linux/amd64")
    with pytest.raises(ImageUnavailable) as refused:
        ensure_image(fake_podman.command, "team/arm:v1", policy="never", node="linux/amd64")
    assert str(refused.value) == "image team/arm:v1 is for linux/arm64, this node is linux/amd64"
    # Where pulls are allowed it is pulled again first; the registry had no other platform of it.
    with pytest.raises(ImageUnavailable, match="^image team/arm:v1 is for linux/arm64, this node is linux/amd64$"):
        ensure_image(fake_podman.command, "team/arm:v1", policy="missing", node="linux/amd64")
    assert "pull --quiet team/arm:v1" in fake_podman.calls()


def test_a_refused_pull_of_a_wrong_platform_image_keeps_the_platform_reason(fake_podman) -> None:
    fake_podman.has("team/nosuch-arm:v1", "linux/arm64")
    with pytest.raises(ImageUnavailable, match="^image team/nosuch-arm:v1 is for linux/arm64, this node is linux/amd64$"):
        ensure_image(fake_podman.command, "team/nosuch-arm:v1", policy="missing", node="linux/amd64")


def test_a_multi_platform_image_pulled_again_gets_the_nodes_platform(fake_podman) -> None:
    fake_podman.has("team/multi:v1", "linux/arm64")  # pulled on an arm64 machine, copied here
    ensure_image(fake_podman.command, "team/multi:v1", policy="missing", node="linux/amd64")
    assert "pull --quiet team/multi:v1" in fake_podman.calls()


@pytest.fixture
def foreign(tmp_path: Path):
    if (missing := podman_available()) is not None:
        pytest.skip(f"needs rootful Podman: {missing}")
    with foreign_image(tmp_path) as name:
        yield name


def test_real_podman_refuses_a_locally_made_image_of_another_platform(foreign) -> None:
    here, theirs = node_platform(), other_platform()
    for policy in ("never", "missing"):  # missing: the pull of localhost/... fails, the platform is the reason
        with pytest.raises(ImageUnavailable) as refused:
            ensure_image(["podman"], foreign, policy=policy, timeout=60)
        assert str(refused.value) == f"image {foreign} is for {theirs}, this node is {here}"
    ensure_image(["podman"], foreign, policy="never", node=theirs)  # on a node of its platform it would run
