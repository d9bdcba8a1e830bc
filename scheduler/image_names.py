"""Container image references: `[registry[:port]/]name[:tag][@digest]` (pure Python, no Django).

The grammar is the OCI distribution one (what Podman and Docker accept): path components of
lowercase letters and digits joined by `.`, `_`, `__` or dashes; a registry is the first component
when it has a `.` or a `:` or is `localhost`; a tag is up to 128 of `[A-Za-z0-9_.-]` not starting
with `.` or `-`; a digest is `algorithm:hex` (`sha256:` and 64 hex digits). Checked at submission so
a typo is refused with the reason, not found on a node as a pod that waits for an image forever.
"""

from __future__ import annotations

import re

MAX_NAME_CHARS = 255  # the distribution spec's limit on the name (registry and path)

_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*")
_REGISTRY = re.compile(r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
                       r"(?::[0-9]{1,5})?")
_TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,}")
EXAMPLE = "e.g. pytorch/pytorch:2.3.1, registry.example.com:5000/team/train:v2 or name@sha256:<64 hex digits>"


def split_registry(name: str) -> tuple[str, str]:
    """(registry, path) of an image name without tag or digest; registry "" when it names none."""
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "", name


def image_reference_problem(reference: str) -> str | None:
    """Why `reference` is not an image reference Podman can use, or None when it is one."""
    if reference != reference.strip() or any(c.isspace() for c in reference):
        return f"Image {reference!r} has spaces in it: an image reference is one word ({EXAMPLE})."
    rest, at, digest = reference.partition("@")
    if at:
        if not _DIGEST.fullmatch(digest):
            return f"Image {reference!r} has a malformed digest {digest!r}: it is algorithm:hex ({EXAMPLE})."
        algorithm, _, hex_digits = digest.partition(":")
        if algorithm == "sha256" and len(hex_digits) != 64:
            return f"Image {reference!r}: a sha256 digest has 64 hex digits, not {len(hex_digits)}."
    name, tag = rest, ""
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:  # a colon after the last slash starts the tag (one before it is a registry port)
        name, tag = rest[: len(rest) - len(last)] + last.split(":", 1)[0], last.split(":", 1)[1]
        if not _TAG.fullmatch(tag):
            return (f"Image {reference!r} has a malformed tag {tag!r}: up to 128 letters, digits, '_', '.' or '-',"
                    f" not starting with '.' or '-' ({EXAMPLE}).")
    if not name:
        return f"Image {reference!r} names no repository ({EXAMPLE})."
    if len(name) > MAX_NAME_CHARS:
        return f"Image {reference!r}: its name is longer than {MAX_NAME_CHARS} characters."
    registry, path = split_registry(name)
    if registry:
        if not _REGISTRY.fullmatch(registry):
            return f"Image {reference!r} has a malformed registry {registry!r}: a host name with an optional :port."
        port = registry.rpartition(":")[2] if ":" in registry else ""
        if port and not 0 < int(port) <= 65535:
            return f"Image {reference!r}: registry port {port} is not between 1 and 65535."
    for component in path.split("/"):
        if not _COMPONENT.fullmatch(component):
            lowercase = " (repository names are lowercase)" if component.lower() != component else ""
            return (f"Image {reference!r} has a malformed repository part {component!r}{lowercase}: lowercase "
                    f"letters and digits joined by '.', '_' or '-' ({EXAMPLE}).")
    return None


def qualified(reference: str, registry: str) -> str:
    """`reference` with the operator's registry in front when it names none (TIDEPOOL_POD_REGISTRY)."""
    if not registry or split_registry(reference.partition("@")[0])[0]:
        return reference
    return f"{registry.rstrip('/')}/{reference}"
