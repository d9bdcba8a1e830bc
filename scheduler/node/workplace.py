"""Where a pod's command runs, prepared for a first job: the embedded default's examples/ link and
what the exit hint (exit_hints.py) says when the command cannot find its file.

On the embedded default (`bin/start`: the local executor's demo nodes, pods as host processes) a
job without a code_mount runs in a new empty directory of its own. So that the command a newcomer
writes from the README, `python examples/train_linear.py`, runs there as it does in the checkout,
that directory gets `examples`, a link to the checkout's examples/ (docs/runtime.md, "Directories").
Nodes of a real cluster get no link: a job brings its code with its code_mount or image.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from django.conf import settings

from scheduler.models import Job, Node, Pod
from scheduler.node.exit_hints import WorkPlace
from scheduler.node.runtime.process import PodSpec
from scheduler.node.runtime.sandbox import prepare_dir, resolve_pod_user
from scheduler.paths import is_inside, workspace_data_root

log = logging.getLogger("tidepool.agent")

EXAMPLES_LINK = "examples"


def checkout_examples() -> Path:
    return Path(settings.BASE_DIR) / "examples"


def links_examples(job: Job, pod: Pod) -> bool:
    """A demo node running host processes, and a job in its own default directory."""
    node = pod.node
    return (not job.code_mount and node is not None and node.inventory_source == Node.InventorySource.DEMO
            and settings.TIDEPOOL_POD_RUNTIME == "host" and checkout_examples().is_dir())


def prepare_workplace(job: Job, pod: Pod, spec: PodSpec) -> WorkPlace:
    """The pod's WorkPlace; on the embedded default its working directory is created now with the
    examples link in it (a failure to link is logged and the pod starts without it)."""
    examples = False
    if links_examples(job, pod):
        try:
            root = next(root for root, path in spec.dirs if os.path.normpath(path) == os.path.normpath(spec.workdir)
                        and is_inside(path, root))
            prepare_dir(root, spec.workdir, resolve_pod_user(spec.user))  # as the runtime would, a moment later
            link = os.path.join(spec.workdir, EXAMPLES_LINK)
            if not os.path.lexists(link):
                os.symlink(checkout_examples(), link)
            examples = os.path.islink(link)
        except (OSError, StopIteration) as error:
            log.warning("pod %s: could not link examples/ into %s: %s", pod.pk, spec.workdir, error)
    return WorkPlace(workdir=spec.workdir, own_code=bool(job.code_mount),
                     code_root=str(workspace_data_root(job.workspace.name)), examples=examples)
