"""A network namespace of a test's own, with veth links to the root namespace that the
test can cut as a network partition does: `iptables` DROP inside the namespace, both
ways, so that packets vanish without a word (no RST, no ICMP) and open connections hang.

Only addresses of the test's own links are used: each link is a /30 of 10.233.0.0/16,
the root end .1 and the namespace's end .2; servers listen inside the namespace only.
Needs root, `ip` and `iptables`; `destroy` removes the namespace, its links and rules.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from dataclasses import dataclass

from tests.support import unavailable


def require_netns() -> None:
    """Skip without root, ip or iptables on a developer's machine; fail in CI."""
    if os.geteuid() != 0:
        unavailable("network namespaces need root")
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} not found (apt-get install iproute2 iptables)")


def _run(*cmd: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr}")
    return done.stdout


@dataclass(frozen=True)
class Link:
    """A veth pair: `root_ip` on the root namespace's end, `ns_ip` on the namespace's
    end `device`."""

    device: str
    root_ip: str
    ns_ip: str


class Namespace:
    def __init__(self) -> None:
        self.name = f"cv{os.urandom(4).hex()}"
        _run("ip", "netns", "add", self.name)
        self.run("ip", "link", "set", "lo", "up")

    def prefix(self) -> list[str]:
        """Run a command inside: `[*prefix(), cmd...]`."""
        return ["ip", "netns", "exec", self.name]

    def run(self, *cmd: str) -> str:
        return _run(*self.prefix(), *cmd)

    def link(self) -> Link:
        """A new veth pair between the root namespace and this one, on a free /30."""
        taken = _run("ip", "-o", "-4", "addr", "show")
        while True:
            net, last = f"10.233.{random.randrange(256)}", random.randrange(0, 256, 4)
            if f"inet {net}.{last + 1}/" not in taken:
                break
        suffix = os.urandom(3).hex()
        root_dev, ns_dev = f"cvr{suffix}", f"cvn{suffix}"
        link = Link(ns_dev, f"{net}.{last + 1}", f"{net}.{last + 2}")
        _run("ip", "link", "add", root_dev, "type", "veth", "peer", "name", ns_dev,
             "netns", self.name)
        _run("ip", "addr", "add", f"{link.root_ip}/30", "dev", root_dev)
        _run("ip", "link", "set", root_dev, "up")
        self.run("ip", "addr", "add", f"{link.ns_ip}/30", "dev", ns_dev)
        self.run("ip", "link", "set", ns_dev, "up")
        return link

    def _rules(self, link: Link, action: str) -> None:
        self.run("iptables", action, "INPUT", "-i", link.device, "-j", "DROP")
        self.run("iptables", action, "OUTPUT", "-o", link.device, "-j", "DROP")

    def cut(self, link: Link) -> None:
        """Drop every packet over `link`, both ways."""
        self._rules(link, "-I")

    def heal(self, link: Link) -> None:
        self._rules(link, "-D")

    def destroy(self) -> None:
        """The namespace goes, and with it its ends of the links (so the root ends too)
        and its rules."""
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30,
                       check=False)
