"""The node's default pod image, built locally from Debian's packages (no registry needed).

`python -m scheduler.node.runtime.image` (or `bin/build-pod-image`) builds
`localhost/tidepool-pod:<version>`: a debootstrap `minbase` of Debian bookworm with python3, plus
Tidepool's checkpoint helper (`tidepool_ckpt/`) and `examples/` copied to /opt/tidepool, which is on
the image's PYTHONPATH. So `python3 /opt/tidepool/examples/train_linear.py` runs inside as it runs
on a host. The version is a digest of what goes in (suite, packages, this recipe, the helper's and
the examples' files): an image with that tag already in Podman's store is reused, so only a change
of its inputs builds again (about a minute: debootstrap, then `podman import`).

Needs root (debootstrap, rootful Podman) and a Debian mirror (TIDEPOOL_POD_IMAGE_MIRROR, default
http://deb.debian.org/debian). Pure Python, no Django.

`--with-torch` builds `localhost/tidepool-pod-torch:<version>` on top of the default image (built
first when missing): one more layer with PyTorch (TORCH_REQUIREMENT, CPU or whatever build pip's
sources give) and its dependencies, installed by this Python's pip from pip's configured sources
(index, find-links) into the image's /usr/local/lib/python3.X/dist-packages, and `torchrun` in
/usr/local/bin. A separate image, so the default one stays small (about 170 MB against 1 GB); its
tag digests the default image's tag, the requirement and this recipe, cached the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPOSITORY = "localhost/tidepool-pod"
TORCH_REPOSITORY = "localhost/tidepool-pod-torch"
SUITE = "bookworm"
# The python3 Debian's SUITE ships: the torch wheels are chosen for it, not for this Python.
IMAGE_PYTHON = "3.11"
TORCH_REQUIREMENT = "torch==2.13.0"
PACKAGES = ("python3",)
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Where the helper and the examples sit inside the image (on its PYTHONPATH).
INSIDE_ROOT = "/opt/tidepool"
# Bump when the recipe below changes in a way the digest of its inputs would not show.
RECIPE = "1"
TORCH_RECIPE = "1"

PROJECT_ROOT = Path(__file__).resolve().parents[3]
CONTENT_DIRS = ("tidepool_ckpt", "examples")


class ImageBuildError(RuntimeError):
    """The image could not be built; the message says which step failed and why."""


def _content_files(root: Path) -> list[Path]:
    files = []
    for name in CONTENT_DIRS:
        for path in sorted((root / name).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append(path)
    return files


def image_version(root: Path = PROJECT_ROOT) -> str:
    """The tag of the image the current sources give (changes when any input changes)."""
    digest = hashlib.sha256(f"{RECIPE}\0{SUITE}\0{','.join(PACKAGES)}\0{INSIDE_ROOT}".encode())
    for path in _content_files(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return f"{SUITE}-{digest.hexdigest()[:12]}"


def default_image(root: Path = PROJECT_ROOT) -> str:
    return f"{REPOSITORY}:{image_version(root)}"


def torch_image(root: Path = PROJECT_ROOT) -> str:
    """The name of the torch image the current sources give (`--with-torch`)."""
    digest = hashlib.sha256(f"{TORCH_RECIPE}\0{image_version(root)}\0{IMAGE_PYTHON}\0{TORCH_REQUIREMENT}".encode())
    return f"{TORCH_REPOSITORY}:{SUITE}-{digest.hexdigest()[:12]}"


def image_exists(name: str, podman: str = "podman") -> bool:
    try:
        return subprocess.run([podman, "image", "exists", name], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _run(step: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess[bytes]:
    try:
        result = subprocess.run(argv, capture_output=True, **kwargs)
    except FileNotFoundError:
        raise ImageBuildError(f"{step}: {argv[0]} is not installed (apt-get install -y podman runc debootstrap)") from None
    if result.returncode != 0:
        tail = (result.stderr or result.stdout or b"").decode(errors="replace").strip().splitlines()[-15:]
        raise ImageBuildError(f"{step} failed (exit {result.returncode}):\n" + "\n".join(tail))
    return result


def build_image(
    *,
    root: Path = PROJECT_ROOT,
    podman: str = "podman",
    mirror: str | None = None,
    force: bool = False,
    log=print,
) -> str:
    """Build (or find) the default pod image; returns its name. Raises ImageBuildError."""
    name = default_image(root)
    if not force and image_exists(name, podman):
        log(f"{name} is already in Podman's store")
        return name
    if os.geteuid() != 0:
        raise ImageBuildError("building the pod image needs root (debootstrap and rootful Podman)")
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap is not installed (apt-get install -y debootstrap)")
    mirror = mirror or os.environ.get("TIDEPOOL_POD_IMAGE_MIRROR") or DEFAULT_MIRROR
    with tempfile.TemporaryDirectory(prefix="tidepool-image-") as work:
        rootfs = Path(work) / "rootfs"
        log(f"debootstrap --variant=minbase --include={','.join(PACKAGES)} {SUITE} from {mirror} (about a minute)")
        _run("debootstrap", ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE,
                             str(rootfs), mirror], timeout=1800)
        # Nothing the image does not need: package lists and caches (a few tens of MB).
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / junk).glob("*"):
                if entry.is_file():
                    entry.unlink()
        inside = rootfs / INSIDE_ROOT.lstrip("/")
        inside.mkdir(parents=True)
        for directory in CONTENT_DIRS:
            shutil.copytree(root / directory, inside / directory,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        tarball = Path(work) / "rootfs.tar"
        _run("tar", ["tar", "-C", str(rootfs), "-cf", str(tarball), "."], timeout=600)
        log(f"podman import as {name}")
        _run("podman import", [
            podman, "import",
            "--change", f"ENV PYTHONPATH={INSIDE_ROOT}",
            "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--change", "ENV LANG=C.UTF-8",
            "--change", f"LABEL org.opencontainers.image.title=tidepool-pod tidepool.image.version={image_version(root)}",
            "--change", "CMD [\"/bin/sh\"]",
            str(tarball), name,
        ], timeout=600)
    log(f"built {name}")
    return name


# Containerfile of the torch image: the default image plus what pip installed (dist-packages and its
# scripts), both readable by the pod's non-root user since pip writes them 0644/0755.
TORCH_CONTAINERFILE = """FROM {base}
COPY site/ /usr/local/lib/python{python}/dist-packages/
COPY bin/ /usr/local/bin/
LABEL org.opencontainers.image.title=tidepool-pod-torch tidepool.image.version={version} tidepool.torch={requirement}
"""


def scripts_for_the_image(site: Path, bin_dir: Path) -> None:
    """pip --target leaves console scripts (torchrun, ...) in site/bin with this Python's path in
    their #! line: moved to bin_dir with the image's /usr/bin/python3 instead."""
    bin_dir.mkdir()
    scripts = site / "bin"
    if not scripts.is_dir():
        return
    for script in sorted(scripts.iterdir()):
        data = script.read_bytes()
        if data.startswith(b"#!"):
            first, _, rest = data.partition(b"\n")
            if b"python" in first:
                data = b"#!/usr/bin/python3\n" + rest
        target = bin_dir / script.name
        target.write_bytes(data)
        target.chmod(0o755)
    shutil.rmtree(scripts)


def build_torch_image(
    *,
    root: Path = PROJECT_ROOT,
    podman: str = "podman",
    mirror: str | None = None,
    force: bool = False,
    log=print,
) -> str:
    """Build (or find) the torch image; returns its name. Raises ImageBuildError."""
    name = torch_image(root)
    if not force and image_exists(name, podman):
        log(f"{name} is already in Podman's store")
        return name
    if os.geteuid() != 0:
        raise ImageBuildError("building the torch image needs root (rootful Podman)")
    base = build_image(root=root, podman=podman, mirror=mirror, log=log)
    with tempfile.TemporaryDirectory(prefix="tidepool-torch-image-") as work:
        context = Path(work)
        site = context / "site"
        log(f"pip install {TORCH_REQUIREMENT} for python {IMAGE_PYTHON} (pip's configured sources)")
        _run("pip install", [
            sys.executable, "-m", "pip", "install", "--quiet", "--no-cache-dir", "--disable-pip-version-check",
            "--no-warn-script-location", "--target", str(site), "--python-version", IMAGE_PYTHON,
            "--only-binary=:all:", TORCH_REQUIREMENT,
        ], timeout=1800)
        scripts_for_the_image(site, context / "bin")
        (context / "Containerfile").write_text(TORCH_CONTAINERFILE.format(
            base=base, python=IMAGE_PYTHON, version=name.split(":", 1)[1], requirement=TORCH_REQUIREMENT))
        log(f"podman build {name} (FROM {base})")
        _run("podman build", [podman, "build", "--quiet", "--pull=never", "--tag", name, str(context)], timeout=1800)
    log(f"built {name}")
    return name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="build-pod-image", description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="build even when the tag is already in the store")
    parser.add_argument("--mirror", help=f"Debian mirror (default $TIDEPOOL_POD_IMAGE_MIRROR or {DEFAULT_MIRROR})")
    parser.add_argument("--print-name", action="store_true", help="print the image name the sources give and exit")
    parser.add_argument("--with-torch", action="store_true",
                        help=f"build {TORCH_REPOSITORY}:<version> instead: the default image plus {TORCH_REQUIREMENT}")
    args = parser.parse_args(argv)
    name_of, build = (torch_image, build_torch_image) if args.with_torch else (default_image, build_image)
    if args.print_name:
        print(name_of())
        return 0
    try:
        # The name built, not one computed again: a file of its inputs edited meanwhile changes that.
        print(build(mirror=args.mirror, force=args.force, log=lambda line: print(line, file=sys.stderr)))
    except ImageBuildError as error:
        print(f"build-pod-image: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
