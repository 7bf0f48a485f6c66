"""Which webhook URLs the server calls: ``--webhook-allow HOST[,HOST]`` (``create_app(webhook_allow=
...)``, ``webhook_allow`` in the config file).

A client that may start runs could otherwise make the server ``POST`` to any address it can
reach: its cloud's metadata service, a database's HTTP port, an admin page on loopback (SSRF).
So, unlike LangGraph Server (which calls any URL unless its deployment restricts them), this
server calls **no** webhook until its operator lists the hosts it may call; a run whose webhook
names another host is refused as it is created (a 422 naming the host and the option).

An entry is a host name (``hooks.example.com``, matched exactly, any port), ``*.example.com``
(any name under it), ``*`` (any name), an IP address (``127.0.0.1``, ``::1``) or a network
(``10.0.0.0/8``). Internal addresses (loopback, private, link-local, shared, reserved) are
reached only when listed: as the address or its network, or through a name listed exactly (the
operator named that host). A name allowed by a wildcard must resolve to public addresses only,
checked at each delivery; a plain ``http://`` delivery connects to the address checked (no DNS
rebinding in between), an ``https://`` one has its certificate checked for the name.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["WEBHOOK_OPTION", "DeliveryRefused", "Target", "WebhookPolicy", "redacted"]

WEBHOOK_OPTION = "--webhook-allow"
"""The command-line option that lists the hosts webhooks may call."""

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class DeliveryRefused(Exception):
    """A webhook the policy refuses to call now (its host resolves to an internal address that
    is not listed, or does not resolve): a failed attempt, its message safe to log."""


@dataclass(frozen=True)
class Target:
    """Where one delivery goes: the URL to ask and the ``Host`` header to send (a plain-HTTP
    delivery asks the checked address itself)."""

    url: str
    host_header: str | None = None


def redacted(url: str) -> str:
    """``url`` as logs and run records show it: no user, password, query or fragment (they may
    hold tokens).

    Example:
        >>> redacted("https://user:secret@hooks.example.com:8443/done?token=abc")
        'https://hooks.example.com:8443/done'
    """
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "<a malformed URL>"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}{parts.path}"


class WebhookPolicy:
    """The hosts webhooks may call (see the module docstring).

    Raises:
        ValueError: an entry is no host name, IP address or network.
    """

    def __init__(self, allow: Iterable[str]) -> None:
        self.entries: tuple[str, ...] = tuple(_split(allow))
        self._names: set[str] = set()
        self._suffixes: list[str] = []
        self._any_name = False
        self._networks: list[Network] = []
        for entry in self.entries:
            self._add(entry)

    def __repr__(self) -> str:
        return f"WebhookPolicy({list(self.entries)!r})"

    @property
    def enabled(self) -> bool:
        """Whether any webhook may be called at all."""
        return bool(self.entries)

    def _add(self, entry: str) -> None:
        text = entry.strip().lower()
        if text == "*":
            self._any_name = True
            return
        try:
            self._networks.append(ipaddress.ip_network(text.strip("[]"), strict=False))
            return
        except ValueError:
            pass
        name = text[2:] if text.startswith("*.") else text
        if not name or any(char in name for char in "/:@?#[] ") or name.startswith("."):
            raise ValueError(
                f"{WEBHOOK_OPTION} {entry!r} is no host: give a host name (hooks.example.com), "
                "*.example.com, *, an IP address or a network (10.0.0.0/8)"
            )
        if text.startswith("*."):
            self._suffixes.append("." + name)
        else:
            self._names.add(name)

    def problem(self, url: object) -> str | None:
        """Why a run may not have ``url`` as its webhook (None: it may)."""
        if not isinstance(url, str):
            return "webhook must be a URL string"
        if not self.enabled:
            return (
                "this server calls no webhooks: its operator allows the hosts webhooks may call "
                f"with {WEBHOOK_OPTION} HOST (none is allowed by default)"
            )
        try:
            parts = urllib.parse.urlsplit(url)
            host, _ = parts.hostname, parts.port
        except ValueError:
            return f"webhook {redacted(url)!r} is not a valid URL"
        if parts.scheme not in ("http", "https") or not host:
            return f"webhook must be an absolute http:// or https:// URL, not {redacted(url)!r}"
        if not self.names_host(host):
            allowed = ", ".join(self.entries)
            return (
                f"webhook host {host!r} is not allowed on this server (allowed: {allowed}); "
                f"its operator may add it with {WEBHOOK_OPTION} {host}"
            )
        return None

    def names_host(self, host: str) -> bool:
        """Whether an entry allows ``host`` (a name or an IP address)."""
        host = host.lower().rstrip(".")
        address = _address(host)
        if address is not None:
            return self._listed(address)
        return (
            self._any_name
            or host in self._names
            or any(host.endswith(suffix) for suffix in self._suffixes)
        )

    def _listed(self, address: Address) -> bool:
        return any(address in network for network in self._networks)

    async def target(self, url: str) -> Target:
        """Where to deliver to ``url`` now: its host resolved and checked.

        Raises:
            DeliveryRefused: the host is no longer allowed, does not resolve, or resolves to an
                internal address that is not listed.
        """
        parts = urllib.parse.urlsplit(url)
        host = (parts.hostname or "").lower().rstrip(".")
        if not self.names_host(host):
            raise DeliveryRefused(f"host {host!r} is not allowed ({WEBHOOK_OPTION})")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        literal = _address(host)
        addresses = [literal] if literal is not None else await _resolve(host, port)
        trusted = host in self._names  # named exactly by the operator
        for address in addresses:
            if not address.is_global and not trusted and not self._listed(address):
                raise DeliveryRefused(
                    f"host {host!r} resolves to the internal address {address}, which "
                    f"{WEBHOOK_OPTION} does not list"
                )
        if parts.scheme == "https" or literal is not None:
            return Target(url)
        pinned = f"[{addresses[0]}]" if addresses[0].version == 6 else str(addresses[0])
        netloc = f"{pinned}:{parts.port}" if parts.port is not None else pinned
        header = host if parts.port is None else f"{host}:{parts.port}"
        return Target(urllib.parse.urlunsplit(parts._replace(netloc=netloc)), header)


def _split(allow: Iterable[str]) -> list[str]:
    """The entries of ``allow``, each possibly a comma-separated list."""
    if isinstance(allow, str):
        allow = [allow]
    return [part.strip() for item in allow for part in item.split(",") if part.strip()]


def _address(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def _resolve(host: str, port: int) -> list[Address]:
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise DeliveryRefused(f"host {host!r} does not resolve ({exc.strerror or exc})") from exc
    found = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not found:
        raise DeliveryRefused(f"host {host!r} does not resolve")
    return found
