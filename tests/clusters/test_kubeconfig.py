"""clusters/kubeconfig.py: the strict loader, field types, and no `kubernetes` import."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusters.kubeconfig import KubeconfigError, parse_kubeconfig

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
kind: Config
clusters: [{name: c, cluster: {server: "https://c.example:6443"%s}}]
users: [{name: u, user: {token: %s}}]
contexts: [{name: a, context: {cluster: c, user: u}}]
"""


def kubeconfig(cluster_extra="", token="abc"):
    return GOOD % (cluster_extra, token)


def alias_bomb(levels: int = 9) -> str:
    """The finding's shape: each level a list of nine aliases of the one before; the token is the last."""
    text = 'kind: Config\na: &a ["lolololololololololololololololololololol"]\n'
    for i in range(1, levels):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        text += f"{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
    last = chr(ord("a") + levels - 1)
    return text + (
        'clusters: [{name: c, cluster: {server: "https://c.example:6443"}}]\n'
        f"users: [{{name: u, user: {{token: *{last}}}}}]\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
    )


def test_a_plain_kubeconfig_parses():
    [context] = parse_kubeconfig(kubeconfig())
    assert (context.name, context.server, context.token, context.insecure_skip_tls_verify) == (
        "a",
        "https://c.example:6443",
        "abc",
        False,
    )


def test_an_alias_bomb_is_refused_without_expanding():
    started = time.monotonic()
    with pytest.raises(KubeconfigError, match=r"not valid YAML: YAML aliases \(\*a\) are not allowed at line 3"):
        parse_kubeconfig(alias_bomb())
    assert time.monotonic() - started < 1.0  # refused at the first alias, nothing expanded


def test_a_single_alias_is_refused_too():
    text = kubeconfig(token="&t abc") + "extra: *t\n"
    with pytest.raises(KubeconfigError, match="aliases"):
        parse_kubeconfig(text)


@pytest.mark.parametrize("tagged", ["!!binary YWJj", "!!str abc", "!!python/object/apply:os.system ['true']"])
def test_tags_are_refused(tagged):
    with pytest.raises(KubeconfigError, match="tags"):
        parse_kubeconfig(kubeconfig(token=tagged))


@pytest.mark.parametrize(
    "text, message",
    [
        (kubeconfig(token="12345"), "user 'u': token must be a string, not int"),
        (kubeconfig(token="[a, b]"), "user 'u': token must be a string, not list"),
        (kubeconfig(token="{x: 1}"), "user 'u': token must be a string, not dict"),
        (kubeconfig(token="true"), "user 'u': token must be a string, not bool"),
        (
            GOOD.replace('"https://c.example:6443"', "6443") % ("", "abc"),
            "cluster 'c': server must be a string, not int",
        ),
        (kubeconfig(", certificate-authority-data: 123"), "certificate-authority-data must be a string"),
        (kubeconfig().replace("user: u}", "user: u, namespace: 7}"), "context 'a': namespace must be a string"),
        (kubeconfig().replace("{cluster: c,", "{cluster: [c],"), "context 'a': cluster must be a string"),
    ],
)
def test_non_strings_where_strings_belong_are_refused(text, message):
    with pytest.raises(KubeconfigError, match=message.replace("(", r"\(")):
        parse_kubeconfig(text)


@pytest.mark.parametrize("value", ['"false"', '"true"', "'no'", "0", "1", '""'])
def test_insecure_skip_tls_verify_accepts_only_real_booleans(value):
    with pytest.raises(KubeconfigError, match="insecure-skip-tls-verify must be true or false"):
        parse_kubeconfig(kubeconfig(f", insecure-skip-tls-verify: {value}"))


@pytest.mark.parametrize("value, expected", [("true", True), ("false", False), ("null", False)])
def test_insecure_skip_tls_verify_booleans(value, expected):
    [context] = parse_kubeconfig(kubeconfig(f", insecure-skip-tls-verify: {value}"))
    assert context.insecure_skip_tls_verify is expected


def test_the_kubeconfig_module_does_not_import_kubernetes():
    code = "import sys, clusters.kubeconfig; print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_certificate_data_that_decodes_to_a_nul_is_refused():
    """The YAML's own strings are checked for NUL; the text decoded from base64 is checked too (PostgreSQL
    refuses to store it: a 500 on save)."""
    import base64

    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n\x00\n-----END CERTIFICATE-----\n").decode()
    with pytest.raises(KubeconfigError, match="CA: Null characters are not allowed"):
        parse_kubeconfig(kubeconfig(f", certificate-authority-data: {ca}"))
