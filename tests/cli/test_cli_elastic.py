"""`tidepool submit --min-pods`: an elastic role (DESIGN §2c) from the command line."""

from __future__ import annotations

from tidepool_cli.main import submission
from tidepool_cli.parser import build_parser


def test_min_pods_makes_the_role_elastic() -> None:
    args = build_parser().parse_args(["submit", "--name", "e", "--pods", "4", "--min-pods", "1", "--idle-mode", "only",
                                      "--", "torchrun", "train.py"])
    assert submission(args)["roles"] == [{"pod_count": 4, "min_pod_count": 1}]


def test_without_min_pods_the_role_is_fixed() -> None:
    args = build_parser().parse_args(["submit", "--name", "e", "--pods", "4", "--", "train"])
    assert "min_pod_count" not in submission(args)["roles"][0]
