"""The pod images' names and the torch image's recipe (scheduler/node/runtime/image.py), without
building: the builds themselves are exercised by the container tests that use the images."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from scheduler.node.runtime import image
from scheduler.node.runtime.image import default_image, main, scripts_for_the_image, torch_image

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """A copy of what goes into the images (tidepool_ckpt/, examples/)."""
    for name in image.CONTENT_DIRS:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return tmp_path


def test_the_torch_image_has_its_own_name_that_follows_the_default_image_and_the_requirement(sources, monkeypatch):
    name = torch_image(sources)
    assert name.startswith("localhost/tidepool-pod-torch:bookworm-") and name != default_image(sources)
    assert torch_image(sources) == name  # the same sources, the same tag: cached
    (sources / "examples" / "ddp_multinode.py").write_text("# changed\n")
    changed = torch_image(sources)
    assert changed != name  # an example changed the default image, so the torch image on it too
    monkeypatch.setattr(image, "TORCH_REQUIREMENT", "torch==2.14.0")
    assert torch_image(sources) not in (name, changed)


def test_pips_scripts_get_the_images_python(tmp_path):
    site, bin_dir = tmp_path / "site", tmp_path / "bin"
    (site / "bin").mkdir(parents=True)
    (site / "bin" / "torchrun").write_text("#!/work/main/.venv/bin/python3.11\nfrom torch.distributed.run import main\n")
    (site / "bin" / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    (site / "torch").mkdir()
    scripts_for_the_image(site, bin_dir)
    assert (bin_dir / "torchrun").read_text() == "#!/usr/bin/python3\nfrom torch.distributed.run import main\n"
    assert (bin_dir / "tool.sh").read_text() == "#!/bin/sh\necho hi\n"  # not a Python script: as pip wrote it
    assert (bin_dir / "torchrun").stat().st_mode & 0o777 == 0o755
    assert not (site / "bin").exists() and (site / "torch").is_dir()  # only the scripts moved


def test_print_name_names_the_image_asked_for(capsys):
    assert main(["--print-name"]) == 0
    assert main(["--print-name", "--with-torch"]) == 0
    assert capsys.readouterr().out.split() == [default_image(), torch_image()]
