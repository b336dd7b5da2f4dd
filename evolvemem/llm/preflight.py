"""Preflight: is the model endpoint there at all, before any work is done?

A closed port or a dead host would otherwise surface as one failed call per question after the
memories were built. One GET of `{api_base}/models` (any HTTP answer, even 404, means a server is
listening) turns that into one line naming the endpoint, the models behind it and the reason.
Without an `api_base` (a hosted provider) there is nothing local to check."""

from __future__ import annotations

import base64
import socket
import urllib.error
import urllib.parse
import urllib.request

PREFLIGHT_TIMEOUT = 10.0


def split_credentials(url: str) -> tuple[str, str | None]:
    """`http://user:pw@host/v1` → (`http://host/v1`, a Basic Authorization header): urllib does not
    take credentials inside a URL, the server behind it (a proxy) still wants them."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), f"Basic {token}"


def endpoint_problem(api_base: str, timeout: float = PREFLIGHT_TIMEOUT) -> str | None:
    """None when a server answers at `api_base`, else why not (connection refused, no answer, …)."""
    url, auth = split_credentials(f"{api_base.rstrip('/')}/models")
    request = urllib.request.Request(url, headers={"Authorization": auth} if auth else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout):  # noqa: S310 - the user's own endpoint
            return None
    except urllib.error.HTTPError:
        return None  # a server answered, just not this route
    except (socket.timeout, TimeoutError):
        return f"no answer within {timeout:.0f} s"
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return f"no answer within {timeout:.0f} s"
        return str(getattr(reason, "strerror", None) or reason)
    except (OSError, ValueError) as exc:
        return str(exc)
