"""clusters.versions: the one Kubernetes-version parser (FedPortal and the fleet simulator)."""

import pytest

from clusters.versions import KubeVersion, minor_of, parse_version


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v1.27.3", KubeVersion(1, 27, 3)),
        ("v1.27.3-eks-1", KubeVersion(1, 27, 3)),
        ("v1.27.3-eks-4f4795d", KubeVersion(1, 27, 3)),
        ("v1.28.2+k3s1", KubeVersion(1, 28, 2)),
        ("1.27", KubeVersion(1, 27, 0)),
        (" v1.30 ", KubeVersion(1, 30, 0)),
        ("", None),
        ("garbage", None),
        ("v2.0.0", None),
        ("١.٢٧", None),  # Arabic-Indic digits: a version is ASCII (the list filter reads it with isdecimal/isascii)
        ("1.²⁷", None),
        (None, None),
        (127, None),
    ],
)
def test_parse_version(text, expected):
    assert parse_version(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v1.27.3", KubeVersion(1, 27, 3)),
        ("v1.27.3-eks-1", KubeVersion(1, 27, 3)),
        ("v1.28.2+k3s1", KubeVersion(1, 28, 2)),
        ("1.27.3", None),  # no v
        ("v1.27", None),  # no patch
        ("1.29", None),
        ("v1.27.3-", None),
    ],
)
def test_full_accepts_only_what_an_apiserver_reports(text, expected):
    assert parse_version(text, full=True) == expected


def test_minor_of_takes_ints_git_versions_and_minor_versions():
    assert [minor_of(v) for v in (27, "v1.27.3-eks-1", "1.29", "nope", True, None)] == [27, 27, 29, None, None, None]
